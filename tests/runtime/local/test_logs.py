"""Container logs: one file per container, the previous incarnation kept, following a live one."""

from __future__ import annotations

import threading

import pytest

from muster.runtime.base import Container, DeviceBinding, PodNotFound, PodRef
from muster.runtime.local.logs import LogFiles, container_log, follow_lines, rotate
from tests.runtime.local.conftest import gated, launch, py, run_pod


class TestLogFiles:
    def test_each_container_has_its_own_log_with_stdout_and_stderr(self, runtime, muster_home):
        pod = launch(
            "chatty",
            Container("a", py("import sys; print('out-a'); print('err-a', file=sys.stderr)")),
            Container("b", py("print('out-b')")),
        )
        run_pod(runtime, pod)
        assert sorted(runtime.logs(pod.ref, "a")) == ["err-a\n", "out-a\n"]
        assert list(runtime.logs(pod.ref, "b")) == ["out-b\n"]
        assert (muster_home / "logs" / "default" / "chatty" / "a.log").is_file()
        with pytest.raises(PodNotFound, match="name one of: a, b"):
            list(runtime.logs(pod.ref))
        with pytest.raises(PodNotFound, match="no container 'c'"):
            list(runtime.logs(pod.ref, "c"))

    def test_previous_incarnation_log_is_kept_once(self, runtime):
        for attempt in (1, 2, 3):
            pod = launch("retry", Container("main", py(f"print('attempt {attempt}')")), uid=f"u{attempt}")
            run_pod(runtime, pod)
            runtime.release(pod.ref)
        ref = PodRef("default", "retry", "")
        assert list(runtime.logs(ref)) == ["attempt 3\n"]
        assert list(runtime.logs(ref, previous=True)) == ["attempt 2\n"]

    def test_each_log_records_the_owner_of_its_incarnation(self, runtime):
        first = {"kind": "TrainingJob", "name": "mnist", "uid": "job-a"}
        second = {"kind": "TrainingJob", "name": "mnist", "uid": "job-b"}
        for uid, owner in (("p1", first), ("p2", second)):
            pod = launch("mnist-master-0", Container("main", py(f"print({uid!r})")), uid=uid, owner=owner)
            run_pod(runtime, pod)
            runtime.release(pod.ref)
        ref = PodRef("default", "mnist-master-0", "")
        assert runtime.log_owner(ref) == second
        assert runtime.log_owner(ref, previous=True) == first
        assert runtime.log_owner(PodRef("default", "never-ran", "")) is None
        bare = launch("bare", Container("main", ("true",)), uid="u-bare")
        run_pod(runtime, bare)
        assert runtime.log_owner(bare.ref) == {"kind": "Pod", "name": "bare", "uid": "u-bare"}

    def test_no_previous_log_before_a_second_incarnation(self, runtime):
        pod = launch("first", Container("main", ("true",)))
        run_pod(runtime, pod)
        with pytest.raises(PodNotFound, match="no previous log"):
            list(runtime.logs(pod.ref, previous=True))

    def test_follow_streams_until_the_container_ends(self, runtime, tmp_path):
        gate = tmp_path / "gate"
        code = (
            "import os, time\nprint('first', flush=True)\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
            "print('second', flush=True)\nprint('no newline', end='')"
        )
        pod = launch("follow", Container("main", py(code)))
        runtime.start(pod, DeviceBinding())
        stream = runtime.logs(pod.ref, follow=True)
        assert next(stream) == "first\n"  # blocks until the process wrote it
        gate.touch()
        assert list(stream) == ["second\n", "no newline"]  # ends once the process has ended

    def test_follow_of_an_ended_pod_just_reads(self, runtime):
        pod = launch("ended", Container("main", py("print('x')")))
        run_pod(runtime, pod)
        assert list(runtime.logs(pod.ref, follow=True)) == ["x\n"]

    def test_the_files_alone_follow_as_the_runtime_does(self, runtime, muster_home, tmp_path):
        gate = tmp_path / "gate"
        pod = launch("files", Container("main", gated(gate)))
        runtime.start(pod, DeviceBinding())
        stream = LogFiles(muster_home).logs(PodRef("default", "files", ""), follow=True)
        assert next(stream) == "ready\n"
        gate.touch()
        assert list(stream) == []  # ends once the process has ended

    def test_cancel_ends_a_follow_of_a_live_container(self, runtime, tmp_path):
        pod = launch("live", Container("main", gated(tmp_path / "never")))
        runtime.start(pod, DeviceBinding())
        cancel = threading.Event()
        stream = runtime.logs(pod.ref, follow=True, cancel=cancel)
        assert next(stream) == "ready\n"
        rest: list[str] = []
        reader = threading.Thread(target=lambda: rest.extend(stream))
        reader.start()
        cancel.set()
        reader.join(timeout=10)
        assert not reader.is_alive() and rest == []


class TestLogHelpers:
    def test_rotate_keeps_one_previous(self, tmp_path):
        log = container_log(tmp_path, "ns", "pod", "main")
        rotate(log)  # nothing to keep yet
        assert not log.exists() and log.parent.is_dir()
        log.write_text("one\n")
        rotate(log)
        log.write_text("two\n")
        rotate(log)
        assert container_log(tmp_path, "ns", "pod", "main", previous=True).read_text() == "two\n"
        assert not log.exists()

    def test_utf8_split_across_reads_and_invalid_bytes(self, tmp_path, monkeypatch):
        import muster.runtime.local.logs as logs

        monkeypatch.setattr(logs, "_CHUNK", 3)
        path = tmp_path / "x.log"
        path.write_bytes("héllo wörld\n".encode() + b"bad \xff byte\n")
        assert list(follow_lines(path)) == ["héllo wörld\n", "bad \ufffd byte\n"]
