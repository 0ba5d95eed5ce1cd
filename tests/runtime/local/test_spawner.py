"""The zygote that starts shims by forking (muster.runtime.local.spawner): containers start and
end as with a shim per interpreter; a dead zygote is replaced; running shims outlive it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from muster.runtime.base import Container, DeviceBinding, PodPhase, PodReason
from muster.runtime.local.runtime import LocalRuntime
from muster.runtime.local.spawner import Spawner
from muster.testing import wait_for
from tests.runtime.local.conftest import Watcher, gated, launch, py, run_pod

pytestmark = pytest.mark.skipif(not Spawner.supported(), reason="the zygote needs Linux (/proc, pidfd)")


def _zygote(runtime: LocalRuntime) -> psutil.Process:
    zygote = runtime._spawner._zygote
    assert zygote is not None, "no zygote started"
    return psutil.Process(zygote.pid)


def test_containers_start_through_the_zygote_not_a_new_interpreter(runtime: LocalRuntime):
    final = run_pod(runtime, launch("ok", Container("main", py("import os; print(os.getppid())"))))
    assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
    zygote = _zygote(runtime)
    record = runtime._pods["uid-ok"]
    shim_pid = record.containers[0].shim_pid
    assert shim_pid is not None and shim_pid != zygote.pid
    # The shim was forked by the zygote, not started by the runtime.
    assert psutil.Process(zygote.pid).cmdline()[1:3] == ["-S", "-E"]
    assert "muster.runtime.local.spawner" in " ".join(zygote.cmdline())


def test_a_stop_reaches_the_shim_through_its_pidfd(runtime: LocalRuntime, watcher: Watcher, tmp_path: Path):
    pod = launch("waits", Container("main", gated(tmp_path / "never")), termination_grace_seconds=5)
    runtime.start(pod, DeviceBinding())
    watcher.wait_phase(pod.ref, PodPhase.RUNNING)
    runtime.stop(pod.ref, 5, "Preempted")
    final = watcher.wait_final(pod.ref)
    assert final.phase == PodPhase.FAILED and final.reason == "Preempted"


def test_a_killed_zygote_is_replaced_and_its_running_shims_go_on(
    runtime: LocalRuntime, watcher: Watcher, tmp_path: Path
):
    gate = tmp_path / "go"
    first = launch("first", Container("main", gated(gate)))
    runtime.start(first, DeviceBinding())
    watcher.wait_phase(first.ref, PodPhase.RUNNING)
    old = _zygote(runtime)
    os.kill(old.pid, signal.SIGKILL)
    wait_for(lambda: not old.is_running() or old.status() == psutil.STATUS_ZOMBIE, what="the zygote to die")

    second = run_pod(runtime, launch("second", Container("main", py("print('after')"))))
    assert second.phase == PodPhase.SUCCEEDED
    assert _zygote(runtime).pid != old.pid

    gate.touch()  # the shim of the first pod outlived its zygote and still reports
    final = watcher.wait_final(first.ref)
    assert (final.phase, final.exit_code) == (PodPhase.SUCCEEDED, 0)


def test_closing_the_runtime_ends_the_zygote(muster_home: Path):
    runtime = LocalRuntime(muster_home)
    try:
        run_pod(runtime, launch("ok", Container("main", py("pass"))))
        zygote = _zygote(runtime)
    finally:
        runtime.close()
    wait_for(lambda: not zygote.is_running() or zygote.status() == psutil.STATUS_ZOMBIE, what="zygote exit")


def test_without_the_zygote_each_shim_is_its_own_interpreter(muster_home: Path):
    runtime = LocalRuntime(muster_home, zygote=False)
    try:
        final = run_pod(runtime, launch("ok", Container("main", py("pass"))))
        assert final.phase == PodPhase.SUCCEEDED
        assert runtime._spawner._zygote is None
    finally:
        runtime.close()
