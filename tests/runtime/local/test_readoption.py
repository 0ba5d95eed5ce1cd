"""Re-adoption: a runtime started on the same MUSTER_HOME after the previous one died takes its pods over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from muster.runtime.base import Container, DeviceBinding, PodPhase, PodReason, PodRef, StopReason
from muster.runtime.local.files import claim, write_json
from muster.runtime.local.runtime import LocalRuntime
from muster.runtime.local.shim import command as shim_command
from muster.runtime.local.spawner import Spawner
from muster.runtime.local.tracking import process_alive
from muster.testing import wait_for
from tests.runtime.local.conftest import IGNORES_TERM, Watcher, gated, launch, py, shutdown, wait_log


@pytest.fixture
def new_runtime(muster_home):
    """Makes runtimes on the test's home; stops and closes the last one at the end."""
    made: list[LocalRuntime] = []

    def make(**options) -> LocalRuntime:
        rt = LocalRuntime(muster_home, **options)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        if not rt._closed:
            shutdown(rt)


def _start_running(rt: LocalRuntime, pod, watcher: Watcher | None = None) -> object:
    """Start ``pod``, wait until its process says 'ready' and runs; return its container's record."""
    rt.start(pod, DeviceBinding())
    wait_log(rt, pod.ref, "ready")
    (watcher or Watcher(rt)).wait_phase(pod.ref, PodPhase.RUNNING)
    return rt._pods[pod.ref.uid].containers[0]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _launched_unspawned(rt: LocalRuntime, monkeypatch, marks, name: str):
    """A pod whose one container appends to ``marks``, launched on ``rt`` as if the runtime
    died after recording the launch, before its spawner started the shim: (pod, its files)."""
    monkeypatch.setattr(rt._starter, "spawn", lambda uid, files: None)
    pod = launch(name, Container("main", ("sh", "-c", f"echo run >> {marks}")))
    rt.start(pod, DeviceBinding())
    monkeypatch.undo()
    return pod, rt._pods[pod.ref.uid].containers[0].files


class TestReadoptionInProcess:
    def test_a_launch_whose_shim_never_started_is_started_once_by_the_next_runtime(
        self, new_runtime, tmp_path, monkeypatch
    ):
        a = new_runtime()
        marks = tmp_path / "runs"
        pod, _ = _launched_unspawned(a, monkeypatch, marks, "late")
        a.close()
        assert not marks.exists()
        b = new_runtime()
        final = Watcher(b).wait_final(pod.ref)
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
        assert marks.read_text() == "run\n"
        b.close()
        again = new_runtime()  # a third runtime finds it ended: nothing starts twice
        assert {s.ref.uid: s.phase for s in again.pods()} == {pod.ref.uid: PodPhase.SUCCEEDED}
        assert marks.read_text() == "run\n"

    @pytest.mark.parametrize("zygote", [True, False], ids=["zygote", "interpreter"])
    def test_a_shim_start_the_spawner_has_not_reached_is_waited_for(
        self, new_runtime, tmp_path, monkeypatch, zygote
    ):
        # A burst can keep the zygote (or the spawner's workers) busy longer than the launch
        # timeout: a start not answered yet is not "stopped before it started", its result
        # always comes.
        import muster.runtime.local.spawn as spawn

        if zygote and not Spawner.supported():
            pytest.skip("the zygote needs Linux (/proc, pidfd)")
        go = threading.Event()
        monkeypatch.setattr("muster.runtime.local.tracking.LAUNCH_TIMEOUT", 0.0)
        a = new_runtime(zygote=zygote)
        if zygote:
            real_answers = a._spawner.answers
            monkeypatch.setattr(a._spawner, "answers", lambda: real_answers() if go.is_set() else [])
        else:
            real = spawn._start_shim

            def held(*args):
                go.wait(30)
                return real(*args)

            monkeypatch.setattr(spawn, "_start_shim", held)
        marks = tmp_path / "runs"
        pod = launch("queued", Container("main", ("sh", "-c", f"echo run >> {marks}")))
        a.start(pod, DeviceBinding())
        watcher = Watcher(a)
        for _ in range(3):
            watcher.pump(0.05)
        assert not any(c.final for c in watcher.of(pod.ref))
        go.set()
        final = watcher.wait_final(pod.ref)
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
        assert marks.read_text() == "run\n"

    def test_a_start_cut_short_before_its_record_is_started_afresh(self, new_runtime, tmp_path, monkeypatch):
        a = new_runtime()
        marks = tmp_path / "runs"
        pod = launch("cut-spec", Container("main", ("sh", "-c", f"echo run >> {marks}")))

        def crash_at_the_spec(path, data):  # the server dies while writing the container's spec
            if path.name.endswith(".spec.json"):
                raise KeyboardInterrupt
            write_json(path, data)

        monkeypatch.setattr("muster.runtime.local.runtime.write_json", crash_at_the_spec)
        with pytest.raises(KeyboardInterrupt):
            a.start(pod, DeviceBinding())
        a._pods.clear()  # what a dead server remembers
        a.close()
        monkeypatch.undo()
        b = new_runtime()
        assert b.pods() == []  # nothing of it ran: not adopted (and so never reported lost)
        b.start(pod, DeviceBinding())  # the executor's retry of the start
        final = Watcher(b).wait_final(pod.ref)
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
        assert marks.read_text() == "run\n"

    def test_a_shim_that_has_not_recorded_itself_is_not_started_twice(
        self, new_runtime, tmp_path, monkeypatch
    ):
        a = new_runtime()
        marks = tmp_path / "runs"
        pod, files = _launched_unspawned(a, monkeypatch, marks, "unrecorded")
        a.close()
        # A shim the zygote forked holds the container's lock but has not written launch.json
        # (its command line is the zygote's: nothing else can tell it runs).
        lock = claim(files)
        assert lock is not None
        b = new_runtime()
        assert b._starter.pending == 0  # no second shim
        os.close(lock)
        subprocess.Popen(
            shim_command(files.pod_dir, "main"), start_new_session=True, stdout=subprocess.DEVNULL
        )
        final = Watcher(b).wait_final(pod.ref)  # found once it records itself
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
        assert marks.read_text() == "run\n"

    def test_a_second_shim_of_a_container_exits_without_running_it(self, new_runtime, tmp_path, monkeypatch):
        marks = tmp_path / "runs"
        a = new_runtime()
        _, files = _launched_unspawned(a, monkeypatch, marks, "twice")
        a.close()
        lock = claim(files)
        try:
            done = subprocess.run(
                shim_command(files.pod_dir, "main"), capture_output=True, text=True, timeout=30
            )
        finally:
            os.close(lock)  # type: ignore[arg-type]
        assert done.returncode == 0
        assert "another shim already runs container 'main'" in done.stderr
        assert not marks.exists() and not files.launch.exists() and not files.status.exists()

    def test_runtime_b_sees_running_pods_and_their_later_end(self, new_runtime, tmp_path):
        a = new_runtime()
        long_gate, quick_gate = tmp_path / "long", tmp_path / "quick"
        long_pod = launch("long", Container("main", gated(long_gate, 0)))
        quick_pod = launch("quick", Container("main", gated(quick_gate, 7)))
        for pod in (long_pod, quick_pod):
            a.start(pod, DeviceBinding())
            wait_log(a, pod.ref, "ready")
        a.close()  # the server is gone; its pods are not

        quick_gate.touch()  # one pod ends while no runtime is watching
        home_pods = a.dir / "pods" / "default"
        wait_for(
            lambda: (home_pods / "quick" / quick_pod.ref.uid / "main.status.json").exists(),
            30,
            what="quick to end",
        )

        b = new_runtime()
        w = Watcher(b)
        first = {c.ref.name: c for c in w.pump(0.0)}
        assert first["long"].phase == PodPhase.RUNNING and first["long"].containers[0].pid
        assert (first["quick"].phase, first["quick"].reason, first["quick"].exit_code) == (
            PodPhase.FAILED,
            PodReason.ERROR,
            7,
        )
        assert w.pump(0.0) == []  # reported once
        assert b.readopt() == []  # nothing new to adopt

        long_gate.touch()
        final = w.wait_final(long_pod.ref)
        assert (final.phase, final.reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)

    def test_adopted_pod_can_be_stopped_with_the_handshake(self, new_runtime, tmp_path):
        a = new_runtime()
        pod = launch(
            "victim",
            Container(
                "main",
                py(
                    "import signal, sys, time\n"
                    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                    "print('ready', flush=True)\nwhile True: time.sleep(0.05)"
                ),
            ),
        )
        a.start(pod, DeviceBinding())
        wait_log(a, pod.ref, "ready")
        a.close()
        b = new_runtime()
        b.stop(pod.ref, 30, StopReason.PREEMPTED)
        final = Watcher(b).wait_final(pod.ref)
        assert (final.reason, final.exit_code) == (PodReason.PREEMPTED, 0)

    def test_a_stop_in_progress_when_the_server_died_is_finished(self, new_runtime):
        a = new_runtime()
        pod = launch("mid-stop", Container("main", py(IGNORES_TERM)))
        a.start(pod, DeviceBinding())
        wait_log(a, pod.ref, "ready")
        a.stop(pod.ref, 0.5, StopReason.DEADLINE_EXCEEDED)
        a.close()  # dies during the grace period: the shim still kills after it
        b = new_runtime()
        final = Watcher(b).wait_final(pod.ref)
        assert (final.reason, final.exit_code) == (PodReason.DEADLINE_EXCEEDED, 137)


class TestServerKilled:
    def test_sigkilled_server_is_replaced_and_exit_codes_are_not_lost(
        self, muster_home, new_runtime, tmp_path
    ):
        gate = tmp_path / "gate"
        script = textwrap.dedent(
            f"""
            import sys, time
            from pathlib import Path
            from muster.runtime.base import Container, DeviceBinding, PodLaunch, PodRef
            from muster.runtime.local.runtime import LocalRuntime
            rt = LocalRuntime(Path({str(muster_home)!r}))
            for name, code in (("exits-7", 7), ("exits-0", 0)):
                cmd = (sys.executable, "-c", "import os, sys, time\\n"
                       "while not os.path.exists({str(gate)!r}): time.sleep(0.02)\\nsys.exit(%d)" % code)
                pod = PodLaunch(PodRef("default", name, "uid-" + name), (Container("main", cmd),))
                rt.start(pod, DeviceBinding())
            running = set()
            while len(running) < 2:
                running.update(p.ref.name for p in rt.poll(0.5) if p.phase == "Running")
            print("started", flush=True)
            time.sleep(600)
            """
        )
        with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as server:
            try:
                assert server.stdout is not None
                assert server.stdout.readline().strip() == "started"
            finally:
                server.kill()  # SIGKILL: no cleanup of any kind

        b = new_runtime()  # the lock died with the server
        w = Watcher(b)
        assert {c.ref.name: c.phase for c in w.pump(0.0)} == {
            "exits-7": PodPhase.RUNNING,
            "exits-0": PodPhase.RUNNING,
        }
        gate.touch()
        f7 = w.wait_final(PodRef("default", "exits-7", "uid-exits-7"))
        f0 = w.wait_final(PodRef("default", "exits-0", "uid-exits-0"))
        assert (f7.reason, f7.exit_code, f0.reason, f0.exit_code) == (
            PodReason.ERROR,
            7,
            PodReason.COMPLETED,
            0,
        )


class TestLostShims:
    def test_killed_shim_with_live_process_is_watched_and_reported_node_lost(self, new_runtime, tmp_path):
        gate = tmp_path / "gate"
        rt = new_runtime()
        pod = launch("orphan", Container("main", gated(gate)))
        rt.start(pod, DeviceBinding())
        w = Watcher(rt)
        running = w.wait_phase(pod.ref, PodPhase.RUNNING)
        c = rt._pods[pod.ref.uid].containers[0]
        os.kill(c.shim_pid, signal.SIGKILL)
        wait_for(
            lambda: (w.pump(0.1), rt._pods[pod.ref.uid].containers[0].orphan)[1], 30, what="orphan noticed"
        )
        assert process_alive(running.containers[0].pid, c.ctime)  # the process itself runs on
        gate.touch()
        final = w.wait_final(pod.ref)
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.FAILED, PodReason.NODE_LOST, None)
        assert "exit status unknown" in final.message

    def test_stopping_an_orphan_signals_its_group_directly(self, new_runtime):
        rt = new_runtime()
        pod = launch("orphan-stop", Container("main", py(IGNORES_TERM)))
        w = Watcher(rt)
        c = _start_running(rt, pod, w)
        os.kill(c.shim_pid, signal.SIGKILL)
        wait_for(lambda: (w.pump(0.1), c.orphan)[1], 30, what="orphan noticed")
        pid = c.pid
        rt.stop(pod.ref, 0.3, StopReason.PREEMPTED)
        final = w.wait_final(pod.ref)
        assert final.reason == PodReason.PREEMPTED  # the caller's reason, even without an exit code
        wait_for(lambda: not process_alive(pid, c.ctime), 10, what="the orphan to be killed")

    def test_a_stop_whose_shim_dies_during_the_grace_is_finished_by_the_runtime(self, new_runtime):
        rt = new_runtime()
        pod = launch("orphaned-mid-stop", Container("main", py(IGNORES_TERM)))
        w = Watcher(rt)
        c = _start_running(rt, pod, w)
        rt.stop(pod.ref, 2, StopReason.PREEMPTED)
        os.kill(c.shim_pid, signal.SIGKILL)  # the shim cannot SIGKILL after the grace any more
        final = w.wait_final(pod.ref)
        assert final.reason == PodReason.PREEMPTED
        assert not process_alive(c.pid, c.ctime)

    def test_shim_and_process_both_gone_without_a_status_is_node_lost(self, new_runtime, tmp_path):
        a = new_runtime()
        c = _start_running(a, launch("vanished", Container("main", gated(tmp_path / "never"))))
        shim_pid, pid = c.shim_pid, c.pid
        a.close()
        os.kill(shim_pid, signal.SIGKILL)
        _kill_group(pid)
        wait_for(lambda: not process_alive(pid, c.ctime) and not process_alive(shim_pid, c.shim_ctime), 10)
        b = new_runtime()
        (final,) = Watcher(b).pump(0.0)
        assert (final.phase, final.reason) == (PodPhase.FAILED, PodReason.NODE_LOST)
        assert "exit status is unknown" in final.message

    def test_recorded_start_times_guard_against_reused_pids(self, new_runtime, tmp_path):
        a = new_runtime()
        c = _start_running(a, launch("reused", Container("main", gated(tmp_path / "never"))))
        a.close()
        # Pretend the recorded pids now belong to other processes: same pids, other start times.
        for path in (c.files.state, c.files.launch):
            doc = json.loads(path.read_text())
            for key in ("create_time", "shim_create_time"):
                if key in doc:
                    doc[key] -= 1000
            write_json(path, doc)
        try:
            b = new_runtime()
            (final,) = Watcher(b).pump(0.0)
            assert final.reason == PodReason.NODE_LOST  # never mistaken for the live processes
        finally:
            os.kill(c.shim_pid, signal.SIGKILL)
            _kill_group(c.pid)

    def test_a_launch_cut_short_before_the_shim_started_is_node_lost(self, new_runtime, muster_home):
        a = new_runtime()
        a.close()
        pod_dir = a.dir / "pods" / "default" / "cut" / "uid-cut"
        pod_dir.mkdir(parents=True)
        doc = {
            "namespace": "default",
            "name": "cut",
            "uid": "uid-cut",
            "containers": ["main"],
            "grace_seconds": 30,
            "created_at": time.time() - 120,
        }
        write_json(pod_dir / "pod.json", doc)
        b = new_runtime()
        assert b.readopt() == []  # adopted at construction already
        (final,) = Watcher(b).pump(0.0)
        assert (final.reason, final.message) == (
            PodReason.NODE_LOST,
            "container 'main': the runtime stopped before it started the shim",
        )
