"""One kubemark hollow node: a real kubelet with a fake container runtime and a fake machine.

Pods bound to it really go through the kubelet (admission against allocatable, ContainerCreating,
Running) but their containers never exit, so tests that need exits use
:func:`muster.testing.kube_kubelet.set_pod_status` on API-registered nodes instead.

The hollow kubelet uses a fixed fake-runtime socket (``/tmp/kubelet_remote.sock``) and healthz
port (127.0.0.1:10248), so at most one runs per machine: a lock file serializes them across
processes. Its root directory is a fresh ``/tmp/hollow-kubelet.*`` (kubemark hard-codes /tmp),
removed with the socket when the node stops. Its kubelet port (given a free one) listens on all
interfaces, which kubemark does not let us change.

The kubelet reports Ready only on its second node-status update, 10 s after registering (its
update period in kubemark); the node is declared Ready as soon as it registered, which the
kubelet then keeps confirming.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from muster.testing import free_port, wait_for
from muster.testing.kube_kubelet import KubeletRole
from muster.testing.processes import ManagedProcess

__all__ = ["MACHINE_LOCK", "run_hollow_node"]

MACHINE_LOCK = Path("/tmp/muster-kubemark.lock")
_RUNTIME_SOCKET = Path("/tmp/kubelet_remote.sock")
_ROOT_DIR_LOG = re.compile(r"Using (/tmp/hollow-kubelet\.\d+) as root dir")
_LOCK_TIMEOUT = 300.0
_READY_TIMEOUT = 120.0


@contextlib.contextmanager
def run_hollow_node(
    kubelet: KubeletRole,
    kubemark: Path,
    kubeconfig: Path,
    workdir: Path,
    name: str,
    labels: Mapping[str, str],
    capacity: Mapping[str, str | int],
) -> Iterator[ManagedProcess]:
    """Run the hollow node until the block ends; then stop it and delete its Node object."""
    core = kubelet.core_api()
    workdir.mkdir(parents=True, exist_ok=True)
    with _machine_turn():
        env = dict(os.environ, TMPDIR=str(workdir), NO_PROXY="127.0.0.1,localhost")
        env.pop("KUBECONFIG", None)
        argv = [
            str(kubemark),
            "--morph=kubelet",
            f"--name={name}",
            f"--kubeconfig={kubeconfig}",
            f"--kubelet-port={free_port()}",
            "--kubelet-read-only-port=0",
        ]
        if labels:
            argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
        process = ManagedProcess(f"kubemark-{name}", argv, workdir / "kubemark.log", env).start()
        try:
            try:
                wait_for(
                    lambda: not process.running() or _node_registered(core, name),
                    timeout=_READY_TIMEOUT,
                    what=f"hollow node {name} to register",
                )
            except TimeoutError as exc:
                raise RuntimeError(f"{exc}; {process.describe_failure()}") from None
            if not process.running():
                raise RuntimeError(f"hollow node {name}: {process.describe_failure()}")
            if capacity:
                extra = {key: str(value) for key, value in capacity.items()}
                # The kubelet keeps extended resources it does not manage and derives allocatable
                # from capacity on its next status update; setting both makes them visible now.
                core.patch_node_status(name, {"status": {"capacity": extra, "allocatable": extra}})
            # Ready now rather than at the kubelet's next update; this also lifts the not-ready
            # taint that admission put on the new node, as the node lifecycle controller would.
            kubelet.set_node_ready(name, True)
            yield process
        finally:
            process.stop()
            _delete_node(core, name)
            _remove_kubelet_files(process.log_path)


@contextlib.contextmanager
def _machine_turn() -> Iterator[None]:
    with MACHINE_LOCK.open("a") as lock:

        def acquired() -> bool:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        wait_for(acquired, timeout=_LOCK_TIMEOUT, interval=0.5, what=f"the kubemark lock {MACHINE_LOCK}")
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _node_registered(core: Any, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_node(name)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _remove_kubelet_files(log_path: Path) -> None:
    """Remove what the stopped hollow kubelet left in /tmp: its root dir (named in its log) and socket."""
    match = _ROOT_DIR_LOG.search(log_path.read_text(errors="replace")) if log_path.exists() else None
    if match:
        shutil.rmtree(match.group(1), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        _RUNTIME_SOCKET.unlink()


def _delete_node(core: Any, name: str) -> None:
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_node(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
