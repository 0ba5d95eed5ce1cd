"""Starting shims without holding up the runtime's thread.

Starting a shim is a fork in the zygote (:mod:`muster.runtime.local.spawner`), or a fork and
exec of a Python interpreter where no zygote serves: each costs milliseconds, and a burst of
pods would spend them one after the other on the one thread that runs the control plane. So
:meth:`LocalRuntime.start` returns once the launch is recorded on disk (crash safety does not
depend on the shim being started: a launch whose shim never started is found by readoption)
and many shims start at once: the :class:`ShimStarter` sends the zygote its request and
returns (the answer is read when the zygote's socket is readable), or, with no zygote, starts
the interpreter on a worker thread. (Released pods' files go by
:mod:`muster.runtime.local.removal`.)

Results come back to the runtime's thread: :meth:`ShimStarter.collect` hands over the shims
started since the last call (the zygote's answers, and the workers', which write a byte to a
pipe the runtime's selector watches), so that only the runtime's thread ever touches its
records.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from muster.runtime.local.files import ContainerFiles
from muster.runtime.local.shim import command as shim_command
from muster.runtime.local.spawner import LOST, ShimProcess, Spawner

__all__ = ["ShimStarter", "Spawned"]

_WORKERS = 4
_CLOSE_WAIT = 10.0  # seconds a closing runtime waits for the zygote's answers


@dataclass(frozen=True)
class Spawned:
    """A shim started for container ``container`` of pod ``uid`` (or why it could not be)."""

    uid: str
    container: str
    popen: subprocess.Popen[bytes] | ShimProcess | None
    notify_fd: int | None  # the read end of the shim's notify pipe (non-blocking)
    shim_ctime: float | None
    error: str = ""


class ShimStarter:
    """Starts shims (through ``zygote`` when it serves, else on worker threads); see the
    module docstring. Its methods are for the runtime's thread."""

    def __init__(self, zygote: Spawner, workers: int = _WORKERS) -> None:
        self._zygote = zygote
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="muster-spawn")
        self._done: queue.SimpleQueue[Spawned] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False

    @property
    def wake_fd(self) -> int:
        """Readable once a worker's spawn has finished (``collect`` drains it)."""
        return self._wake_r

    @property
    def answer_socket(self) -> tuple[int, int] | None:
        """The zygote's socket, readable once it answered (``collect`` takes the answers):
        see :meth:`Spawner.socket`."""
        return self._zygote.socket()

    @property
    def pending(self) -> int:
        """Spawns asked for whose results were not collected yet."""
        with self._lock:
            return self._pending

    def spawn(self, uid: str, files: ContainerFiles) -> None:
        """Start the shim of one container (``files``) of pod ``uid``: asked of the zygote, or
        on a worker thread."""
        with self._lock:
            self._pending += 1
        if not self._ask(uid, files):
            self._pool.submit(self._spawn, uid, files)

    def collect(self) -> list[Spawned]:
        """The spawns finished since the last call."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass
        out: list[Spawned] = []
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                break
        for answer in self._zygote.answers():
            uid, files, read_fd = answer.key  # type: ignore[misc]
            if answer.process is not None:
                out.append(Spawned(uid, files.container, answer.process, read_fd, answer.create_time))
                continue
            os.close(read_fd)
            if answer.error == LOST and not self._closed:
                # Maybe forked before it went: a second shim finds the container's lock held
                # and exits, so starting one the old way never runs the container twice.
                self._pool.submit(self._spawn, uid, files)
                continue
            error = f"cannot start its shim: {answer.error}"
            out.append(Spawned(uid, files.container, None, None, None, error))
        with self._lock:
            self._pending -= len(out)
        return out

    def close(self) -> list[Spawned]:
        """Wait for every spawn asked for; the spawns not collected yet."""
        if self._closed:
            return []
        self._zygote.settle(_CLOSE_WAIT)  # the shims it was asked for are adopted or detached
        self._pool.shutdown(wait=True)
        self._closed = True
        left = self.collect()
        os.close(self._wake_r)
        os.close(self._wake_w)
        return left

    def _ask(self, uid: str, files: ContainerFiles) -> bool:
        """Send the zygote the request for this shim; False when no zygote serves."""
        try:
            log_fd = os.open(files.shim_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            return False  # the worker's start fails the same way, and says why
        read_fd, write_fd = os.pipe()
        try:
            asked = self._zygote.ask((uid, files, read_fd), files.pod_dir, files.container, write_fd, log_fd)
        finally:
            os.close(write_fd)  # the zygote has its own copies, passed with the request
            os.close(log_fd)
        if not asked:
            os.close(read_fd)
            return False
        os.set_blocking(read_fd, False)
        return True

    def _spawn(self, uid: str, files: ContainerFiles) -> None:
        try:
            spawned = _start_shim(uid, files)
        except BaseException as exc:  # never lose a result: the runtime waits for it
            spawned = Spawned(uid, files.container, None, None, None, f"cannot start its shim: {exc}")
        self._done.put(spawned)
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")


def _start_shim(uid: str, files: ContainerFiles) -> Spawned:
    """A shim of its own: an interpreter started for it (where no zygote serves)."""
    read_fd, write_fd = os.pipe()
    try:
        with open(files.shim_log, "ab") as shim_log:
            popen = subprocess.Popen(
                shim_command(files.pod_dir, files.container, "--notify-fd", str(write_fd)),
                stdin=subprocess.DEVNULL,
                stdout=shim_log,
                stderr=subprocess.STDOUT,
                cwd=files.pod_dir,
                start_new_session=True,  # the shim and its process outlive this server
                pass_fds=(write_fd,),
            )
    except OSError as exc:
        os.close(read_fd)
        return Spawned(uid, files.container, None, None, None, f"cannot start its shim: {exc}")
    finally:
        os.close(write_fd)
    ctime = None
    with contextlib.suppress(Exception):
        import psutil

        ctime = psutil.Process(popen.pid).create_time()
    os.set_blocking(read_fd, False)
    return Spawned(uid, files.container, popen, read_fd, ctime)
