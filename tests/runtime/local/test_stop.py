"""Stopping pods: SIGTERM to the process group, the grace period, SIGKILL, and the reason recorded."""

from __future__ import annotations

import pytest

from muster.runtime.base import Container, DeviceBinding, PodPhase, PodReason, StopReason
from muster.runtime.local.tracking import process_alive
from muster.testing import wait_for
from tests.runtime.local.conftest import IGNORES_TERM, TRAPS_TERM, launch, py, wait_log


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class TestGracefulStop:
    @pytest.mark.parametrize(
        "reason", [StopReason.PREEMPTED, StopReason.STOPPED, StopReason.DEADLINE_EXCEEDED]
    )
    def test_process_that_exits_on_sigterm_gets_the_callers_reason(self, runtime, watcher, reason):
        pod = launch("trap", Container("main", py(TRAPS_TERM)))
        runtime.start(pod, DeviceBinding())
        wait_log(runtime, pod.ref, "ready")
        runtime.stop(pod.ref, 30, reason)
        final = watcher.wait_final(pod.ref, timeout=20)  # well inside the grace: it exited on its own
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.FAILED, PodReason(reason.value), 0)
        assert "exited with code 0 after SIGTERM" in final.message
        assert "checkpointed" in "".join(runtime.logs(pod.ref))

    def test_process_that_ignores_sigterm_is_killed_after_the_grace(self, runtime, watcher):
        pod = launch("stubborn", Container("main", py(IGNORES_TERM)))
        runtime.start(pod, DeviceBinding())
        wait_log(runtime, pod.ref, "ready")
        runtime.stop(pod.ref, 0.5, StopReason.PREEMPTED)
        final = watcher.wait_final(pod.ref)
        (c,) = final.containers
        assert (final.reason, c.exit_code, c.signal) == (PodReason.PREEMPTED, 137, 9)
        assert "still running 0.5s after SIGTERM; killed" in c.message

    def test_a_second_stop_shortens_the_grace_and_keeps_the_first_reason(self, runtime, watcher):
        pod = launch("twice", Container("main", py(IGNORES_TERM)))
        runtime.start(pod, DeviceBinding())
        wait_log(runtime, pod.ref, "ready")
        runtime.stop(pod.ref, 3600, StopReason.PREEMPTED)
        runtime.stop(pod.ref, 0, StopReason.STOPPED)
        final = watcher.wait_final(pod.ref)
        assert (final.reason, final.exit_code) == (PodReason.PREEMPTED, 137)

    def test_default_grace_is_the_pods_termination_grace(self, runtime, watcher):
        pod = launch("default-grace", Container("main", py(IGNORES_TERM)), termination_grace_seconds=0.2)
        runtime.start(pod, DeviceBinding())
        wait_log(runtime, pod.ref, "ready")
        runtime.stop(pod.ref, None, StopReason.EVICTED)
        final = watcher.wait_final(pod.ref)
        assert (final.reason, final.exit_code) == (PodReason.EVICTED, 137)


class TestStopEdges:
    def test_stop_right_after_start_keeps_the_process_from_running(self, runtime, watcher, tmp_path):
        marker = tmp_path / "ran"
        pod = launch("early", Container("main", py(f"open({str(marker)!r}, 'w').close()")))
        runtime.start(pod, DeviceBinding())
        runtime.stop(pod.ref, 5, StopReason.STOPPED)
        final = watcher.wait_final(pod.ref)
        assert (final.phase, final.reason) == (PodPhase.FAILED, PodReason.STOPPED)
        # Either the shim saw the stop before starting the process, or it died by the SIGTERM
        # before it could install its handlers; in both cases the process never ran.
        if not marker.exists():
            assert "before the process started" in final.message
        else:  # the process won the race and ran to completion before the stop arrived
            assert final.containers[0].exit_code == 0

    def test_stopping_a_final_pod_does_nothing(self, runtime, watcher):
        pod = launch("done", Container("main", ("true",)))
        runtime.start(pod, DeviceBinding())
        first = watcher.wait_final(pod.ref)
        runtime.stop(pod.ref, 0, StopReason.PREEMPTED)
        assert watcher.pump(0.0) == []
        assert runtime.pods()[0].reason == first.reason == PodReason.COMPLETED

    def test_stop_reaches_the_whole_process_group(self, runtime, watcher, tmp_path):
        pidfile = tmp_path / "child.pid"
        script = f"sleep 300 & echo $! > {pidfile}; echo ready; wait"
        pod = launch("group", Container("main", ("sh", "-c", script)))
        runtime.start(pod, DeviceBinding())
        wait_log(runtime, pod.ref, "ready")
        child = int(pidfile.read_text())
        assert _pid_alive(child)
        runtime.stop(pod.ref, 5, StopReason.STOPPED)
        watcher.wait_final(pod.ref)
        wait_for(lambda: not _pid_alive(child), 10, what="the background child to be gone")

    def test_what_a_finished_main_process_leaves_behind_is_killed(self, runtime, watcher, tmp_path):
        pidfile = tmp_path / "child.pid"
        pod = launch("leftover", Container("main", ("sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0")))
        runtime.start(pod, DeviceBinding())
        final = watcher.wait_final(pod.ref)
        assert final.reason == PodReason.COMPLETED
        wait_for(lambda: not _pid_alive(int(pidfile.read_text())), 10, what="the leftover child to be gone")

    def test_process_identity_check_rejects_a_wrong_start_time(self, runtime, watcher):
        pod = launch("ident", Container("main", py(IGNORES_TERM)))
        runtime.start(pod, DeviceBinding())
        running = watcher.wait_phase(pod.ref, PodPhase.RUNNING)
        c = runtime._pods[pod.ref.uid].containers[0]
        assert process_alive(running.containers[0].pid, c.ctime)
        assert not process_alive(running.containers[0].pid, c.ctime - 5)  # same pid, other process
        runtime.stop(pod.ref, 0, StopReason.STOPPED)
        watcher.wait_final(pod.ref)
