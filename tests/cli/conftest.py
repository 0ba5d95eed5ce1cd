from __future__ import annotations

from collections.abc import Iterator

import pytest

from muster.server.hooks import server_hooks
from muster.store import Store
from muster.testing.server import RunningServer, serve


@pytest.fixture
def server(home_store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningServer]:
    """The API with its start-up hooks on the test's MUSTER_HOME; the CLI finds it through the
    environment."""
    with serve(home_store, hooks=server_hooks()) as running:
        monkeypatch.setenv("MUSTER_SERVER", running.url)
        monkeypatch.setenv("MUSTER_TOKEN", running.token)
        yield running
