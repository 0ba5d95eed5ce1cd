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
from pathlib import Path

from muster.runtime.local import procfs
from muster.runtime.local.shim import PACKAGE_ROOT

__all__ = ["ShimProcess", "Spawner", "zygote_main"]

_MAX_MESSAGE = 65536
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


class Spawner:
    """The runtime's side of the zygote: :meth:`spawn` starts one shim. Thread-safe."""

    def __init__(self, enabled: bool = True) -> None:
        self._lock = threading.Lock()
        self._zygote: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        # Disabled, or the zygote could not start: the runtime starts each shim itself.
        self._failed = not enabled

    @staticmethod
    def supported() -> bool:
        return procfs.available() and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")

    def spawn(self, pod_dir: Path, container: str, notify_fd: int, log_fd: int) -> ShimProcess | None:
        """Start the shim of ``container``: a :class:`ShimProcess`, or None when no zygote
        serves (the caller then starts the shim as a subprocess)."""
        if self._failed or not self.supported():
            return None
        request = json.dumps({"podDir": str(pod_dir), "container": container}).encode()
        with self._lock:
            for _ in range(2):  # a zygote that died is replaced once
                sock = self._connect()
                if sock is None:
                    return None
                try:
                    socket.send_fds(sock, [request], [notify_fd, log_fd])
                    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 1)
                except OSError:
                    data, fds = b"", []
                if data:
                    answer = json.loads(data)
                    if "pid" in answer and fds:
                        return ShimProcess(int(answer["pid"]), fds[0])
                    for fd in fds:
                        os.close(fd)
                    raise OSError(answer.get("error") or "the zygote could not start the shim")
                self._reset()
            return None

    def close(self) -> None:
        with self._lock:
            self._reset()

    def _connect(self) -> socket.socket | None:
        if self._sock is not None and self._zygote is not None and self._zygote.poll() is None:
            return self._sock
        self._reset()
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
        self._sock = ours
        return ours

    def _reset(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the zygote sees EOF and exits
            self._sock = None
        if self._zygote is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=5)
            self._zygote = None


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
        _answer(sock, {"pid": pid}, [pidfd])
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
