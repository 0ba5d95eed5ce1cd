"""Server processes that tests start: output goes to a log file, and each is stopped by its PID.

A test that starts etcd or kube-apiserver must leave nothing behind on a shared machine, so
:meth:`ManagedProcess.stop` ends the process and every descendant it finds by PID (never by name),
politely first (SIGTERM) and then by force (SIGKILL).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil

__all__ = ["ManagedProcess", "end_processes_under"]


def end_processes_under(root: Path, timeout: float = 5.0) -> list[int]:
    """End this user's processes that work in ``root`` or name it on their command line: the
    pods (model servers, trainers) a test's ``muster up`` left running, since pods outlive
    the server by design (a restart re-adopts them). SIGTERM, then SIGKILL after ``timeout``
    seconds; returns the PIDs found."""
    base = str(root.resolve())
    me = os.getpid()
    found: list[psutil.Process] = []
    for proc in psutil.process_iter(["pid", "uids", "cwd", "cmdline"]):
        info = proc.info
        if info["pid"] == me or info["uids"] is None or info["uids"].real != os.getuid():
            continue
        cwd = info["cwd"] or ""
        if cwd == base or cwd.startswith(base + os.sep) or any(base in a for a in info["cmdline"] or ()):
            found.append(proc)
    _terminate(found)
    _kill_survivors(found, timeout)
    return [p.pid for p in found]


class ManagedProcess:
    """One child process with its stdout and stderr in ``log_path``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._env = dict(os.environ if env is None else env)
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> ManagedProcess:
        """Start the process (once); returns self so a caller can chain ``.start()``."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} was already started (pid {self._popen.pid})")
        with self.log_path.open("ab") as log:
            # A session of its own keeps a Ctrl-C in the test's terminal from killing the server
            # before the test's own teardown stops it in order.
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int:
        """The PID; the process must have been started."""
        if self._popen is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._popen.pid

    def running(self) -> bool:
        """True while the process has not exited."""
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self) -> int | None:
        """The exit status once the process has exited, else None."""
        return None if self._popen is None else self._popen.poll()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def describe_failure(self) -> str:
        """A message for a process that died or never became ready: exit status and log tail."""
        code = self.exit_code()
        state = "is still running" if code is None else f"exited with status {code}"
        return f"{self.name} {state}; log {self.log_path}, last lines:\n{self.log_tail()}"

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process and its descendants: SIGTERM, then SIGKILL after ``timeout`` seconds.

        Safe to call more than once and on a process that already exited.
        """
        if self._popen is None or self._popen.poll() is not None:
            return
        try:
            children = psutil.Process(self._popen.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        self._popen.terminate()
        _terminate(children)
        # The parent is waited for through Popen (not psutil) so its real exit status is kept.
        try:
            self._popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._popen.kill()
            self._popen.wait(timeout=timeout)
        _kill_survivors(children, timeout)


def _terminate(procs: list[psutil.Process]) -> None:
    """SIGTERM each (one already gone is fine)."""
    for proc in procs:
        try:
            proc.terminate()
        except psutil.NoSuchProcess:
            pass


def _kill_survivors(procs: list[psutil.Process], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``procs`` to end, SIGKILL the rest and reap them."""
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout)
