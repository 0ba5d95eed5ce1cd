"""Watching the change log: in-process wake-ups plus polling.

A watcher remembers the revision it has scanned up to and reads ``changes`` after it, in
revision order, in batches. Writers of this process wake it right after COMMIT through a
:class:`Notifier`; writers of other processes (a second server on the same PostgreSQL, a
CLI tool writing SQLite directly) are found by polling every ``poll_interval`` seconds.
Because writers commit in revision order (see :mod:`muster.store.schema`), scanning
``revision > last`` never skips a change.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, NamedTuple

from muster.store import schema
from muster.store.base import Known, TooOld, WatchEvent
from muster.store.codec import loads
from muster.store.engine import read_transaction

if TYPE_CHECKING:
    from muster.store.sql import SqlStore

__all__ = ["REVISION_PATTERN", "Notifier", "SqlWatch", "parse_revision"]

_BATCH = 500
# A resourceVersion as the OpenAPI document declares it (empty: from now).
REVISION_PATTERN = r"^[0-9]{0,64}$"
_DIGITS = re.compile(REVISION_PATTERN)


class Notifier:
    """Tells this process's watchers that a revision was committed.

    A waiter is woken only by a commit of a kind it watches (when the commit's kinds are
    known) and a revision past what it holds, asked of it again at each notification: a
    cache's follower holds its manager's commits once they are handed to it (its watch's
    ``floor``), and the access policy's cache watches a few kinds, so neither wakes to find
    nothing new at every commit of the manager's.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest = 0
        self._closed = False
        self._waiters: list[_Waiter] = []

    def notify(self, revision: int, kinds: frozenset[str] | None = None) -> None:
        """Revision ``revision`` was committed, changing ``kinds`` (None: not known)."""
        with self._lock:
            self._latest = latest = max(self._latest, revision)
            waiters = list(self._waiters)
        # Outside the lock: a waiter's `after` may take its owner's lock (the cache's), and
        # the owner may wake or close its watch while holding it.
        for waiter in waiters:
            if kinds is not None and waiter.kinds is not None and waiter.kinds.isdisjoint(kinds):
                continue
            if latest > waiter.after():
                waiter.event.set()

    def wake(self) -> None:
        """Wake every waiter so it re-checks its own stop condition."""
        with self._lock:
            for waiter in self._waiters:
                waiter.event.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.event.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def wait(
        self,
        after: Callable[[], int],
        timeout: float,
        stop: Callable[[], bool],
        kinds: frozenset[str] | None = None,
    ) -> None:
        """Return when a revision newer than ``after()`` was committed here (changing one of
        ``kinds``, where both are known), ``stop()`` is true, the store closed, or ``timeout``
        seconds passed (time to poll the database)."""
        waiter = _Waiter(after, kinds, threading.Event())
        held = after()
        with self._lock:
            # Checked under the lock that notify(), wake() and close() take: whatever they do
            # from now on finds this waiter registered.
            if self._latest > held or self._closed or stop():
                return
            self._waiters.append(waiter)
        try:
            waiter.event.wait(timeout)
        finally:
            with self._lock:
                self._waiters.remove(waiter)


class _Waiter(NamedTuple):
    after: Callable[[], int]  # the revision the waiter holds everything up to
    kinds: frozenset[str] | None  # what it watches (None: every kind)
    event: threading.Event


def parse_revision(value: str | int | None, what: str = "resourceVersion") -> int | None:
    """A revision from a resourceVersion string or int; None stays None."""
    if value is None or value == "":
        return None
    # Digits only: int() would also take "+5", " 5", "5_000" and non-ASCII digits.
    if isinstance(value, str) and not _DIGITS.fullmatch(value):
        raise ValueError(f"{what} must be a decimal revision number, got {value!r}")
    try:
        revision = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a decimal revision number, got {value!r}") from None
    if revision < 0:
        raise ValueError(f"{what} must be >= 0, got {revision}")
    return revision


class SqlWatch(Iterator[WatchEvent]):
    """The iterator :meth:`SqlStore.watch` returns.

    ``close()`` may be called from any thread, also while another thread is blocked in
    ``next()``: that call then ends with StopIteration (the server relies on this to stop a
    watch whose client went away).
    """

    def __init__(
        self,
        store: SqlStore,
        kind: str | None,
        namespace: str | None,
        since: str | int | None,
        timeout: float | None,
        kinds: Collection[str] | None = None,
        bookmarks: bool = False,
        known: Known | None = None,
        floor: Callable[[], int] | None = None,
    ) -> None:
        self._store = store
        self._bookmarks = bookmarks
        self._known = known
        self._floor = floor
        self._since = parse_revision(since)
        self._timeout = timeout
        self._last: int | None = None  # revision scanned up to; None until the first next()
        style = store.engine.dialect.paramstyle
        wanted = None if kinds is None else sorted(set(kinds))
        # What a commit must change to wake it (None: anything), as the query filters.
        watched = None if kind is None else {kind}
        if wanted is not None:
            watched = set(wanted) if watched is None else watched & set(wanted)
        self._kinds = None if watched is None else frozenset(watched)
        self._sql, self._filters = _changes_query(style, kind, wanted, namespace)
        self._buffer: collections.deque[WatchEvent] = collections.deque()
        self._closed = False

    def __iter__(self) -> SqlWatch:
        return self

    def __next__(self) -> WatchEvent:
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while not self._buffer:
            if self._closed or self._store.notifier.closed:
                raise StopIteration
            self._fetch()
            if self._buffer:
                break
            wait = self._store.watch_poll_interval()
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StopIteration
                wait = min(wait, left)
            self._store.notifier.wait(self._held, wait, lambda: self._closed, self._kinds)
        return self._buffer.popleft()

    def close(self) -> None:
        self._closed = True
        self._store.notifier.wake()

    def _held(self) -> int:
        """The revision this watch needs nothing up to: what it scanned, or its floor."""
        assert self._last is not None
        return self._last if self._floor is None else max(self._last, self._floor())

    def __enter__(self) -> SqlWatch:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def revision(self) -> int | None:
        """The revision this watch has seen everything up to (None before the first next())."""
        return self._last

    def _fetch(self) -> None:
        with read_transaction(self._store.engine) as conn:
            current, compacted = schema.current_revision(conn)
            if self._last is None:
                self._last = current if self._since is None else self._since
            if self._floor is not None:
                # The watcher holds every change up to its floor (its own commits, handed to it
                # as they were made): reading their rows back would be the most of its work.
                self._last = max(self._last, self._floor())
            if self._last < compacted:
                self.close()
                raise TooOld(
                    f"resourceVersion {self._last} is too old: changes up to revision {compacted} were "
                    f"compacted; list again and watch from the list's resourceVersion"
                )
            if self._last >= current:
                return
            rows = schema.driver_rows(conn, self._sql, (self._last, current, *self._filters))
        known = self._known
        emitted = -1
        for revision, type_, kind, namespace, name, data in rows:
            revision = int(revision)
            # Decoding is most of a watch's cost; a change the caller holds already (its own
            # write, seen by a cache) is passed over as a filtered one is.
            if known is not None and type_ != "DELETED" and known(kind, namespace, name, revision):
                continue
            self._buffer.append(WatchEvent(type=type_, object=loads(data), revision=revision))
            emitted = revision
        # With fewer rows than a batch, everything up to `current` has been seen (the filter
        # skipped the rest); remembering that spares the next scan and a false TooOld later.
        self._last = int(rows[-1][0]) if len(rows) == _BATCH else current
        if self._bookmarks and emitted < self._last:
            mark = {"metadata": {"resourceVersion": str(self._last)}}
            self._buffer.append(WatchEvent(type="BOOKMARK", object=mark, revision=self._last))


def _changes_query(
    paramstyle: str, kind: str | None, kinds: list[str] | None, namespace: str | None
) -> tuple[str, tuple[str, ...]]:
    """A watch's query for the changes in (after, upto], as SQL for the driver (it runs on
    every wake-up of every watch: SQLAlchemy's execution path costs several times the
    query), and the parameters that follow ``after`` and ``upto``."""
    mark = schema.PARAM_MARK[paramstyle]
    where = [f"revision > {mark}", f"revision <= {mark}"]
    params: list[str] = []
    if kind is not None:
        where.append(f"kind = {mark}")
        params.append(kind)
    if kinds is not None:
        where.append(f"kind IN ({', '.join([mark] * len(kinds))})" if kinds else "1 = 0")
        params.extend(kinds)
    if namespace is not None:
        where.append(f"namespace = {mark}")
        params.append(namespace)
    columns = "revision, type, kind, namespace, name, data"
    sql = f"SELECT {columns} FROM changes WHERE {' AND '.join(where)} ORDER BY revision"
    return f"{sql} LIMIT {_BATCH}", tuple(params)
