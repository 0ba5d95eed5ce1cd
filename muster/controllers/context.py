"""What every controller of the manager shares: the store and its cache, the clock, timers,
and writes that keep the cache current and survive conflicts.

Writes never raise for the ordinary races of a level-triggered controller: a Conflict (the
object changed since it was read) or a NotFound (it was deleted) re-reads the object into
the cache, marks it for another look and returns None; the next pass decides again from
what is current.

Inside :meth:`Context.batch` (the manager wraps each pass in one) every write, Events
included, goes into one store transaction (:class:`muster.store.capabilities.Batching`),
committed when the pass ends: one commit, not one per write. Each write is still checked and
answered at once, and enters the cache at once. What must happen only once a write is
durable (starting or stopping a process, letting the runtime forget a pod) is queued with
:meth:`Context.after_commit` and runs right after the COMMIT. If the transaction fails, its
writes are taken back out of the cache and the queued actions are dropped: nothing acts on
state that was never stored (each action's ``undo``, if it gave one, runs instead, so that a
controller's own bookkeeping forgets what will not happen). An action that raises does not
keep the ones queued after it from running; the first exception is raised once all ran.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from muster.api.lifecycle import EventSpec
from muster.controllers.cache import Cache, Key, key_of
from muster.controllers.insight.metrics import ControlPlaneMetrics
from muster.store.base import AlreadyExists, Conflict, NotFound, Obj, Store, StoreError, Writer
from muster.store.capabilities import Batch, Batching
from muster.store.events import event_name, event_namespace, record_event

__all__ = ["COMPONENT", "MAX_BATCH_WRITES", "Context", "Timers"]

log = logging.getLogger(__name__)

COMPONENT = "muster-manager"
# A pass that writes more than this commits on the way (a backlog's first pass), so the store's
# write lock is never held for long and API writers wait little.
MAX_BATCH_WRITES = 2000


class Timers:
    """Keys to look at again at a given time (deadlines, TTLs, requeue backoff). A key asked
    for again at the same or a later time than one already pending is not queued twice."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, Key]] = []
        self._pending: dict[Key, float] = {}  # the earliest pending time of each key
        self._lock = threading.Lock()

    def at(self, when: float, key: Key) -> None:
        with self._lock:
            if self._pending.get(key, float("inf")) <= when:
                return
            self._pending[key] = when
            heapq.heappush(self._heap, (when, key))

    def due(self, now: float) -> set[Key]:
        out: set[Key] = set()
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                when, key = heapq.heappop(self._heap)
                out.add(key)
                if self._pending.get(key) == when:
                    del self._pending[key]
        return out

    def next_time(self) -> float | None:
        with self._lock:
            return self._heap[0][0] if self._heap else None


def _record(writer: Writer, obj: Obj, spec: EventSpec) -> Obj | None:
    try:
        return record_event(writer, obj, spec.type, spec.reason, spec.message, component=COMPONENT)
    except StoreError:
        log.exception("could not record event %s for %s", spec.reason, key_of(obj))
        return None


@dataclass
class Context:
    """The shared state of one manager; ``clock`` returns epoch seconds (injectable)."""

    store: Store
    cache: Cache
    home: Path
    clock: Callable[[], float]
    timers: Timers = field(default_factory=Timers)
    metrics: ControlPlaneMetrics = field(default_factory=ControlPlaneMetrics)
    # Called with every Event the manager stored (the retention index follows them).
    on_event: Callable[[Obj], None] | None = None
    _batch: Batch | None = field(default=None, init=False, repr=False)
    _batching: bool = field(default=False, init=False, repr=False)
    _after: list[tuple[Callable[[], None], Callable[[], None] | None]] = field(
        default_factory=list, init=False, repr=False
    )
    _written: dict[Key, Obj] = field(default_factory=dict, init=False, repr=False)
    _events: list[tuple[Obj, EventSpec]] = field(default_factory=list, init=False, repr=False)

    def now(self) -> float:
        return self.clock()

    def wake_at(self, when: float, obj: Obj) -> None:
        """Reconcile ``obj`` again once the clock reaches ``when``."""
        self.timers.at(when, key_of(obj))

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Writes inside go to the store in one transaction, committed at the end (then the
        :meth:`after_commit` actions run); an exception rolls them back. Not reentrant."""
        if self._batching:
            raise RuntimeError("Context.batch() is not reentrant")
        self._batching = isinstance(self.store, Batching)
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        else:
            self.commit()
        finally:
            self._batching = False

    def commit(self) -> None:
        """Store the writes made so far, then run the actions that waited for them (which may
        write again: those are committed too)."""
        for _ in range(100):
            self._store_events()
            # Even with no write made: a write that failed (NotFound, Conflict) has still begun
            # the transaction, which holds the store's write lock until it ends.
            if self._batch is not None:
                try:
                    self._batch.commit()
                except BaseException:
                    self.rollback()
                    raise
            self._written.clear()
            actions, self._after = self._after, []
            if not actions:
                return
            failed: BaseException | None = None
            for action, _undo in actions:
                try:
                    action()
                except Exception as exc:  # the others were promised to run once stored
                    log.exception("an after-commit action failed")
                    failed = failed or exc
            if failed is not None:
                raise failed
        raise RuntimeError("after-commit actions kept writing: giving up after 100 rounds")

    def rollback(self) -> None:
        """Forget the uncommitted writes (and take them back out of the cache) and the actions
        waiting for them."""
        written, self._written = self._written, {}
        actions, self._after = self._after, []
        self._events.clear()
        for _action, undo in actions:
            if undo is not None:
                try:
                    undo()
                except Exception:  # one undo failing must not keep the others from running
                    log.exception("undoing an after-commit action failed")
        if self._batch is not None:
            try:
                self._batch.rollback()
            except Exception:  # the connection is gone: nothing was stored anyway
                log.exception("rolling back the pass's writes failed")
        if written:
            self.cache.reload(list(written))

    def after_commit(self, action: Callable[[], None], undo: Callable[[], None] | None = None) -> None:
        """Run ``action`` once every write made so far is committed (at once outside a batch);
        if those writes are rolled back instead, run ``undo`` (when given)."""
        if self._batching and (self._written or (self._batch is not None and self._batch.writes)):
            self._after.append((action, undo))
        else:
            action()

    # -- writes ------------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj | None:
        try:
            out = self.writer().create(obj)
        except AlreadyExists:
            self._refresh(obj)
            return None
        self._observe(out)
        return out

    def update(self, obj: Obj) -> Obj | None:
        """``store.update`` with the object's resourceVersion (optimistic concurrency)."""
        return self._write(self.writer().update, obj)

    def update_status(self, obj: Obj) -> Obj | None:
        return self._write(self.writer().update_status, obj)

    def delete(self, obj: Obj) -> bool:
        """Delete ``obj`` (that incarnation: same uid); True once it is gone, whoever removed it.

        The cached version is the precondition (no read first): a Conflict means it changed,
        or was replaced by a new incarnation, which is looked at before answering."""
        kind, ns, name = key_of(obj)
        version = obj["metadata"].get("resourceVersion")
        if not version:
            # No precondition would delete whichever incarnation is there now.
            raise ValueError(f"delete of {kind} {ns}/{name} needs the object's resourceVersion")
        try:
            gone = self.writer().delete(kind, name, ns or None, version)
        except NotFound:
            self.cache.forget(obj)
            return True
        except Conflict:
            current = self._refresh(obj)
            return current is None or current["metadata"].get("uid") != obj["metadata"].get("uid")
        self._written[key_of(gone)] = gone
        self.cache.forget(gone)
        self._check_size()
        return True

    def event(self, obj: Obj, spec: EventSpec) -> None:
        """Record an Event about ``obj``: in a batch, with the batch's other Events as it
        commits (one read of what exists of them all, rather than one each: a job's run records
        six); outside one, at once. A failure to record is logged, never raised."""
        if self._batching:
            self._events.append((obj, spec))
        else:
            self._store_event(obj, spec)

    def flush_events(self) -> None:
        """Write the Events recorded so far into the pass's transaction (they are committed
        with it; :meth:`commit` does this itself)."""
        self._store_events()

    def writer(self) -> Writer:
        """Where a write goes now: the pass's batch, or the store outside one. Writes of kinds
        the cache does not hold (CacheEntry) go here; others go through :meth:`create`,
        :meth:`update`, ... which keep the cache current."""
        if not self._batching:
            return self.store
        if self._batch is None:
            self._batch = self.store.batch(replica=self.cache)  # type: ignore[attr-defined]
        assert self._batch is not None
        return self._batch

    def prefetch(self, keys: Sequence[tuple[str, str, str | None]]) -> None:
        """In a batch, read ``(kind, name, namespace)`` of objects about to be written whose kind
        the cache does not hold (Events, UsageRecords) in a query or a few, rather than one
        each as they are written (on PostgreSQL, a round trip each); outside one, nothing."""
        if self._batching and keys:
            self.writer()  # opens the batch
            assert self._batch is not None
            self._batch.prefetch(keys)

    def _store_events(self) -> None:
        events, self._events = self._events, []
        if not events:
            return
        self.prefetch(
            [
                ("Event", event_name(obj, spec.type, spec.reason, spec.message), event_namespace(obj))
                for obj, spec in events
            ]
        )
        for obj, spec in events:
            self._store_event(obj, spec)

    def _store_event(self, obj: Obj, spec: EventSpec) -> None:
        stored = _record(self.writer(), obj, spec)
        if stored is not None and self.on_event is not None:
            self.on_event(stored)

    def _write(self, op: Callable[[Obj], Obj], obj: Obj) -> Obj | None:
        try:
            out = op(obj)
        except (Conflict, NotFound):
            self._refresh(obj)
            return None
        self._observe(out)
        return out

    def _observe(self, out: Obj) -> None:
        if self._batching:
            self._written[key_of(out)] = out
        self.cache.observe(out)
        self._check_size()

    def _check_size(self) -> None:
        if self._batch is not None and self._batch.writes >= MAX_BATCH_WRITES:
            self.commit()

    def _refresh(self, obj: Obj) -> Obj | None:
        """Cache what the store holds of ``obj`` now and return it (None: it is gone)."""
        kind, ns, name = key_of(obj)
        current: Obj | None
        try:
            current = self.writer().get(kind, name, ns or None)
            self.cache.observe(current)
        except NotFound:
            current = None
            self.cache.forget(obj)
        self.cache.mark([key_of(obj)])
        return current
