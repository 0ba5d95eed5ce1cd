from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil

from muster.testing import wait_for
from muster.testing.processes import ManagedProcess, end_processes_under


def test_stop_ends_the_process_and_its_children(tmp_path: Path) -> None:
    # The child ignores SIGTERM, so stop() must escalate to SIGKILL for it.
    child_code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('child up', flush=True); time.sleep(600)"
    )
    script = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {child_code!r}])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    process = ManagedProcess("sleeper", [sys.executable, "-c", script], tmp_path / "sleeper.log").start()
    log = tmp_path / "sleeper.log"
    # Parent and child write to the same log in either order.
    wait_for(lambda: "child up" in log.read_text(), timeout=30, what="the child to start")
    child_pid = int(wait_for(lambda: re.search(r"^(\d+)$", log.read_text(), re.M), what="the child pid")[1])
    assert process.running() and psutil.pid_exists(child_pid)

    process.stop(timeout=2)

    assert not process.running()
    assert process.exit_code() == -15  # ended by SIGTERM
    assert not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    process.stop()  # a second stop is harmless


def test_failure_description_names_the_exit_status_and_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('bad flag --x'); sys.exit(3)"]
    process = ManagedProcess("broken", argv, tmp_path / "broken.log").start()
    wait_for(lambda: not process.running(), timeout=30, what="the process to exit")

    message = process.describe_failure()

    assert "broken exited with status 3" in message
    assert "bad flag --x" in message
    assert str(tmp_path / "broken.log") in message


def test_what_runs_under_a_home_is_ended_and_nothing_else(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    (home / "pods").mkdir(parents=True)
    elsewhere.mkdir()
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    # start_new_session: detached like a pod whose server has gone
    inside = subprocess.Popen(sleep, cwd=home / "pods", start_new_session=True)
    outside = subprocess.Popen(sleep, cwd=elsewhere, start_new_session=True)
    try:
        wait_for(lambda: psutil.Process(inside.pid).cwd() == str(home / "pods"), what="the pod's cwd")

        ended = end_processes_under(home, timeout=2)

        assert ended == [inside.pid]
        inside.wait(timeout=10)  # psutil has reaped it already: its status is gone with it
        assert not psutil.pid_exists(inside.pid)
        assert outside.poll() is None
    finally:
        for proc in (inside, outside):
            proc.kill()
            proc.wait()
