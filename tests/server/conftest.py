from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from muster.server import create_app
from muster.store import Store, open_store
from muster.testing.server import RunningServer, serve

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'muster.db'}", poll_interval=0.05)
    yield store
    store.close()


@pytest.fixture
def api(sqlite_store: Store) -> Iterator[TestClient]:
    """The app in-process, authenticated as the admin."""
    with TestClient(create_app(sqlite_store, [TOKEN]), headers=AUTH) as client:
        yield client


@pytest.fixture
def server(sqlite_store: Store) -> Iterator[RunningServer]:
    """The app behind a real uvicorn on a free port (for streaming and the SDK client)."""
    with serve(sqlite_store, TOKEN) as running:
        yield running
