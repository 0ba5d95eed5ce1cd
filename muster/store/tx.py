"""One write transaction of the SQL store: many writes, a handful of statements.

A transaction locks the revision row first (see :mod:`muster.store.schema`), then applies the
Store's write rules (:mod:`muster.store.objects`) to an in-memory overlay of the objects it
touched: each write is checked (Conflict, NotFound, AlreadyExists) and stamped with its own
revision at once, so the caller gets the stored object back as from a single write. Nothing
is sent to the database until :meth:`Tx.flush`, which writes every touched object's final
state and the change log with one batched statement per table (on PostgreSQL, all of them
and the notification in one statement: :meth:`Driver.write_at_once`). Successive writes of one
object in one transaction are coalesced in the change log: a watcher sees the object's last
state (at the last write's revision) in place of every intermediate one. Revisions of the
coalesced writes are simply absent from the log, which a watcher (``revision > last``) never
notices.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, delete, text, update

from muster.store import codec, schema
from muster.store.base import DEFAULT_MAX_OBJECT_BYTES, AlreadyExists, ApplyResult, NotFound, Obj, TooLarge
from muster.store.capabilities import UNKNOWN, Committed, Lookup
from muster.store.codec import dumps, loads
from muster.store.listen import notice
from muster.store.objects import (
    check_version,
    merge_apply,
    new_object,
    object_key,
    with_revision,
)
from muster.util import size_text

__all__ = ["Driver", "Tx", "describe", "load", "not_found"]

Key = tuple[str, str, str | None]  # (kind, name, namespace): object_key's order
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]

# IN lists stay well below SQLite's bound-parameter limit.
_KEYS_PER_QUERY = 500
_KEYS_READ_ONE_BY_ONE = 2
# The statements a write runs per object go to the driver as plain SQL: SQLAlchemy's own
# execution path costs several times the statement itself, and a pass runs thousands.
_OBJECT_COLUMNS = "kind, namespace, name, uid, resource_version, generation, labels, data"
_SQL = {
    "select": "SELECT data FROM objects WHERE kind = {p} AND namespace = {p} AND name = {p}",
    "select_names": "SELECT data FROM objects WHERE kind = {p} AND namespace = {p} AND name IN ({{names}})",
    "insert": f"INSERT INTO objects ({_OBJECT_COLUMNS}) VALUES ({', '.join(['{p}'] * 8)})",
    "update": (
        "UPDATE objects SET uid = {p}, resource_version = {p}, generation = {p}, labels = {p}, data = {p} "
        "WHERE kind = {p} AND namespace = {p} AND name = {p}"
    ),
    "delete": "DELETE FROM objects WHERE kind = {p} AND namespace = {p} AND name = {p}",
    "log": (
        f"INSERT INTO changes (revision, type, kind, namespace, name, data) VALUES ({', '.join(['{p}'] * 6)})"
    ),
    "set_revision": "UPDATE revision SET value = {p} WHERE id = 1",
}
# psycopg runs executemany in pipeline mode, which costs it more CPU than the rows' own
# statements for the few rows a pass writes (300 us for one row, 530 for 16, against 180-240
# for one multi-row INSERT): on PostgreSQL the inserts go as one INSERT of many rows, and the
# other statements one by one up to this many rows.
_PG_ONE_BY_ONE = 4
_PG_ROWS_PER_INSERT = 1000  # 8 parameters a row: far below PostgreSQL's 65,535
_PG_PARAMS_AT_ONCE = 20000  # a transaction's writes in one statement up to this many (Driver.write_at_once)


@dataclass
class _Version:
    """An object as this transaction left it: the object (None once deleted) and its JSON."""

    obj: Obj | None
    data: str = ""


@dataclass
class _Change:
    type: ChangeType
    key: Key
    revision: int
    data: str


class Tx:
    """One write transaction over ``conn`` (which the caller commits or rolls back)."""

    def __init__(
        self,
        conn: Connection,
        retention: int,
        notify_channel: str | None = None,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        self.conn = conn
        self.driver = Driver(conn)
        self.retention = retention
        self.notify_channel = notify_channel
        self.max_object_bytes = max_object_bytes
        self.revision, self.compacted = schema.current_revision(conn, lock=True)
        self.began = self.revision
        self.writes = 0
        self._base: dict[Key, Obj | None] = {}  # touched keys as the database holds them
        self._now: dict[Key, _Version] = {}  # touched keys as this transaction leaves them
        self._changes: list[_Change] = []
        self._last_change: dict[Key, int] = {}  # key -> index in _changes of its latest change
        # Where untouched keys are read first (a replica at this transaction's revision).
        self.replica: Lookup | None = None

    @property
    def changed(self) -> bool:
        return self.writes > 0

    def kinds(self) -> frozenset[str]:
        """The kinds the transaction changed (a watcher of other kinds need not wake for it)."""
        return frozenset(c.key[0] for c in self._changes)

    def committed(self) -> list[Committed]:
        """The transaction's changes, as a replica takes them once they are committed."""
        return [(c.type, c.key[0], c.key[2] or "", c.key[1], c.revision, c.data) for c in self._changes]

    # -- reads ---------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        """The object as this transaction sees it (a fresh copy the caller may edit)."""
        key = (kind, name, namespace or None)
        version = self._now.get(key)
        if version is not None:
            return None if version.obj is None else loads(version.data)
        # Kept in the base: a read is mostly followed by a write of the same object (an Event
        # counted, a status changed), which would otherwise read it again. The transaction
        # holds the store's write lock, so what it read stays what the database holds.
        base = self._current(key)
        return None if base is None else codec.copy(base)

    # -- writes --------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        key = _norm(object_key(obj))
        if self._current(key) is not None:
            kind, name, ns = key
            raise AlreadyExists(
                f"{describe(kind, name, ns)} already exists; use update or apply to change it"
            )
        return self._record("ADDED", key, new_object(obj, self._next(), str(uuid.uuid4())))

    def modify(self, obj: Obj, merge: Callable[[Obj, Obj], Obj | None]) -> Obj:
        key = _norm(object_key(obj))
        stored = self._stored(key)
        check_version(stored, obj["metadata"].get("resourceVersion"))
        out = merge(stored, obj)
        if out is None:  # a no-op write keeps the resourceVersion, as in Kubernetes
            return codec.copy(stored)
        return self._record("MODIFIED", key, with_revision(out, self._next()))

    def delete(self, kind: str, name: str, namespace: str | None, resource_version: str | None) -> Obj:
        key = (kind, name, namespace or None)
        stored = self._stored(key)
        check_version(stored, resource_version)
        return self._record("DELETED", key, with_revision(codec.copy(stored), self._next()))

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        """Create or update each object in order (one read of what exists for the lot)."""
        keys = [_norm(object_key(obj)) for obj in objs]
        self.prefetch(keys)
        results: list[ApplyResult] = []
        for obj, key in zip(objs, keys, strict=True):
            stored = self._current(key)
            if stored is None:
                out = self._record("ADDED", key, new_object(obj, self._next(), str(uuid.uuid4())))
                results.append(ApplyResult(out, "created"))
                continue
            check_version(stored, obj["metadata"].get("resourceVersion"))
            merged = merge_apply(stored, obj)
            if merged is None:
                results.append(ApplyResult(codec.copy(stored), "unchanged"))
                continue
            out = self._record("MODIFIED", key, with_revision(merged, self._next()))
            results.append(ApplyResult(out, "configured"))
        return results

    # -- the end -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Send every write to the database (the caller commits)."""
        if not self.changed:
            return
        inserts: list[tuple[Any, ...]] = []
        updates: list[tuple[Any, ...]] = []
        deletes: list[tuple[Any, ...]] = []
        for key, version in self._now.items():
            existed = self._base.get(key) is not None
            if version.obj is None:
                if existed:
                    deletes.append(_key_params(key))
            elif existed:
                updates.append(_row(version.obj, version.data)[3:] + _key_params(key))
            else:
                inserts.append(_row(version.obj, version.data))
        log = [_change_row(c) for c in self._changes]
        # Delivered to listeners at COMMIT (PostgreSQL), so a watcher never reads ahead of it.
        note = (
            None
            if self.notify_channel is None
            else (self.notify_channel, notice(self.revision, self.kinds()))
        )
        if not self.driver.write_at_once(deletes, updates, inserts, log, self.revision, note):
            # Deletes first: a name deleted and created again in one transaction is an update.
            self.driver.many("delete", deletes)
            self.driver.many("update", updates)
            self.driver.many("insert", inserts)
            self.driver.many("log", log)
            self.driver.many("set_revision", [(self.revision,)])
            if note is not None:
                self.conn.execute(
                    text("SELECT pg_notify(:channel, :payload)"), {"channel": note[0], "payload": note[1]}
                )
        # Compact in steps of a tenth of the retention, so most transactions skip the DELETE.
        if self.revision - self.compacted > self.retention + max(1, self.retention // 10):
            compacted = self.revision - self.retention
            self.conn.execute(delete(schema.changes).where(schema.changes.c.revision <= compacted))
            self.conn.execute(
                update(schema.revision).where(schema.revision.c.id == 1).values(compacted=compacted)
            )

    # -- internals ---------------------------------------------------------------------------

    def _next(self) -> int:
        self.revision += 1
        self.writes += 1
        return self.revision

    def _current(self, key: Key) -> Obj | None:
        """The object as this transaction sees it now (shared: not to be edited)."""
        version = self._now.get(key)
        if version is not None:
            return version.obj
        if key not in self._base:
            found = UNKNOWN if self.replica is None else self.replica(*key)
            self._base[key] = self.driver.load(*key) if found is UNKNOWN else found
        return self._base[key]

    def _stored(self, key: Key) -> Obj:
        stored = self._current(key)
        if stored is None:
            raise NotFound(not_found(*key))
        return stored

    def _record(self, type_: ChangeType, key: Key, obj: Obj) -> Obj:
        """Keep the write's result and return it. It is not copied: ``obj`` shares parts with
        the caller's input and the stored object (see :mod:`muster.store.objects`), and a
        decode of its JSON was an eighth of the manager's CPU (in process, with a puppet
        runtime). So neither is edited after the write (:class:`muster.store.base.Writer`);
        what the database gets is ``data``, encoded here."""
        self._current(key)  # the stored version, in the base: flush updates or inserts by it
        data = dumps(obj)
        if type_ != "DELETED":
            try:
                _check_size(key, data, self.max_object_bytes)
            except TooLarge:
                self.revision -= 1  # the revision _next() handed this write is not used
                self.writes -= 1
                raise
        self._now[key] = _Version(None if type_ == "DELETED" else obj, data)
        revision = int(obj["metadata"]["resourceVersion"])
        last = self._last_change.get(key)
        if type_ == "MODIFIED" and last is not None and self._changes[last].type != "DELETED":
            # The same incarnation changed again: its one log entry carries the last state.
            previous = self._changes[last]
            self._changes[last] = _Change(previous.type, key, revision, data)
            return obj
        self._last_change[key] = len(self._changes)
        self._changes.append(_Change(type_, key, revision, data))
        return obj

    def prefetch(self, keys: Sequence[Key]) -> None:
        """Read the untouched ``keys`` in a few statements rather than one each."""
        wanted = sorted(
            {
                (k, ns or "", n)
                for k, n, ns in keys
                if (k, n, ns or None) not in self._now and (k, n, ns or None) not in self._base
            }
        )
        if len(wanted) <= _KEYS_READ_ONE_BY_ONE:
            # An apply of one or two documents (most of them): the per-key read, which the
            # replica answers when the batch has one.
            for kind, ns, name in wanted:
                self._current((kind, name, ns or None))
            return
        found: dict[Key, Obj] = {}
        for (kind, ns), group in itertools.groupby(wanted, key=lambda k: (k[0], k[1])):
            names = [name for _, _, name in group]
            for start in range(0, len(names), _KEYS_PER_QUERY):
                for data in self.driver.load_many(kind, ns, names[start : start + _KEYS_PER_QUERY]):
                    obj = loads(data)
                    found[_norm(object_key(obj))] = obj
        for kind, ns, name in wanted:
            key = (kind, name, ns or None)
            self._base.setdefault(key, found.get(key))


class Driver:
    """The store's per-object statements, run straight on the transaction's DBAPI connection."""

    def __init__(self, conn: Connection) -> None:
        db = conn.connection.driver_connection
        assert db is not None
        self.db: Any = db
        self.sql = _statements(conn.dialect.paramstyle)
        self.postgres = conn.dialect.name == "postgresql"

    def load(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        """The stored object, or None."""
        cur = self.db.cursor()
        try:
            cur.execute(self.sql["select"], (kind, namespace or "", name))
            row = cur.fetchone()
        finally:
            cur.close()
        return None if row is None else loads(row[0])

    def load_many(self, kind: str, namespace: str, names: Sequence[str]) -> list[str]:
        """The stored JSON of those of ``names`` (of one kind and namespace) that exist."""
        sql = self.sql["select_names"].format(names=", ".join([self.sql["mark"]] * len(names)))
        cur = self.db.cursor()
        try:
            cur.execute(sql, (kind, namespace, *names))
            return [row[0] for row in cur.fetchall()]
        finally:
            cur.close()

    def write_at_once(
        self,
        deletes: list[tuple[Any, ...]],
        updates: list[tuple[Any, ...]],
        inserts: list[tuple[Any, ...]],
        log: list[tuple[Any, ...]],
        revision: int,
        note: tuple[str, str] | None,
    ) -> bool:
        """On PostgreSQL, a transaction's writes in one statement (False elsewhere, or when
        they are too many for one: then :meth:`many` writes them table by table).

        Each statement is a round trip to the server, which on a busy host must wait for a
        core: a manager pass wrote its objects, its log, the revision and the notification in
        five to nine of them (a tenth of the manager's time on PostgreSQL). Data-modifying
        WITH clauses run once each, on the same snapshot; they touch distinct rows (a key is
        deleted, updated or inserted, never two of them), so none needs to see another's.
        """
        params = 3 * len(deletes) + 8 * (len(updates) + len(inserts)) + 6 * len(log) + 3
        if not self.postgres or params > _PG_PARAMS_AT_ONCE:
            return False
        mark = self.sql["mark"]
        clauses: list[str] = []
        values: list[Any] = []
        if deletes:
            keys = ", ".join([f"({mark}, {mark}, {mark})"] * len(deletes))
            clauses.append(f"d AS (DELETE FROM objects WHERE (kind, namespace, name) IN ({keys}))")
            values.extend(v for row in deletes for v in row)
        if updates:
            # Typed placeholders: a VALUES list in FROM has no column to take its types from.
            types = ("text", "bigint", "bigint", "text", "text", "text", "text", "text")
            one = "(" + ", ".join(f"{mark}::{t}" for t in types) + ")"
            clauses.append(
                f"u AS (UPDATE objects o SET uid = v.uid, resource_version = v.rv, generation = v.gen, "
                f"labels = v.labels, data = v.data FROM (VALUES {', '.join([one] * len(updates))}) "
                "AS v(uid, rv, gen, labels, data, kind, namespace, name) "
                "WHERE o.kind = v.kind AND o.namespace = v.namespace AND o.name = v.name)"
            )
            values.extend(v for row in updates for v in row)
        for name, statement, rows in (("i", "insert", inserts), ("l", "log", log)):
            if rows:
                clauses.append(f"{name} AS ({self._rows_insert(statement, len(rows))})")
                values.extend(v for row in rows for v in row)
        clauses.append(f"r AS ({self.sql['set_revision']})")
        values.append(revision)
        main = "SELECT 1"
        if note is not None:
            main = f"SELECT pg_notify({mark}, {mark})"
            values.extend(note)
        cur = self.db.cursor()
        try:
            # Never prepared: its text changes with each count of rows, so preparing it would only
            # churn the connection's prepared statements (a pass-shaped write: 1.56 -> 1.23 ms of
            # client CPU against the statements by table, wall 2.55 -> 2.40 ms).
            cur.execute(f"WITH {', '.join(clauses)} {main}", values, prepare=False)
        finally:
            cur.close()
        return True

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        sql = self.sql[statement]
        cur = self.db.cursor()
        try:
            if not self.postgres:
                cur.executemany(sql, rows)
            elif statement in ("insert", "log"):
                for start in range(0, len(rows), _PG_ROWS_PER_INSERT):
                    chunk = rows[start : start + _PG_ROWS_PER_INSERT]
                    cur.execute(self._rows_insert(statement, len(chunk)), [v for r in chunk for v in r])
            elif len(rows) <= _PG_ONE_BY_ONE:
                for row in rows:
                    cur.execute(sql, row)
            else:
                cur.executemany(sql, rows)
        finally:
            cur.close()

    def _rows_insert(self, statement: str, count: int) -> str:
        """The INSERT ``statement`` ("insert" or "log") of ``count`` rows in one statement."""
        head, _, one = self.sql[statement].partition(" VALUES ")
        return f"{head} VALUES {', '.join([one] * count)}"


@functools.cache
def _statements(paramstyle: str) -> dict[str, str]:
    mark = schema.PARAM_MARK[paramstyle]
    return {"mark": mark} | {name: sql.format(p=mark) for name, sql in _SQL.items()}


def load(conn: Connection, kind: str, name: str, namespace: str | None) -> Obj | None:
    """The stored object, or None."""
    return Driver(conn).load(kind, name, namespace)


def describe(kind: str, name: str, namespace: str | None) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def not_found(kind: str, name: str, namespace: str | None) -> str:
    return f"{describe(kind, name, namespace)} not found"


def _norm(key: Key) -> Key:
    kind, name, ns = key
    return kind, name, ns or None


def _key_params(key: Key) -> tuple[Any, ...]:
    kind, name, ns = key
    return kind, ns or "", name


def _change_row(change: _Change) -> tuple[Any, ...]:
    kind, name, ns = change.key
    return change.revision, change.type, kind, ns or "", name, change.data


def _row(obj: Obj, data: str) -> tuple[Any, ...]:
    """The objects row (in _OBJECT_COLUMNS' order)."""
    meta = obj["metadata"]
    return (
        obj["kind"],
        meta.get("namespace") or "",
        meta["name"],
        meta["uid"],
        int(meta["resourceVersion"]),
        int(meta.get("generation") or 1),
        dumps(meta.get("labels") or {}),
        data,
    )


def _check_size(key: Key, data: str, limit: int) -> None:
    # A character is 1 to 4 bytes of UTF-8: encode only when the count of characters cannot decide.
    if len(data) * 4 <= limit:
        return
    size = len(data) if len(data) > limit else len(data.encode())
    if size > limit:
        raise TooLarge(
            f"{describe(*key)} is {size_text(size)} as JSON, more than the "
            f"store's limit of {size_text(limit)} per object; keep large data in volumes or artifacts, "
            "not in the object",
            size,
            limit,
        )
