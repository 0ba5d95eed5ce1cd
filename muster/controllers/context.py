"""What every controller of the manager shares: the store and its cache, the clock, timers,
and writes that keep the cache current and survive conflicts.

Writes never raise for the ordinary races of a level-triggered controller: a Conflict (the
object changed since it was read) or a NotFound (it was deleted) re-reads the object into
the cache, marks it for another look and returns None; the next pass decides again from
what is current.
"""

from __future__ import annotations

import heapq
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from muster.api.lifecycle import EventSpec
from muster.controllers.cache import Cache, Key, key_of
from muster.controllers.insight.metrics import ControlPlaneMetrics
from muster.store.base import AlreadyExists, Conflict, NotFound, Obj, Store, StoreError
from muster.store.events import record_event

__all__ = ["COMPONENT", "Context", "EventRecorder", "Timers"]

log = logging.getLogger(__name__)

COMPONENT = "muster-manager"


class Timers:
    """Keys to look at again at a given time (deadlines, TTLs, requeue backoff)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, Key]] = []
        self._lock = threading.Lock()

    def at(self, when: float, key: Key) -> None:
        with self._lock:
            heapq.heappush(self._heap, (when, key))

    def due(self, now: float) -> set[Key]:
        out: set[Key] = set()
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                out.add(heapq.heappop(self._heap)[1])
        return out

    def next_time(self) -> float | None:
        with self._lock:
            return self._heap[0][0] if self._heap else None


class EventRecorder:
    """Records Events on a thread of its own, in the order asked.

    An Event is a store write of its own (a read and a commit); recorded inline they would
    cost the manager's pass more than the changes they describe. Events are best-effort
    anyway (a failure is logged), so they may trail the change they report by a moment;
    :meth:`close` drains the queue before the manager stops.
    """

    def __init__(self, store: Store, capacity: int = 10_000) -> None:
        self.store = store
        self._queue: queue.Queue[tuple[Obj, EventSpec] | None] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="muster-events", daemon=True)
        self._thread.start()

    def record(self, obj: Obj, spec: EventSpec) -> None:
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj["kind"],
            "metadata": dict(obj["metadata"]),
        }
        try:
            self._queue.put_nowait((involved, spec))
        except queue.Full:  # a burst larger than the queue: record this one here
            _record(self.store, involved, spec)

    def flush(self) -> None:
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                _record(self.store, *item)
            finally:
                self._queue.task_done()


def _record(store: Store, obj: Obj, spec: EventSpec) -> None:
    try:
        record_event(store, obj, spec.type, spec.reason, spec.message, component=COMPONENT)
    except StoreError:
        log.exception("could not record event %s for %s", spec.reason, key_of(obj))


@dataclass
class Context:
    """The shared state of one manager; ``clock`` returns epoch seconds (injectable)."""

    store: Store
    cache: Cache
    home: Path
    clock: Callable[[], float]
    timers: Timers = field(default_factory=Timers)
    events: EventRecorder | None = None
    metrics: ControlPlaneMetrics = field(default_factory=ControlPlaneMetrics)

    def now(self) -> float:
        return self.clock()

    def wake_at(self, when: float, obj: Obj) -> None:
        """Reconcile ``obj`` again once the clock reaches ``when``."""
        self.timers.at(when, key_of(obj))

    # -- writes ------------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj | None:
        try:
            out = self.store.create(obj)
        except AlreadyExists:
            self._refresh(obj)
            return None
        self.cache.observe(out)
        return out

    def update(self, obj: Obj) -> Obj | None:
        """``store.update`` with the object's resourceVersion (optimistic concurrency)."""
        return self._write(self.store.update, obj)

    def update_status(self, obj: Obj) -> Obj | None:
        return self._write(self.store.update_status, obj)

    def delete(self, obj: Obj) -> bool:
        """Delete ``obj`` (that incarnation: same uid); True once it is gone, whoever removed it."""
        kind, ns, name = key_of(obj)
        try:
            current = self.store.get(kind, name, ns or None)
            if current["metadata"].get("uid") != obj["metadata"].get("uid"):
                self.cache.observe(current)
                return True
            gone = self.store.delete(kind, name, ns or None, current["metadata"]["resourceVersion"])
        except NotFound:
            self.cache.forget(obj)
            return True
        except Conflict:
            self._refresh(obj)
            return False
        self.cache.forget(gone)
        return True

    def event(self, obj: Obj, spec: EventSpec) -> None:
        """Record an Event about ``obj`` (through :attr:`events` when set: in order, off this
        thread); a failure to record is logged, never raised."""
        if self.events is not None:
            self.events.record(obj, spec)
        else:
            _record(self.store, obj, spec)

    def flush_events(self) -> None:
        """Wait until every Event asked for so far is stored."""
        if self.events is not None:
            self.events.flush()

    def _write(self, op: Callable[[Obj], Obj], obj: Obj) -> Obj | None:
        try:
            out = op(obj)
        except (Conflict, NotFound):
            self._refresh(obj)
            return None
        self.cache.observe(out)
        return out

    def _refresh(self, obj: Obj) -> None:
        kind, ns, name = key_of(obj)
        try:
            self.cache.observe(self.store.get(kind, name, ns or None))
        except NotFound:
            self.cache.forget(obj)
        self.cache.mark([key_of(obj)])
