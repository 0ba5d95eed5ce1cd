from __future__ import annotations

from collections.abc import Iterator

import pytest

from muster.sdk.client import Client
from muster.store import open_store
from muster.testing.server import RunningServer, serve
from muster.testing.tenancy import set_up_teams

ADMIN = "admin-token"


@pytest.fixture(scope="module")
def teams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, dict[str, Client]]]:
    """A server (one per test module: tests name what they make apart) with team-a (alice),
    team-b (bob) and a viewer (val); a client per user and one for the admin (``admin``)."""
    path = tmp_path_factory.mktemp("teams") / "muster.db"
    store = open_store(f"sqlite:///{path}?synchronous=normal", poll_interval=0.05)
    try:
        with serve(store, ADMIN) as running, running.client() as admin:
            tokens = set_up_teams(admin)
            clients = {user: running.client(token) for user, token in tokens.items()}
            clients["admin"] = admin
            try:
                yield running, clients
            finally:
                for user, c in clients.items():
                    if user != "admin":
                        c.close()
    finally:
        store.close()
