"""What the insight endpoints (``/api/v1/...``) read: the store, pod logs, and the manager
that runs in this process (its GPU history, fault injection), when there is one.

The manager's hook registers it with :func:`use_manager`; without a manager (``muster up
--runtime none``) the views answer from the objects alone (no GPU readings).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from muster.controllers.cache import WATCHED_KINDS
from muster.server.errors import ApiError
from muster.server.logs import LogRequest, log_source, open_log
from muster.store import NotFound, Store, parse_selector
from muster.store.events import last_occurred

if TYPE_CHECKING:
    from muster.controllers.manager import Manager

__all__ = ["CacheSource", "StoreSource", "consistent_source", "insight_source", "manager_of", "use_manager"]

Obj = dict[str, Any]

# A running cache is behind the store by one watch delivery (milliseconds).
_CATCH_UP_SECONDS = 5.0


def use_manager(app: FastAPI, manager: Manager | None) -> None:
    """Serve the insight views with ``manager``'s live state (None: objects only)."""
    app.state.manager = manager


def manager_of(app: FastAPI, required: str | None = None) -> Manager | None:
    """The manager of this process; with ``required`` (what needs it), 409 when there is none."""
    manager = getattr(app.state, "manager", None)
    if manager is None and required:
        raise ApiError(
            409,
            f"{required} needs the control plane, and this server runs none "
            "(start it with `muster up`, not `--runtime none`)",
            reason="NoControlPlane",
        )
    return manager


class StoreSource:
    """:class:`muster.controllers.insight.explain.gather.Source` over a store; pod logs through
    ``app``'s log source when given (none otherwise)."""

    def __init__(self, store: Store, app: FastAPI | None = None) -> None:
        self.store = store
        self.app = app

    def get(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        try:
            return self.store.get(kind, name, namespace)
        except NotFound:
            return None

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        parsed = parse_selector(selector) if selector else None
        return self.store.list(kind, namespace=namespace, selector=parsed).items

    def list_live(self, kind: str) -> list[Obj]:
        """Every object of ``kind`` (a store keeps no index of those in play; callers that
        ask for these look only at the ones in play anyway)."""
        return self.list(kind)

    def newest_events(self, limit: int, allows: Callable[[str, str], bool]) -> list[Obj]:
        """The ``limit`` Events that occurred last among those ``allows`` (namespace, name)."""
        seen = [
            e
            for e in self.list("Event")
            if allows(e["metadata"].get("namespace") or "", e["metadata"]["name"])
        ]
        return sorted(seen, key=last_occurred, reverse=True)[:limit]

    def events_named(self, kind: str, objects: Iterable[tuple[str, str]]) -> list[Obj]:
        """The stored Events about the objects of ``kind`` named by (namespace, name), any
        incarnation: every stored Event is listed (a store keeps no index of what they are about)."""
        wanted = set(objects)
        return [
            e
            for e in self.list("Event")
            if (e.get("involvedObject") or {}).get("kind") == kind
            and ((e["involvedObject"].get("namespace") or ""), e["involvedObject"].get("name")) in wanted
        ]

    def pool_usage_records(self, since: float) -> list[Obj]:
        """The UsageRecords the doctor's idle-pool check needs from ``since`` on: here every
        stored one (a store cannot tell which were open then without decoding them)."""
        return self.list("UsageRecord")

    def log_tail(self, pod: str, namespace: str, lines: int) -> list[str]:
        if self.app is None:
            return []
        cancel = threading.Event()
        request = LogRequest(namespace, pod, tail_lines=lines)
        with contextlib.suppress(ApiError):  # no log to read (never started): no tail
            try:
                return list(open_log(log_source(self.app), self.store, request, cancel))
            finally:
                cancel.set()
        return []


class CacheSource(StoreSource):
    """A :class:`StoreSource` that reads what the manager of this process caches (jobs,
    Workloads, pods, nodes, queues) from its informer cache, and the Events about an object
    through its retention index: no query and no decoding for them, whatever the store holds.
    The cache follows the store within moments; its objects are shared and only read here."""

    def __init__(self, store: Store, manager: Manager, app: FastAPI | None = None) -> None:
        super().__init__(store, app)
        self.cache = manager.ctx.cache
        self.events = manager.events
        self.ledger = manager.capacity.ledger

    def get(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        if kind in WATCHED_KINDS:
            return self.cache.get(kind, name, namespace)
        return super().get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[Obj]:
        if kind not in WATCHED_KINDS:
            return super().list(kind, namespace, selector)
        parsed = parse_selector(selector) if selector else None
        objs = self.cache.list(kind, namespace)
        if parsed is not None:
            objs = [o for o in objs if parsed.matches(o["metadata"].get("labels") or {})]
        return sorted(objs, key=_key)

    def list_live(self, kind: str) -> list[Obj]:
        """The objects of ``kind`` still in play (for a TrainingJob or Workload: not finished)."""
        return sorted(self.cache.list_live(kind), key=_key)

    def newest_events(self, limit: int, allows: Callable[[str, str], bool]) -> list[Obj]:
        """From the manager's Event index, newest first, each read from the store: not every
        stored Event listed to keep a few (it indexes every Event it records or found stored)."""
        found: list[Obj] = []
        for namespace, name in self.events.newest():
            if len(found) >= limit:
                break
            if allows(namespace, name):
                event = super().get("Event", name, namespace or None)
                if event is not None:
                    found.append(event)
        return sorted(found, key=last_occurred, reverse=True)

    def events_named(self, kind: str, objects: Iterable[tuple[str, str]]) -> list[Obj]:
        """From the manager's Event index, each read from the store."""
        return self._stored_events(self.events.about_named(kind, objects))

    def pool_usage_records(self, since: float) -> list[Obj]:
        """The records of pool nodes and their pods open at any time from ``since`` on, which
        the cost ledger keeps in memory (the check sets the rest aside: no pool); the store's
        when the ledger does not know them that far back."""
        found = self.ledger.pool_records(since)
        return found if found is not None else super().pool_usage_records(since)

    def events_about(self, objs: list[Obj]) -> list[Obj]:
        """The stored Events about ``objs``."""
        return self._stored_events(key for obj in objs for key in self.events.about(obj))

    def _stored_events(self, keys: Iterable[tuple[str, str]]) -> list[Obj]:
        """The Events the index names by (namespace, name) that the store still holds."""
        found = []
        for namespace, name in keys:
            event = super().get("Event", name, namespace or None)
            if event is not None:
                found.append(event)
        return found


def _key(obj: Obj) -> tuple[str, str]:
    """(namespace, name): the order of a store's lists."""
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def insight_source(app: FastAPI) -> StoreSource:
    """What the insight views read: the manager's cache when one runs here, else the store."""
    manager = manager_of(app)
    if manager is not None:
        return CacheSource(app.state.store, manager, app)
    return StoreSource(app.state.store, app)


def consistent_source(app: FastAPI) -> tuple[StoreSource, int]:
    """What a view reads and the store's revision its answer is at least as recent as: the
    revision is read first, then the manager's cache once it has applied every change up to it
    (a view reads nothing older than a write its caller saw answered), else the store."""
    store = app.state.store
    revision = store.revision()
    source = insight_source(app)
    if isinstance(source, CacheSource) and not source.cache.caught_up(revision, _CATCH_UP_SECONDS):
        source = StoreSource(store, app)  # a cache this far behind: read the store itself
    return source, revision
