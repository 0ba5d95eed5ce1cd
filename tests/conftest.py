from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from muster.store import Store, open_store
from muster.testing import skip_or_fail
from muster.testing.postgres import PostgresServer, PostgresUnavailable, start_postgres


@pytest.fixture
def muster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private MUSTER_HOME for one test; the server URL and token are cleared."""
    home = tmp_path / "muster-home"
    home.mkdir()
    monkeypatch.setenv("MUSTER_HOME", str(home))
    monkeypatch.delenv("MUSTER_SERVER", raising=False)
    monkeypatch.delenv("MUSTER_TOKEN", raising=False)
    monkeypatch.delenv("MUSTER_STORE", raising=False)
    return home


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL server for the whole session (each test gets its own database)."""
    try:
        server = start_postgres()
    except PostgresUnavailable as exc:
        skip_or_fail(str(exc))
        raise  # unreachable: skip_or_fail raises
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store, once on SQLite and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'muster.db'}"
    return request.getfixturevalue("postgres_server").create_database()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on ``store_url``; watchers poll often so cross-process tests stay quick."""
    opened = open_store(store_url, poll_interval=0.05)
    try:
        yield opened
    finally:
        opened.close()
