from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from muster.server import create_app
from muster.store import Store
from muster.testing.server import RunningServer, serve

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


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
