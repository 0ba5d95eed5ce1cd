"""Routes added to the app later are authorized by default: by their path, or by what they
declare; the bootstrap token is the admin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import APIRouter, Request
from fastapi.testclient import TestClient
from starlette.responses import JSONResponse

from muster.server import create_app
from muster.server.access.guard import AUTHENTICATED, Requirement, access_of, requires
from muster.server.access.tokens import new_token, token_record
from muster.store import Store

ADMIN = {"Authorization": "Bearer admin-token"}


@pytest.fixture
def app_and_alice(sqlite_store: Store) -> Iterator[tuple[TestClient, dict[str, str]]]:
    token_id, token = new_token()
    sqlite_store.create(token_record(token_id, token, user="alice", groups=["team-a"]))
    app = create_app(sqlite_store, ["admin-token"])
    gateway = APIRouter()

    @gateway.post("/v1/chat/completions")
    def undeclared() -> JSONResponse:
        return JSONResponse({"ok": True})

    @gateway.get("/serving/{namespace}/{name}")
    @requires(Requirement("get", "trainingjobs", namespace_param="namespace", name_param="name"))
    def declared(namespace: str, name: str) -> JSONResponse:
        return JSONResponse({"ok": True})

    @gateway.get("/mine")
    @requires(AUTHENTICATED)
    def anyone(request: Request) -> JSONResponse:
        return JSONResponse({"user": access_of(request).user.name})

    app.include_router(gateway)  # added after the app was made, as a later feature would be
    with TestClient(app) as client:
        binding = {
            "apiVersion": "muster.dev/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "a", "namespace": "team-a"},
            "subjects": [{"kind": "Group", "name": "team-a"}],
            "roleRef": {"kind": "ClusterRole", "name": "view"},
        }
        assert (
            client.post(
                "/apis/muster.dev/v1/namespaces/team-a/rolebindings", json=binding, headers=ADMIN
            ).status_code
            == 201
        )
        yield client, {"Authorization": f"Bearer {token}"}


def test_a_route_added_later_is_closed_until_granted(app_and_alice: tuple[TestClient, dict[str, str]]):
    client, alice = app_and_alice
    refused = client.post("/v1/chat/completions", headers=alice)
    assert refused.status_code == 403
    assert refused.json()["error"]["details"]["missingRule"] == {
        "nonResourceURLs": ["/v1/chat/completions"],
        "verbs": ["post"],
    }
    assert client.post("/v1/chat/completions", headers=ADMIN).status_code == 200
    assert client.post("/v1/chat/completions").status_code == 401


def test_a_route_declares_the_resource_it_touches(app_and_alice: tuple[TestClient, dict[str, str]]):
    client, alice = app_and_alice
    assert client.get("/serving/team-a/x", headers=alice).status_code == 200
    denied = client.get("/serving/team-b/x", headers=alice)
    assert denied.status_code == 403 and denied.json()["error"]["details"]["namespace"] == "team-b"
    assert client.get("/mine", headers=alice).json() == {"user": "alice"}
    assert client.get("/mine").status_code == 401
