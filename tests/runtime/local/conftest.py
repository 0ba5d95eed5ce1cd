"""Fixtures for the local runtime: a runtime on a private MUSTER_HOME that cleans up after itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from muster.runtime.base import Container, DeviceBinding, PodLaunch, PodRef, PodStatusChange, StopReason
from muster.runtime.local.fake import parse_fake_gpus
from muster.runtime.local.runtime import LocalRuntime
from muster.testing import wait_for

PY = sys.executable

# Exits 0 on SIGTERM (a checkpoint would be written here), after saying it is ready.
TRAPS_TERM = """
import signal, sys, time
def on_term(signum, frame):
    print("checkpointed", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""

IGNORES_TERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def py(code: str) -> tuple[str, ...]:
    """A command running ``code`` with this interpreter."""
    return (PY, "-c", code)


def gated(gate: Path, code: int = 0) -> tuple[str, ...]:
    """A process that prints 'ready', waits for ``gate`` to exist, then exits with ``code``."""
    return py(
        f"import os, sys, time\nprint('ready', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\nsys.exit({code})"
    )


def launch(
    name: str, *containers: Container, uid: str | None = None, ns: str = "default", **kw: object
) -> PodLaunch:
    return PodLaunch(PodRef(ns, name, uid or f"uid-{name}"), tuple(containers), **kw)  # type: ignore[arg-type]


class Watcher:
    """Collects a runtime's status changes; waits for conditions on them without sleeping on hope."""

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime
        self.changes: list[PodStatusChange] = []

    def pump(self, timeout: float = 0.2) -> list[PodStatusChange]:
        new = self.runtime.poll(timeout)
        self.changes.extend(new)
        return new

    def of(self, ref: PodRef) -> list[PodStatusChange]:
        return [c for c in self.changes if c.ref == ref]

    def wait_phase(self, ref: PodRef, phase: str, timeout: float = 30.0) -> PodStatusChange:
        def seen() -> PodStatusChange | None:
            self.pump()
            return next((c for c in self.of(ref) if c.phase == phase), None)

        return wait_for(seen, timeout, what=f"{ref} to be {phase}")

    def wait_final(self, ref: PodRef, timeout: float = 30.0) -> PodStatusChange:
        def seen() -> PodStatusChange | None:
            self.pump()
            return next((c for c in self.of(ref) if c.final), None)

        return wait_for(seen, timeout, what=f"{ref} to end")


def run_pod(runtime: LocalRuntime, pod: PodLaunch, devices: DeviceBinding | None = None) -> PodStatusChange:
    """Start ``pod`` and return its final status."""
    runtime.start(pod, devices or DeviceBinding())
    return Watcher(runtime).wait_final(pod.ref)


def wait_log(runtime: LocalRuntime, ref: PodRef, text: str, container: str | None = None) -> None:
    """Wait until the container's log contains ``text`` (how tests know a process is ready)."""
    wait_for(lambda: text in "".join(runtime.logs(ref, container)), 30, what=f"{text!r} in the log of {ref}")


def shutdown(runtime: LocalRuntime) -> None:
    """Stop whatever still runs (grace 0), wait for it to end, close the runtime."""
    if runtime._closed:
        return
    live = [p.ref for p in runtime.pods() if not p.final]
    for ref in live:
        runtime.stop(ref, 0, StopReason.STOPPED)
    wait_for(lambda: (runtime.poll(0.2), all(p.final for p in runtime.pods()))[1], 30, what="pods to end")
    runtime.close()


@pytest.fixture
def fake_gpus_spec() -> str:
    return "4:A100:80Gi"


@pytest.fixture
def runtime(muster_home: Path, fake_gpus_spec: str) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(muster_home, fake_gpus=parse_fake_gpus(fake_gpus_spec), node="test-node")
    yield rt
    shutdown(rt)


@pytest.fixture
def watcher(runtime: LocalRuntime) -> Watcher:
    return Watcher(runtime)
