"""The migrations build exactly the schema the code uses, and re-opening is harmless."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from muster.store import open_store
from muster.store.engine import make_engine
from muster.store.schema import metadata


def test_migrated_schema_matches_schema_module(store_url: str):
    open_store(store_url).close()
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
            assert diff == [], f"muster/store/schema.py and the migrations disagree: {diff}"
            assert set(inspect(conn).get_table_names()) == {
                "alembic_version",
                "revision",
                "objects",
                "changes",
                "audit",
            }
    finally:
        engine.dispose()


def test_reopening_keeps_data_and_revision(store_url: str):
    first = open_store(store_url)
    first.create({"kind": "ResourceFlavor", "metadata": {"name": "a"}, "spec": {}})
    first.close()
    again = open_store(store_url)
    try:
        assert again.revision() == 1
        assert again.get("ResourceFlavor", "a")["metadata"]["resourceVersion"] == "1"
    finally:
        again.close()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "mysql://x@y/z"])
def test_unsupported_urls_say_what_works(url: str):
    with pytest.raises(ValueError, match="sqlite:///"):
        open_store(url)


def test_sqlite_synchronous_option(tmp_path):
    from sqlalchemy import text

    for value, expected in (("", 2), ("?synchronous=normal", 1)):
        engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}{value}")
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA synchronous")).scalar() == expected
        engine.dispose()
    with pytest.raises(ValueError, match="synchronous must be full or normal"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}?synchronous=off")


def test_the_audit_log_appends_queries_and_prunes(store_url: str):
    from muster.store.audit import AuditQuery

    store = open_store(store_url)
    try:
        records = [
            {
                "time": 100.0,
                "user": "alice",
                "verb": "create",
                "resource": "trainingjobs",
                "namespace": "a",
                "code": 201,
            },
            {
                "time": 200.0,
                "user": "bob",
                "verb": "delete",
                "resource": "trainingjobs",
                "namespace": "b",
                "code": 403,
            },
            {
                "time": 300.0,
                "user": "alice",
                "verb": "patch",
                "resource": "pods",
                "namespace": "a",
                "code": 200,
            },
        ]
        store.append_audit(records)  # type: ignore[attr-defined]
        query = store.query_audit  # type: ignore[attr-defined]
        assert [r["time"] for r in query(AuditQuery())] == [300.0, 200.0, 100.0]
        assert [r["verb"] for r in query(AuditQuery(user="alice"))] == ["patch", "create"]
        assert [r["user"] for r in query(AuditQuery(failed=True))] == ["bob"]
        assert [r["time"] for r in query(AuditQuery(namespaces=frozenset({"a"}), since=150.0))] == [300.0]
        assert [r["time"] for r in query(AuditQuery(resource="trainingjobs", limit=1))] == [200.0]
        assert store.prune_audit(250.0) == 2  # type: ignore[attr-defined]
        assert len(query(AuditQuery())) == 1
        assert store.revision() == 0  # the audit log is not part of the objects' history
    finally:
        store.close()
