"""The audit log's table: append records in batches, query them newest first, prune old ones.

A record is a JSON-able dict (``time`` in epoch seconds, ``user``, ``verb``, ``resource``,
``namespace``, ``name``, ``code`` and whatever else the server records); the columns copy
out what queries filter on. The table is apart from the objects: appending bumps no
revision and wakes no watcher.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, insert, select

from muster.store import schema
from muster.store.engine import is_postgres, read_transaction, write_transaction

__all__ = ["AuditQuery", "append_audit", "prune_audit", "query_audit"]


@dataclass(frozen=True)
class AuditQuery:
    """Filters of a query; None matches anything. ``namespaces`` limits to those namespaces
    (a caller who may read the audit of some namespaces only)."""

    since: float | None = None
    until: float | None = None
    user: str | None = None
    verb: str | None = None
    resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    failed: bool | None = None  # True: only answers >= 400; False: only successes
    namespaces: frozenset[str] | None = None
    limit: int = 500


def append_audit(engine: Engine, records: Sequence[Mapping[str, Any]]) -> None:
    if not records:
        return
    rows = [
        {
            "time": float(r["time"]),
            "username": str(r.get("user") or "")[:253],
            "verb": str(r.get("verb") or "")[:32],
            "resource": str(r.get("resource") or "")[:253],
            "namespace": str(r.get("namespace") or "")[:63],
            "name": str(r.get("name") or "")[:253],
            "code": int(r.get("code") or 0),
            "data": json.dumps(r, separators=(",", ":"), default=str),
        }
        for r in records
    ]
    if is_postgres(engine):
        with engine.begin() as conn:  # needs no revision lock: the log is not versioned
            conn.execute(insert(schema.audit), rows)
    else:
        with write_transaction(engine) as conn:
            conn.execute(insert(schema.audit), rows)


def query_audit(engine: Engine, q: AuditQuery) -> list[dict[str, Any]]:
    t = schema.audit
    stmt = select(t.c.data).order_by(t.c.time.desc(), t.c.id.desc()).limit(max(1, min(q.limit, 10_000)))
    if q.since is not None:
        stmt = stmt.where(t.c.time >= q.since)
    if q.until is not None:
        stmt = stmt.where(t.c.time < q.until)
    for column, value in (
        (t.c.username, q.user),
        (t.c.verb, q.verb),
        (t.c.resource, q.resource),
        (t.c.namespace, q.namespace),
        (t.c.name, q.name),
    ):
        if value is not None:
            stmt = stmt.where(column == value)
    if q.failed is not None:
        stmt = stmt.where(t.c.code >= 400 if q.failed else t.c.code < 400)
    if q.namespaces is not None:
        stmt = stmt.where(t.c.namespace.in_(sorted(q.namespaces)))
    with read_transaction(engine) as conn:
        return [json.loads(row[0]) for row in conn.execute(stmt)]


def prune_audit(engine: Engine, before: float) -> int:
    """Delete records older than ``before`` (epoch seconds); how many went."""
    stmt = delete(schema.audit).where(schema.audit.c.time < before)
    if is_postgres(engine):
        with engine.begin() as conn:
            return conn.execute(stmt).rowcount or 0
    with write_transaction(engine) as conn:
        return conn.execute(stmt).rowcount or 0
