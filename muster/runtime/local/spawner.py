"""Starting shims without starting Python: a fork server ("zygote") per runtime.

A shim is a Python process (:mod:`muster.runtime.local.shim`); started as ``python -m ...`` it
pays an interpreter start-up and its imports for every container, which measured as most of
the CPU a burst of short jobs costs. Instead the runtime starts one zygote: a Python process
that has imported the shim once and waits on a Unix socket. For each container the runtime
sends it the shim's arguments with two descriptors (the start-notification pipe and the shim
log); the zygote forks, and the child becomes the shim (new session, its own cwd and stdio)
without an exec. The zygote answers with the child's pid and a pidfd, which the runtime uses
as it used a Popen: to see the shim end and to signal it.

Crash safety is unchanged: a shim is in a session of its own, keeps its state in files, and
outlives the zygote as it outlives the server; the zygote only ever *starts* shims. It exits
when the runtime closes its end of the socket (the server stopped or died). If the zygote is
gone or cannot start, the runtime starts the shim the old way (:func:`shim.command`).

Forking the server itself would be simpler but unsafe: it runs threads (a fork copies locks
held by other threads). The zygote has one thread and nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import NamedTuple

from muster.runtime.local import procfs
from muster.runtime.local.shim import PACKAGE_ROOT

__all__ = ["LOST", "Answer", "ShimProcess", "Spawner", "zygote_main"]

_MAX_MESSAGE = 65536
_SEND_TIMEOUT = 10.0  # a zygote that takes no request for this long is treated as gone
# The zygote's interpreter: no site (no .pth files, no site-packages scan), no PYTHON* variables;
# the shim needs the standard library and Muster's own directory only.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from muster.runtime.local.spawner import zygote_main; zygote_main(int(sys.argv[1]))"
)


class ShimProcess:
    """A shim the zygote forked: what the runtime needs of a Popen (``pid``, ``poll()``,
    ``send_signal()``), through a pidfd (the shim is the zygote's child, not ours)."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self._pidfd: int | None = pidfd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """None while the shim runs; once it has ended, 0 (its outcome is in its status file)."""
        if self._pidfd is not None and select.select([self._pidfd], [], [], 0)[0]:
            self._close()
            self.returncode = 0
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def _close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self) -> None:
        self._close()


class Answer(NamedTuple):
    """The zygote's answer to one :meth:`Spawner.ask`: the shim it forked, or why none. (Not a
    dataclass: the zygote imports this module, and ``dataclasses`` brings ``inspect`` and
    ``ast``, whose pages every forked shim would map, copy and unmap.)"""

    key: object  # what the asker passed along with the request
    process: ShimProcess | None
    create_time: float | None  # the shim's, as psutil gives it
    error: str = ""  # why no shim started; LOST: the zygote went away before answering


LOST = "the zygote went away before it answered"


class Spawner:
    """The runtime's side of the zygote. :meth:`ask` sends a request and returns at once; the
    zygote's answers, in the order asked, come from :meth:`answers` once its :meth:`socket` is
    readable. The runtime's thread never waits for a fork, and no thread of ours waits for one
    either (with four worker threads doing the round trips, a thousand one-pod jobs cost the
    server about 1.1 s more CPU, half a second of it in the kernel). Thread-safe."""

    def __init__(self, enabled: bool = True) -> None:
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        # Disabled, or the zygote could not start: the runtime starts each shim itself.
        self._failed = not enabled
        self._asked: deque[object] = deque()  # keys of the requests not answered yet, in order
        self._answers: list[Answer] = []  # received, not handed out yet
        self._started = 0  # zygotes started so far

    @staticmethod
    def supported() -> bool:
        return procfs.available() and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")

    @property
    def waiting(self) -> int:
        """Requests asked that no answer came back for yet."""
        with self._lock:
            return len(self._asked)

    def socket(self) -> tuple[int, int] | None:
        """The zygote's socket (readable once answers came, or once the zygote is gone), as
        (its number, the descriptor); None while no zygote runs. The number tells a new
        socket from an old one closed whose descriptor was reused."""
        with self._lock:
            return (self._started, self._sock.fileno()) if self._sock is not None else None

    def ask(self, key: object, pod_dir: Path, container: str, notify_fd: int, log_fd: int) -> bool:
        """Ask the zygote to start the shim of ``container``; False when no zygote serves (the
        caller then starts the shim as a subprocess). ``key`` comes back with the answer."""
        if self._failed or not self.supported():
            return False
        request = json.dumps({"podDir": str(pod_dir), "container": container}).encode()
        with self._lock:
            sock = self._connect()
            if sock is None:
                return False
            deadline = time.monotonic() + _SEND_TIMEOUT
            while True:
                try:
                    socket.send_fds(sock, [request], [notify_fd, log_fd])
                except BlockingIOError:
                    # Its queue is full: take its answers off ours (it may be waiting to send
                    # them), then wait for room.
                    self._receive()
                    if self._sock is not sock or time.monotonic() > deadline:
                        return False
                    select.select([sock], [sock], [], 0.05)
                    continue
                except OSError:
                    self._lose()  # gone: what it was asked before is lost with it
                    return False
                self._asked.append(key)
                return True

    def answers(self) -> list[Answer]:
        """The answers come since the last call (never waits); requests the zygote went away
        with come back with error :data:`LOST`."""
        with self._lock:
            self._receive()
            out, self._answers = self._answers, []
            return out

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the answers to every request asked so far."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._asked and self._sock is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                select.select([self._sock], [], [], left)
                self._receive()

    def close(self) -> None:
        with self._lock:
            self._lose()

    def _connect(self) -> socket.socket | None:
        if self._sock is not None and self._zygote is not None and self._zygote.poll() is None:
            return self._sock
        self._lose()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-S", "-E", "-c", _BOOT, PACKAGE_ROOT, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # a Ctrl-C of the server's terminal is not the zygote's
            )
        except OSError:
            ours.close()
            self._failed = True
            return None
        finally:
            theirs.close()
        ours.setblocking(False)
        self._sock = ours
        self._started += 1
        return ours

    def _receive(self) -> None:
        """Take every answer waiting on the socket; at its end (the zygote gone), lose the rest."""
        if not self._read():
            self._lose()

    def _read(self) -> bool:
        """Take the answers waiting on the socket; False once it has ended."""
        sock = self._sock
        while sock is not None:
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 1)
            except BlockingIOError:
                return True
            except OSError:
                data, fds = b"", []
            if not data:
                return False
            answer = json.loads(data)
            if not self._asked:  # cannot happen: the zygote answers requests only
                for fd in fds:
                    os.close(fd)
                continue
            key = self._asked.popleft()
            if "pid" in answer and fds:
                process = ShimProcess(int(answer["pid"]), fds[0])
                self._answers.append(Answer(key, process, answer.get("createTime")))
                continue
            for fd in fds:
                os.close(fd)
            error = answer.get("error") or "the zygote could not start the shim"
            self._answers.append(Answer(key, None, None, error))
        return False

    def _lose(self) -> None:
        """Close the socket (the zygote sees its end and exits): the requests it did not
        answer come back as lost. Answers it sent before it died are read first: those shims
        run, and must not be started a second time."""
        if self._sock is not None:
            self._read()
            self._sock.close()
            self._sock = None
        if self._zygote is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=5)
            self._zygote = None
        while self._asked:
            self._answers.append(Answer(self._asked.popleft(), None, None, LOST))


def zygote_main(fd: int) -> None:
    """The zygote's loop: one request, one fork, one answer; exits at EOF."""
    # Imported here, once, so that every forked shim finds it loaded.
    from muster.runtime.local import shim

    # A shim reads its own start time first thing: the boot time that takes (and the codec that
    # reading /proc as text loads) are read here once, or each shim would pay ~2-5 ms for them.
    procfs.create_time(os.getpid())
    # What the zygote holds now is every shim's too, shared until written: frozen, a shim's
    # collections never walk it, so they do not copy its pages (Python's recipe for fork
    # without exec). A running shim's private memory: 2.55-2.60 -> 2.30-2.37 MB.
    gc.freeze()
    sock = socket.socket(fileno=fd)
    sock.settimeout(1.0)  # wake up now and then to reap ended shims
    while True:
        _reap()
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 2)
        except TimeoutError:
            continue
        except OSError:
            return
        if not data:
            return  # the runtime is gone
        if len(fds) != 2:
            for extra in fds:
                os.close(extra)
            _answer(sock, {"error": "a request needs the notify pipe and the log"})
            continue
        notify_fd, log_fd = fds
        request = json.loads(data)
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(notify_fd)
            os.close(log_fd)
            _answer(sock, {"error": f"fork: {exc}"})
            continue
        if pid == 0:
            code = 1
            try:
                sock.close()
                code = _become_shim(shim, request, notify_fd, log_fd)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        # Opened before the next _reap(): the child cannot have been reaped (and its pid reused).
        pidfd = os.pidfd_open(pid)
        os.close(notify_fd)
        os.close(log_fd)
        _answer(sock, {"pid": pid, "createTime": procfs.create_time(pid)}, [pidfd])
        os.close(pidfd)


def _become_shim(shim: object, request: dict, notify_fd: int, log_fd: int) -> int:
    os.setsid()  # the shim and its process outlive the zygote and the server
    os.chdir(request["podDir"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for fd in (null, log_fd):
        if fd > 2:
            os.close(fd)
    return shim.main([request["podDir"], request["container"], "--notify-fd", str(notify_fd)])  # type: ignore[attr-defined]


def _answer(sock: socket.socket, answer: dict, fds: list[int] | None = None) -> None:
    with contextlib.suppress(OSError):
        socket.send_fds(sock, [json.dumps(answer).encode()], fds or [])


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
