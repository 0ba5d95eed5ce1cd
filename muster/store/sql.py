"""The SQL implementation of :class:`muster.store.base.Store` (SQLite and PostgreSQL).

Every write is one transaction that takes the write lock (see :mod:`muster.store.engine`),
reads the revision counter, changes ``objects``, appends to ``changes`` and stores the new
revision. Watchers of this process are woken after COMMIT; watchers in other processes find
the change on their next poll.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from muster.store import schema
from muster.store.base import (
    AlreadyExists,
    ApplyResult,
    LabelSelector,
    ListResult,
    NotFound,
    Obj,
    WatchEvent,
)
from muster.store.engine import is_postgres, read_transaction, upgrade, write_transaction
from muster.store.objects import (
    check_version,
    merge_apply,
    merge_status,
    merge_update,
    new_object,
    object_key,
    with_revision,
)
from muster.store.watch import Notifier, SqlWatch

__all__ = ["SqlStore"]

T = TypeVar("T")


class SqlStore:
    """A Store over one SQLAlchemy engine. Thread-safe; one instance per process and database.

    ``poll_interval`` bounds how late a watcher sees a write made by another process;
    ``retention`` is how many revisions of change log are kept for watches to resume from.
    """

    def __init__(self, engine: Engine, *, poll_interval: float = 0.5, retention: int = 100_000) -> None:
        if retention < 1:
            raise ValueError("retention must be at least 1 revision")
        self.engine = engine
        self.poll_interval = poll_interval
        self.retention = retention
        self.notifier = Notifier()
        # SQLite serialises writers anyway; doing it in-process first spares them the busy
        # handler's sleep-and-retry. PostgreSQL writers queue on the revision row lock.
        self._write_lock: Any = nullcontext() if is_postgres(engine) else threading.Lock()
        upgrade(engine)

    # -- reads -------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        with read_transaction(self.engine) as conn:
            found = _load(conn, kind, name, namespace)
        if found is None:
            raise NotFound(_not_found(kind, name, namespace))
        return found

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
    ) -> ListResult:
        q = select(schema.objects.c.namespace, schema.objects.c.name, schema.objects.c.labels)
        q = q.add_columns(schema.objects.c.data).where(schema.objects.c.kind == kind)
        if namespace is not None:
            q = q.where(schema.objects.c.namespace == namespace)
        with read_transaction(self.engine) as conn:
            revision = schema.current_revision(conn)[0]
            rows = conn.execute(q).all()
        # Sorted here, not by the database, so that both databases order names bytewise
        # whatever collation a PostgreSQL database was created with.
        rows.sort(key=lambda r: (r[0], r[1]))
        items = [
            json.loads(data)
            for _ns, _name, labels, data in rows
            if selector is None or selector.matches(json.loads(labels))
        ]
        return ListResult(items=items, resource_version=str(revision))

    def revision(self) -> int:
        with read_transaction(self.engine) as conn:
            return schema.current_revision(conn)[0]

    def counts(self) -> dict[str, int]:
        q = select(schema.objects.c.kind, func.count()).group_by(schema.objects.c.kind)
        with read_transaction(self.engine) as conn:
            return {kind: int(n) for kind, n in conn.execute(q).all()}

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        since: str | int | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        return SqlWatch(self, kind=kind, namespace=namespace, since=since, timeout=timeout)

    # -- writes ------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.create(obj))

    def update(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.modify(obj, merge_update))

    def update_status(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.modify(obj, merge_status))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> Obj:
        return self._write(lambda tx: tx.delete(kind, name, namespace, resource_version))

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        return self._write(lambda tx: [tx.apply(obj) for obj in objs])

    def close(self) -> None:
        self.notifier.close()
        self.engine.dispose()

    def _write(self, op: Callable[[_Tx], T]) -> T:
        with self._write_lock:
            with write_transaction(self.engine) as conn:
                tx = _Tx(conn, self.retention)
                result = op(tx)
                tx.finish()
            if tx.changed:
                self.notifier.notify(tx.revision)
        return result


class _Tx:
    """One write transaction: hands out revisions and records each change in the log."""

    def __init__(self, conn: Connection, retention: int) -> None:
        self.conn = conn
        self.retention = retention
        q = select(schema.revision.c.value, schema.revision.c.compacted).where(schema.revision.c.id == 1)
        self.revision, self.compacted = conn.execute(q.with_for_update()).one()
        self.changed = False

    def create(self, obj: Obj) -> Obj:
        kind, name, ns = object_key(obj)
        if _load(self.conn, kind, name, ns) is not None:
            raise AlreadyExists(
                f"{_describe(kind, name, ns)} already exists; use update or apply to change it"
            )
        out = new_object(obj, self._next(), str(uuid.uuid4()))
        self.conn.execute(insert(schema.objects).values(**_row(out), uid=out["metadata"]["uid"]))
        self._log("ADDED", out)
        return out

    def modify(self, obj: Obj, merge: Callable[[Obj, Obj], Obj | None]) -> Obj:
        kind, name, ns = object_key(obj)
        stored = self._stored(kind, name, ns)
        check_version(stored, obj["metadata"].get("resourceVersion"))
        out = merge(stored, obj)
        if out is None:  # a no-op write keeps the resourceVersion, as in Kubernetes
            return stored
        self._replace(with_revision(out, self._next()))
        return out

    def apply(self, obj: Obj) -> ApplyResult:
        kind, name, ns = object_key(obj)
        stored = _load(self.conn, kind, name, ns)
        if stored is None:
            return ApplyResult(self.create(obj), "created")
        check_version(stored, obj["metadata"].get("resourceVersion"))
        out = merge_apply(stored, obj)
        if out is None:
            return ApplyResult(stored, "unchanged")
        self._replace(with_revision(out, self._next()))
        return ApplyResult(out, "configured")

    def delete(self, kind: str, name: str, namespace: str | None, resource_version: str | None) -> Obj:
        stored = self._stored(kind, name, namespace)
        check_version(stored, resource_version)
        self.conn.execute(delete(schema.objects).where(*_key_clause(kind, name, namespace)))
        out = with_revision(stored, self._next())
        self._log("DELETED", out)
        return out

    def finish(self) -> None:
        if not self.changed:
            return
        values: dict[str, int] = {"value": self.revision}
        # Compact in steps of a tenth of the retention, so most writes skip the DELETE.
        if self.revision - self.compacted > self.retention + max(1, self.retention // 10):
            values["compacted"] = self.revision - self.retention
            self.conn.execute(delete(schema.changes).where(schema.changes.c.revision <= values["compacted"]))
        self.conn.execute(update(schema.revision).where(schema.revision.c.id == 1).values(**values))

    def _next(self) -> int:
        self.revision += 1
        self.changed = True
        return self.revision

    def _stored(self, kind: str, name: str, namespace: str | None) -> Obj:
        stored = _load(self.conn, kind, name, namespace)
        if stored is None:
            raise NotFound(_not_found(kind, name, namespace))
        return stored

    def _replace(self, out: Obj) -> None:
        kind, name, ns = object_key(out)
        self.conn.execute(update(schema.objects).where(*_key_clause(kind, name, ns)).values(**_row(out)))
        self._log("MODIFIED", out)

    def _log(self, type_: Literal["ADDED", "MODIFIED", "DELETED"], obj: Obj) -> None:
        kind, name, ns = object_key(obj)
        self.conn.execute(
            insert(schema.changes).values(
                revision=self.revision, type=type_, kind=kind, namespace=ns or "", name=name, data=_dumps(obj)
            )
        )


def _load(conn: Connection, kind: str, name: str, namespace: str | None) -> Obj | None:
    q = select(schema.objects.c.data).where(*_key_clause(kind, name, namespace))
    data = conn.execute(q).scalar_one_or_none()
    return None if data is None else json.loads(data)


def _key_clause(kind: str, name: str, namespace: str | None) -> tuple[Any, ...]:
    o = schema.objects.c
    return (o.kind == kind, o.namespace == (namespace or ""), o.name == name)


def _row(obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "kind": obj["kind"],
        "namespace": meta.get("namespace") or "",
        "name": meta["name"],
        "resource_version": int(meta["resourceVersion"]),
        "generation": int(meta.get("generation") or 1),
        "labels": _dumps(meta.get("labels") or {}),
        "data": _dumps(obj),
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _describe(kind: str, name: str, namespace: str | None) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _not_found(kind: str, name: str, namespace: str | None) -> str:
    return f"{_describe(kind, name, namespace)} not found"
