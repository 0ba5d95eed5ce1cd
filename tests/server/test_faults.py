"""POST .../nodes/{name}/fault-injection: testing only, fake GPUs only, clear errors."""

from __future__ import annotations

from fastapi.testclient import TestClient

from muster.controllers.manager import Manager, ManagerConfig
from muster.server import create_app
from muster.server.views import use_manager
from muster.store import Store
from muster.testing import cluster as c
from muster.testing.fake_runtime import FakeRuntime
from tests.server.conftest import AUTH, TOKEN

PATH = "/apis/muster.dev/v1/nodes/{}/fault-injection"


def test_refused_without_a_control_plane_or_a_node(api: TestClient, sqlite_store: Store):
    assert api.post(PATH.format("n1"), json={"gpu": 0, "xid": 79}).status_code == 404
    sqlite_store.create(c.gpu_node("n1"))
    answer = api.post(PATH.format("n1"), json={"gpu": 0, "xid": 79})
    assert answer.status_code == 409
    assert "needs the control plane" in answer.json()["error"]["message"]


def test_a_request_must_ask_for_something(api: TestClient, sqlite_store: Store):
    sqlite_store.create(c.gpu_node("n1"))
    answer = api.post(PATH.format("n1"), json={"gpu": 0})
    assert answer.status_code == 400
    assert "give a fault" in answer.text
    assert api.post(PATH.format("n1"), json={"gpu": 0, "utilization": 3}).status_code == 400
    assert api.post(PATH.format("n1"), json={"gpu": 0, "xid": 79, "bogus": 1}).status_code == 400


def test_applied_by_the_running_manager(sqlite_store: Store, tmp_path):
    runtime = FakeRuntime(nodes={"n1": 2})
    manager = Manager(sqlite_store, ManagerConfig(home=tmp_path), runtime=runtime)
    manager.start()
    app = create_app(sqlite_store, [TOKEN])
    try:
        with TestClient(app, headers=AUTH) as api:
            use_manager(app, manager)
            answer = api.post(PATH.format("n1"), json={"gpu": 1, "lost": True})
            assert answer.status_code == 200, answer.text
            assert answer.json()["gpu"]["health"] == "Unhealthy"
            # The node's status is written before the answer.
            node = sqlite_store.get("Node", "n1")
            assert node["status"]["gpus"][1]["health"] == "Unhealthy"
            wrong = api.post(PATH.format("n1"), json={"gpu": 5, "xid": 79})
            assert wrong.status_code == 422
            assert wrong.json()["error"]["errors"][0]["path"] == "gpu"
    finally:
        manager.stop()
