"""The zygote that starts shims by forking (muster.runtime.local.spawner): containers start and
end as with a shim per interpreter; a dead zygote is replaced; running shims outlive it."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from muster.runtime.base import Container, DeviceBinding, PodPhase, PodReason
from muster.runtime.local.files import read_json
from muster.runtime.local.runtime import LocalRuntime
from muster.runtime.local.shim import PACKAGE_ROOT
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
    assert "muster.runtime.local.zygote" in " ".join(zygote.cmdline())


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


def test_a_burst_of_starts_is_answered_in_order_each_pod_with_its_own_shim(
    runtime: LocalRuntime, watcher: Watcher, tmp_path: Path
):
    # Every start is asked of the zygote before any answer is read: the answers must still go
    # to the pods they are for (each shim records its own pid, under its container's lock).
    marks = tmp_path / "marks"
    marks.mkdir()
    pods = [launch(f"p{i}", Container("main", ("sh", "-c", f"echo {i} > {marks}/p{i}"))) for i in range(24)]
    for pod in pods:
        runtime.start(pod, DeviceBinding())
    assert runtime._spawner.waiting > 0  # asked, not answered yet: start() did not wait
    for pod in pods:
        final = watcher.wait_final(pod.ref)
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
    for i, pod in enumerate(pods):
        c = runtime._pods[pod.ref.uid].containers[0]
        assert c.shim_pid == read_json(c.files.launch)["shim_pid"]
        assert (marks / f"p{i}").read_text() == f"{i}\n"


def test_starts_asked_of_a_zygote_that_dies_unanswered_run_once_all_the_same(
    runtime: LocalRuntime, watcher: Watcher, tmp_path: Path
):
    run_pod(runtime, launch("warm", Container("main", py("pass"))))  # the zygote runs
    zygote = _zygote(runtime)
    os.kill(zygote.pid, signal.SIGSTOP)  # it takes no request: they wait in its socket
    marks = tmp_path / "runs"
    pods = [launch(f"late{i}", Container("main", ("sh", "-c", f"echo {i} >> {marks}"))) for i in range(3)]
    for pod in pods:
        runtime.start(pod, DeviceBinding())
    assert runtime._spawner.waiting == 3
    os.kill(zygote.pid, signal.SIGKILL)
    for pod in pods:
        final = watcher.wait_final(pod.ref)  # started the old way, a shim of its own
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
    assert sorted(marks.read_text().split()) == ["0", "1", "2"]


def test_an_answer_the_zygote_sent_before_dying_is_taken_not_started_again(
    runtime: LocalRuntime, watcher: Watcher, tmp_path: Path
):
    run_pod(runtime, launch("warm", Container("main", py("pass"))))  # the zygote runs
    zygote = _zygote(runtime)
    gate, marks = tmp_path / "go", tmp_path / "runs"
    pod = launch(
        "answered",
        Container("main", ("sh", "-c", f"echo run >> {marks}; while [ ! -e {gate} ]; do sleep 0.02; done")),
    )
    runtime.start(pod, DeviceBinding())  # asked; the runtime reads no answer until it polls
    sock = runtime._spawner._sock
    assert sock is not None
    wait_for(lambda: bool(select.select([sock], [], [], 0)[0]), what="the zygote's answer")
    os.kill(zygote.pid, signal.SIGKILL)
    wait_for(
        lambda: not zygote.is_running() or zygote.status() == psutil.STATUS_ZOMBIE, what="the zygote to die"
    )
    # The next start finds it dead and starts another: its answer is read before its socket goes.
    after = launch("next", Container("main", py("pass")))
    runtime.start(after, DeviceBinding())
    assert watcher.wait_final(after.ref).phase == PodPhase.SUCCEEDED
    watcher.wait_phase(pod.ref, PodPhase.RUNNING)
    c = runtime._pods[pod.ref.uid].containers[0]
    assert c.shim_pid == read_json(c.files.launch)["shim_pid"]  # the zygote's shim, not a second
    gate.touch()
    final = watcher.wait_final(pod.ref)
    assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
    assert marks.read_text() == "run\n"


def test_the_zygote_imports_nothing_its_shims_do_not_need():
    # Every page the zygote maps is mapped, copied as touched and unmapped by every shim it forks:
    # a module it imports for nothing is paid for by every container.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import muster.runtime.local.zygote; "
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-S", "-E", "-c", code, PACKAGE_ROOT], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "muster.runtime.local.shim" in loaded
    heavy = {
        # threading's at-fork handler made every shim touch ~130 more pages; subprocess imports it
        "threading",
        "subprocess",
        "dataclasses",
        "inspect",
        "ast",
        "psutil",
        "pydantic",
        "sqlalchemy",
        "muster.api",
        "muster.store",
    }
    assert not heavy & loaded
