"""The tables of the SQL store (SQLAlchemy Core; the migrations create the same).

* ``revision``: one row (id 1) holding the global revision counter and the newest revision
  dropped from the change log (``compacted``). Writers lock this row first, which orders
  every write: revision N+1 is handed out only after the writer of N committed, so the change
  log is committed in revision order and a watcher reading ``revision > last`` misses nothing.
* ``objects``: the current state, keyed (kind, namespace, name); cluster-scoped objects have
  namespace ``''``. ``data`` is the whole wire object as JSON; uid, resource_version,
  generation and labels are copied out for lookups.
* ``changes``: the watch log, one row per write, with the object after the write.
* ``audit``: the audit log of the API server (who did what, when, with what result), apart
  from the objects: it is not versioned, watched or part of the revision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = [
    "PARAM_MARK",
    "audit",
    "changes",
    "current_revision",
    "driver_rows",
    "metadata",
    "objects",
    "revision",
]

metadata = MetaData()

revision = Table(
    "revision",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("value", BigInteger, nullable=False),
    Column("compacted", BigInteger, nullable=False),
)

objects = Table(
    "objects",
    metadata,
    Column("kind", String(63), primary_key=True),
    Column("namespace", String(63), primary_key=True),
    Column("name", String(253), primary_key=True),
    Column("uid", String(36), nullable=False, unique=True),
    Column("resource_version", BigInteger, nullable=False),
    Column("generation", BigInteger, nullable=False),
    Column("labels", Text, nullable=False),
    Column("data", Text, nullable=False),
)

changes = Table(
    "changes",
    metadata,
    Column("revision", BigInteger, primary_key=True, autoincrement=False),
    Column("type", String(8), nullable=False),
    Column("kind", String(63), nullable=False),
    Column("namespace", String(63), nullable=False),
    Column("name", String(253), nullable=False),
    Column("data", Text, nullable=False),
)

Index("ix_changes_kind_revision", changes.c.kind, changes.c.revision)

audit = Table(
    "audit",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("username", String(253), nullable=False),
    Column("verb", String(32), nullable=False),
    Column("resource", String(253), nullable=False),
    Column("namespace", String(63), nullable=False),
    Column("name", String(253), nullable=False),
    Column("code", Integer, nullable=False),
    Column("data", Text, nullable=False),
)

Index("ix_audit_time", audit.c.time)
Index("ix_audit_namespace_time", audit.c.namespace, audit.c.time)


_REVISION_SQL = "SELECT value, compacted FROM revision WHERE id = 1"
# The placeholder of each DBAPI paramstyle, for the statements run straight on the driver.
PARAM_MARK = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def current_revision(conn: Connection, lock: bool = False) -> tuple[int, int]:
    """``(revision, compacted)`` as seen by ``conn``'s transaction; ``lock`` takes the
    revision row's lock (PostgreSQL's write lock, see ``write_transaction``) until COMMIT."""
    # Every read and write transaction runs this first: straight on the driver (below).
    lock_clause = " FOR UPDATE" if lock and conn.dialect.name == "postgresql" else ""
    ((value, compacted),) = driver_rows(conn, _REVISION_SQL + lock_clause)
    return int(value), int(compacted)


def driver_rows(conn: Connection, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    """The rows of ``sql`` (placeholders in ``PARAM_MARK``'s style) run on the DBAPI connection
    of ``conn``'s transaction, for the statements every transaction or watch runs: SQLAlchemy's
    execution path costs several times such a statement."""
    db = conn.connection.driver_connection
    assert db is not None
    cur = db.cursor()
    try:
        cur.execute(sql, params)
        return list(cur.fetchall())
    finally:
        cur.close()
