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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    bindparam,
    cast,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB

from muster.store import schema
from muster.store.audit import AuditQuery, append_audit, prune_audit, query_audit
from muster.store.base import (
    DEFAULT_MAX_OBJECT_BYTES,
    AlreadyExists,
    ApplyResult,
    LabelSelector,
    ListResult,
    NotFound,
    Obj,
    TooLarge,
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
from muster.util import size_text

__all__ = ["SqlStore"]

# Row-value IN lists stay well below SQLite's bound-parameter limit (three per key).
_KEYS_PER_QUERY = 500
_UPDATE_BY_KEY = update(schema.objects).where(
    schema.objects.c.kind == bindparam("k_kind"),
    schema.objects.c.namespace == bindparam("k_namespace"),
    schema.objects.c.name == bindparam("k_name"),
)

T = TypeVar("T")


class SqlStore:
    """A Store over one SQLAlchemy engine. Thread-safe; one instance per process and database.

    ``poll_interval`` bounds how late a watcher sees a write made by another process;
    ``retention`` is how many revisions of change log are kept for watches to resume from;
    ``max_object_bytes`` is the largest object (its JSON) a write may store.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        poll_interval: float = 0.5,
        retention: int = 100_000,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        if retention < 1:
            raise ValueError("retention must be at least 1 revision")
        if max_object_bytes < 1:
            raise ValueError("max_object_bytes must be at least 1")
        self.engine = engine
        self.poll_interval = poll_interval
        self.retention = retention
        self.max_object_bytes = max_object_bytes
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
        revision, texts = self.list_json(kind, namespace, selector)
        return ListResult(items=[json.loads(t) for t in texts], resource_version=revision)

    def list_json(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> tuple[str, list[str]]:
        """Like :meth:`list`, with each object as its stored JSON text (see JsonListing)."""
        o = schema.objects.c
        q = select(o.namespace, o.name, o.labels, o.data).where(o.kind == kind)
        if namespace is not None:
            q = q.where(o.namespace == namespace)
        if selector is not None:
            # The selective requirements narrow the rows in the database; the whole selector
            # is still checked below, so this only has to never drop a match.
            for key, value in selector.equals.items():
                q = q.where(self._label(key) == value)
            for key, values in selector.in_.items():
                q = q.where(self._label(key).in_(sorted(values)))
        with read_transaction(self.engine) as conn:
            revision = schema.current_revision(conn)[0]
            rows = conn.execute(q).all()
        # Sorted here, not by the database, so that both databases order names bytewise
        # whatever collation a PostgreSQL database was created with.
        rows.sort(key=lambda r: (r[0], r[1]))
        texts = [
            data
            for _ns, _name, labels, data in rows
            if selector is None or selector.matches(json.loads(labels))
        ]
        return str(revision), texts

    def _label(self, key: str) -> ColumnElement[Any]:
        """The value of label ``key`` as SQL text (NULL when absent)."""
        labels = schema.objects.c.labels
        if is_postgres(self.engine):
            return func.jsonb_extract_path_text(cast(labels, JSONB), key)
        # Label keys cannot contain a double quote, so the JSON path needs no escaping.
        return func.json_extract(labels, f'$."{key}"')

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
        return self._write(lambda tx: tx.apply(objs))

    def append_audit(self, records: Sequence[Mapping[str, Any]]) -> None:
        append_audit(self.engine, records)

    def query_audit(self, query: AuditQuery) -> list[dict[str, Any]]:
        return query_audit(self.engine, query)

    def prune_audit(self, before: float) -> int:
        return prune_audit(self.engine, before)

    def close(self) -> None:
        self.notifier.close()
        self.engine.dispose()

    def _write(self, op: Callable[[_Tx], T]) -> T:
        with self._write_lock:
            with write_transaction(self.engine) as conn:
                tx = _Tx(conn, self.retention, self.max_object_bytes)
                result = op(tx)
                tx.finish()
            if tx.changed:
                self.notifier.notify(tx.revision)
        return result


class _Tx:
    """One write transaction: hands out revisions and records each change in the log."""

    def __init__(self, conn: Connection, retention: int, max_object_bytes: int) -> None:
        self.conn = conn
        self.retention = retention
        self.max_object_bytes = max_object_bytes
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
        self.conn.execute(insert(schema.objects).values(**self._row(out), uid=out["metadata"]["uid"]))
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

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        """Create or update each object in order, in a handful of statements for the lot
        (one read of what exists, then batched writes), not several per object."""
        keys = [object_key(obj) for obj in objs]
        current = _load_many(self.conn, keys)
        created: list[Obj] = []
        updated: list[Obj] = []
        logged: list[tuple[str, Obj]] = []
        results: list[ApplyResult] = []
        for obj, key in zip(objs, keys, strict=True):
            stored = current.get(key)
            if stored is None:
                out = new_object(obj, self._next(), str(uuid.uuid4()))
                created.append(out)
                logged.append(("ADDED", out))
                results.append(ApplyResult(out, "created"))
            else:
                check_version(stored, obj["metadata"].get("resourceVersion"))
                merged = merge_apply(stored, obj)
                if merged is None:
                    results.append(ApplyResult(stored, "unchanged"))
                    continue
                out = with_revision(merged, self._next())
                updated.append(out)
                logged.append(("MODIFIED", out))
                results.append(ApplyResult(out, "configured"))
            current[key] = out  # a later document for the same object builds on this one
        # Inserts first: an object created and then changed in one apply is inserted, then updated.
        if created:
            self.conn.execute(
                insert(schema.objects), [self._row(o) | {"uid": o["metadata"]["uid"]} for o in created]
            )
        if updated:
            self.conn.execute(_UPDATE_BY_KEY, [self._row(o) | _key_params(o) for o in updated])
        if logged:
            self.conn.execute(insert(schema.changes), [_change_row(t, o) for t, o in logged])
        return results

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
        self.conn.execute(update(schema.objects).where(*_key_clause(kind, name, ns)).values(**self._row(out)))
        self._log("MODIFIED", out)

    def _row(self, obj: Obj) -> dict[str, Any]:
        row = _row(obj)
        _check_size(obj, row["data"], self.max_object_bytes)
        return row

    def _log(self, type_: Literal["ADDED", "MODIFIED", "DELETED"], obj: Obj) -> None:
        self.conn.execute(insert(schema.changes).values(**_change_row(type_, obj)))


def _load(conn: Connection, kind: str, name: str, namespace: str | None) -> Obj | None:
    q = select(schema.objects.c.data).where(*_key_clause(kind, name, namespace))
    data = conn.execute(q).scalar_one_or_none()
    return None if data is None else json.loads(data)


def _load_many(conn: Connection, keys: Sequence[tuple[str, str, str | None]]) -> dict[tuple, Obj]:
    """The stored objects among ``keys``, by key (absent ones are missing from the dict)."""
    o = schema.objects.c
    found: dict[tuple, Obj] = {}
    wanted = sorted({(kind, ns or "", name) for kind, name, ns in keys})
    for start in range(0, len(wanted), _KEYS_PER_QUERY):
        chunk = wanted[start : start + _KEYS_PER_QUERY]
        q = select(o.data).where(tuple_(o.kind, o.namespace, o.name).in_(chunk))
        for (data,) in conn.execute(q):
            obj = json.loads(data)
            found[object_key(obj)] = obj
    return found


def _key_params(obj: Obj) -> dict[str, Any]:
    kind, name, ns = object_key(obj)
    return {"k_kind": kind, "k_namespace": ns or "", "k_name": name}


def _change_row(type_: str, obj: Obj) -> dict[str, Any]:
    kind, name, ns = object_key(obj)
    revision = int(obj["metadata"]["resourceVersion"])
    return {
        "revision": revision,
        "type": type_,
        "kind": kind,
        "namespace": ns or "",
        "name": name,
        "data": _dumps(obj),
    }


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


def _check_size(obj: Obj, data: str, limit: int) -> None:
    # A character is 1 to 4 bytes of UTF-8: encode only when the count of characters cannot decide.
    if len(data) * 4 <= limit:
        return
    size = len(data) if len(data) > limit else len(data.encode())
    if size > limit:
        kind, name, ns = object_key(obj)
        raise TooLarge(
            f"{_describe(kind, name, ns)} is {size_text(size)} as JSON, more than the store's limit of "
            f"{size_text(limit)} per object; keep large data in volumes or artifacts, not in the object",
            size,
            limit,
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _describe(kind: str, name: str, namespace: str | None) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _not_found(kind: str, name: str, namespace: str | None) -> str:
    return f"{_describe(kind, name, namespace)} not found"
