"""The zygote's side of :mod:`muster.runtime.local.spawner`: a process that has imported the
shim once and forks one per request (``python -S -E -c ...`` runs :func:`main`).

Every page this process maps is mapped, copied as touched and unmapped by every shim it forks,
so it imports the shim and the few standard modules it needs, nothing else: not ``threading``
(its at-fork handler alone made a shim touch about 130 more pages before its first line, two
thirds of the 190 it touched then), not ``subprocess`` (which imports ``threading``; the shim
starts its process with ``os.posix_spawn``), not ``dataclasses`` (with ``inspect`` and ``ast``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import sys

from muster.runtime.local import procfs, shim

__all__ = ["MAX_MESSAGE", "main"]

MAX_MESSAGE = 65536  # bytes of one request or answer on the socket, both ways


def main(fd: int) -> None:
    """The zygote's loop: one request, one fork, one answer; exits at EOF of socket ``fd``."""
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
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 2)
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
                code = _become_shim(request, notify_fd, log_fd)
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


def _become_shim(request: dict, notify_fd: int, log_fd: int) -> int:
    os.setsid()  # the shim and its process outlive the zygote and the server
    os.chdir(request["podDir"])
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    for fd in (null, log_fd):
        if fd > 2:
            os.close(fd)
    return shim.main([request["podDir"], request["container"], "--notify-fd", str(notify_fd)])


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
