"""PostgreSQL's connection pool: a connection that sat idle is pinged before it is handed out,
so the store survives the server dropping its connections (a restart, an administrator);
a connection in use a moment ago is handed out without the round trip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from muster.store import Store, open_store
from muster.store import engine as engine_module
from muster.testing.postgres import PostgresServer
from tests.store.factories import job

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(postgres_server: PostgresServer) -> Iterator[Store]:
    store = open_store(postgres_server.create_database())
    try:
        yield store
    finally:
        store.close()


def _drop_its_connections(store: Store) -> int:
    """What a server restart does to the store's pooled connections: terminate them (from a
    connection of its own, outside the pool)."""
    admin = store.engine.pool.recreate()  # type: ignore[attr-defined]
    try:
        with admin.connect() as dbapi:
            cur = dbapi.cursor()
            cur.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            (killed,) = cur.fetchone()
            dbapi.commit()
    finally:
        admin.dispose()
    return killed


def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    pg: Store, monkeypatch: pytest.MonkeyPatch
):
    pg.create(job("before"))
    assert _drop_its_connections(pg) >= 1
    monkeypatch.setattr(engine_module, "_PING_AFTER_IDLE_SECONDS", 0.0)  # every pooled one is idle
    assert pg.get("TrainingJob", "before", "default")["metadata"]["name"] == "before"
    pg.create(job("after"))


def test_a_connection_used_a_moment_ago_is_not_pinged(pg: Store, monkeypatch: pytest.MonkeyPatch):
    pings: list[object] = []
    dialect = pg.engine.dialect  # type: ignore[attr-defined]
    monkeypatch.setattr(dialect, "do_ping", lambda dbapi: pings.append(dbapi) or True)
    monkeypatch.setattr(engine_module, "_PING_AFTER_IDLE_SECONDS", 3600.0)
    for i in range(5):
        pg.create(job(f"busy-{i}"))
        with pg.engine.connect() as conn:  # type: ignore[attr-defined]
            conn.execute(text("SELECT 1"))
    assert pings == []
    monkeypatch.setattr(engine_module, "_PING_AFTER_IDLE_SECONDS", 0.0)
    pg.get("TrainingJob", "busy-0", "default")
    assert len(pings) == 1
