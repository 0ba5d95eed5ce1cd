"""Removing released pods' files, in batches, by a process of their own.

A released pod leaves a handful of directories and about ten files (its records, its working
directory, its emptyDirs). Removed in Python (``shutil.rmtree``) on a thread of the server,
each unlink hands the GIL over and back: under a burst of short jobs that thread took a third
as many samples as the control plane's own and slowed every system call on it (a pod's
``mkdir`` took ten times as long as on a quiet host). So the :class:`Remover`'s thread only
waits: whatever was released meanwhile is removed by one ``rm -rf`` per batch, whose unlinks
need no GIL and run on another core. A removal waits up to ``linger`` seconds for others to
join it, so that the cost of starting ``rm`` (about that of the pod's own process) is shared
by a whole batch rather than paid per pod. Where no ``rm`` can be started, the thread removes
the batch itself, as before.

Removals run in the order asked, each one's ``before`` (e.g. killing a cgroup a dead shim
left) before its paths go and its ``after`` (e.g. removing parents left empty) once they are
gone; :meth:`Remover.settle` waits for every removal asked so far.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Remover"]

log = logging.getLogger(__name__)

# Removals of one `rm` run at most: a burst's backlog is removed in a few runs rather than one
# command line past the system's limit (ARG_MAX; a pod's four paths take ~300 bytes).
_REMOVALS_PER_RUN = 128
LINGER = 1.0  # seconds a removal may wait for others to share its `rm`
RM = ("rm", "-rf", "--")


@dataclass(frozen=True)
class _Removal:
    paths: tuple[Path, ...]
    before: Callable[[], None] | None
    after: Callable[[], None] | None


class Remover:
    """Removes directory trees on a thread of its own, in batches (see the module docstring).
    :meth:`remove` may be called from any thread."""

    def __init__(
        self, command: Sequence[str] = RM, linger: float = LINGER, name: str = "muster-cleanup"
    ) -> None:
        self._command = tuple(command)
        self._linger = linger
        self._queue: list[_Removal] = []
        self._since = 0.0  # when the oldest removal waiting was asked (monotonic)
        self._cond = threading.Condition()
        self._busy = False
        self._hurry = 0  # settle() calls waiting: what is queued goes now
        self._closed = False
        self._name = name
        self._thread: threading.Thread | None = None  # started by the first removal

    def remove(
        self,
        paths: Sequence[Path],
        before: Callable[[], None] | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        """Remove ``paths`` (trees; missing ones are fine) soon: ``before`` runs first, ``after``
        once they are gone. Neither may raise for files already gone."""
        with self._cond:
            if self._closed:
                raise RuntimeError("the remover is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            if not self._queue:
                self._since = time.monotonic()
            self._queue.append(_Removal(tuple(paths), before, after))
            if len(self._queue) == 1 or len(self._queue) >= _REMOVALS_PER_RUN:
                self._cond.notify_all()

    def settle(self) -> None:
        """Wait until every removal asked so far is done (at once: none lingers)."""
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                self._cond.wait_for(lambda: not self._queue and not self._busy)
            finally:
                self._hurry -= 1

    def close(self) -> None:
        """Finish every removal asked, then stop the thread."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                while not self._due():
                    self._cond.wait(max(0.0, self._since + self._linger - time.monotonic()))
                if not self._queue:
                    return  # closed, and nothing left
                batch, self._queue = self._queue, []
                self._busy = True
            try:
                for start in range(0, len(batch), _REMOVALS_PER_RUN):
                    self._remove(batch[start : start + _REMOVALS_PER_RUN])
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _due(self) -> bool:
        """Whether the queue goes now (called holding the lock)."""
        return (
            self._closed
            or self._hurry > 0
            or len(self._queue) >= _REMOVALS_PER_RUN
            or time.monotonic() >= self._since + self._linger
        )

    def _remove(self, batch: list[_Removal]) -> None:
        for removal in batch:
            _call(removal.before)
        paths = [str(p) for removal in batch for p in removal.paths]
        if paths and (not self._command or not self._rm(paths)):
            for path in paths:
                shutil.rmtree(path, ignore_errors=True)
        for removal in batch:
            _call(removal.after)

    def _rm(self, paths: list[str]) -> bool:
        """Remove ``paths`` with one run of the command; False when it could not be started.
        What it could not remove (a directory the pod made read-only) stays, as with rmtree's
        ignore_errors; a failed run is logged and not retried."""
        try:
            done = subprocess.run(
                [*self._command, *paths],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                check=False,
            )
        except OSError as exc:
            log.info("cannot run %s (%s): removing files in process from now on", self._command[0], exc)
            self._command = ()
            return False
        if done.returncode != 0:
            log.warning(
                "%s left some of %d paths: %s",
                self._command[0],
                len(paths),
                done.stderr.decode(errors="replace").strip()[:500],
            )
        return True


def _call(action: Callable[[], None] | None) -> None:
    if action is None:
        return
    try:
        action()
    except Exception:  # one removal's failure must not stop the others
        log.exception("a clean-up step failed")
