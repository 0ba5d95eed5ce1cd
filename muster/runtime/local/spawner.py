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
held by other threads). The zygote (:mod:`muster.runtime.local.zygote`) has one thread and
nothing but the standard library.
"""

from __future__ import annotations

import contextlib
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
from muster.runtime.local.zygote import MAX_MESSAGE

__all__ = ["LOST", "Answer", "ShimProcess", "Spawner"]

_SEND_TIMEOUT = 10.0  # a zygote that takes no request for this long is treated as gone
# The zygote's interpreter: no site (no .pth files, no site-packages scan), no PYTHON* variables;
# the shim needs the standard library and Muster's own directory only.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from muster.runtime.local.zygote import main; main(int(sys.argv[1]))"
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
    """The zygote's answer to one :meth:`Spawner.ask`: the shim it forked, or why none."""

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
                data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
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
