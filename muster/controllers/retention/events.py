"""Event retention: an Event goes once its last occurrence is older than the time to live, and
an object keeps at most a given number of Events (its most recent ones).

Events are not in the informer cache, so the manager keeps a small index of them: every Event
is listed once when the manager opens, then each one it records is added as it is stored (the
manager records them all). Expired Events are looked for at most every ``sweep_seconds``;
an object that goes over its cap loses its oldest Events in the pass that recorded the new one.
Removals go into the pass's transaction like any write; an Event deleted meanwhile by someone
else is simply gone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from muster.api.conditions import epoch
from muster.controllers.context import Context
from muster.store.base import NotFound, Obj, StoreError
from muster.util import paused_gc

__all__ = ["EventRetention", "RetentionPolicy"]

log = logging.getLogger(__name__)

EventKey = tuple[str, str]  # (namespace, name) of the Event
# Expired Events removed per pass at most (a delete costs about 0.25 ms).
_SWEEP_SLICE = 500
Involved = tuple[str, str, str, str]  # kind, namespace, name, uid of what it is about


@dataclass(frozen=True)
class RetentionPolicy:
    """How long Events live and how many each object keeps (0: no limit)."""

    event_ttl_seconds: float = 3600.0
    events_per_object: int = 100
    sweep_seconds: float = 60.0


class EventRetention:
    """The manager's index of Events and the removals it decides (one thread: the manager's)."""

    def __init__(self, ctx: Context, policy: RetentionPolicy) -> None:
        self.ctx = ctx
        self.policy = policy
        self._last: dict[EventKey, float] = {}  # last occurrence (epoch) of every known Event
        self._about: dict[EventKey, Involved] = {}
        self._by_object: dict[Involved, set[EventKey]] = {}
        self._next_sweep = 0.0
        self._due: list[EventKey] = []  # expired at the last look, newest first (see sweep)
        self.removed = 0
        self._lock = threading.Lock()  # the index is read by the server's threads too

    def load(self) -> None:
        """Index every stored Event (once, when the manager opens)."""
        with paused_gc():  # decoding them all makes many containers, no cycle (see Cache._relist)
            for event in self.ctx.store.list("Event").items:
                meta = event["metadata"]
                last = epoch(event.get("lastTimestamp")) or epoch(meta.get("creationTimestamp"))
                self._index(event, self.ctx.now() if last is None else last)

    def recorded(self, event: Obj) -> None:
        """An Event was stored (created or counted again) now: index it; enforce the object's cap."""
        involved = self._index(event, self.ctx.now())
        cap = self.policy.events_per_object
        keys = self._by_object.get(involved, set())
        if cap and len(keys) > cap:
            oldest = sorted(keys, key=lambda k: self._last.get(k, 0.0))[: len(keys) - cap]
            self._remove(oldest)

    def sweep(self, now: float) -> None:
        """Remove the Events whose last occurrence is older than the time to live (at most every
        ``sweep_seconds``)."""
        ttl = self.policy.event_ttl_seconds
        if not ttl or now < self._next_sweep:
            return
        cutoff = now - ttl
        if not self._due:
            expired = sorted(((last, k) for k, last in self._last.items() if last < cutoff), reverse=True)
            self._due = [k for _last, k in expired]  # the oldest last: pop() takes it first
        # A server back after a long stop may find 100,000 expired: a slice per pass, the next
        # pass at once, so that no pass holds the loop (and the store's write lock) for seconds.
        batch: list[EventKey] = []
        while self._due and len(batch) < _SWEEP_SLICE:
            key = self._due.pop()
            if self._last.get(key, now) < cutoff:  # not recorded again since, nor gone
                batch.append(key)
        self._next_sweep = now if self._due else now + self.policy.sweep_seconds
        self._remove(batch)

    def next_time(self) -> float | None:
        return self._next_sweep if self.policy.event_ttl_seconds and self._last else None

    def about(self, obj: Obj) -> list[tuple[str, str]]:
        """(namespace, name) of the Events about ``obj`` (this incarnation: same uid). Any thread."""
        meta = obj["metadata"]
        involved = (obj["kind"], meta.get("namespace") or "", meta["name"], meta.get("uid") or "")
        with self._lock:
            return sorted(self._by_object.get(involved, ()))

    def about_named(self, kind: str, objects: Iterable[tuple[str, str]]) -> list[EventKey]:
        """(namespace, name) of the Events about the objects of ``kind`` named by (namespace,
        name), whatever their incarnation (uid): a pod a job runs again keeps its name. Any thread."""
        wanted = set(objects)
        with self._lock:
            return sorted(
                key
                for (k, namespace, name, _uid), keys in self._by_object.items()
                if k == kind and (namespace, name) in wanted
                for key in keys
            )

    def newest(self) -> list[EventKey]:
        """(namespace, name) of every indexed Event, the one that occurred last first. Any thread."""
        with self._lock:
            last = list(self._last.items())
        last.sort(key=lambda item: item[1], reverse=True)
        return [key for key, _when in last]

    @property
    def known(self) -> int:
        """Events indexed (tests and metrics)."""
        return len(self._last)

    def _index(self, event: Obj, last: float) -> Involved:
        meta = event["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        ref = event.get("involvedObject") or {}
        involved = (ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", ""), ref.get("uid", ""))
        with self._lock:
            self._last[key] = last
            self._about[key] = involved
            self._by_object.setdefault(involved, set()).add(key)
        return involved

    def _remove(self, keys: list[EventKey]) -> None:
        writer = self.ctx.writer()
        for key in keys:
            try:
                writer.delete("Event", key[1], key[0] or None)
            except NotFound:
                pass
            except StoreError:
                log.exception("could not remove Event %s/%s", *key)
                continue
            self._forget(key)
            self.removed += 1

    def _forget(self, key: EventKey) -> None:
        with self._lock:
            self._last.pop(key, None)
            involved = self._about.pop(key, None)
            if involved is not None:
                keys = self._by_object.get(involved)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._by_object[involved]
