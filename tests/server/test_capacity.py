"""GET /api/v1/cost and POST .../nodes/{name}/interruption: shapes, validation, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from muster.api import registry
from muster.cli.common import BadInput
from muster.cli.cost import parse_window
from muster.controllers.manager import Manager, ManagerConfig
from muster.server import create_app
from muster.server.views import use_manager
from muster.store import Store
from muster.testing import wait_for
from muster.testing.fake_runtime import WatchingFakeRuntime
from tests.server.conftest import AUTH, TOKEN

NOTICE = "/apis/muster.dev/v1/nodes/{}/interruption"
RECORD = {
    "apiVersion": "muster.dev/v1",
    "kind": "UsageRecord",
    "metadata": {"name": "pod-1"},
    "spec": {
        "type": "Pod",
        "namespace": "ml",
        "name": "train-worker-0",
        "node": "n1",
        "nodePool": "a100",
        "gpus": 4,
        "nodeGpus": 8,
        "pricePerHour": 20.0,
        "start": "2025-01-01T00:00:00Z",
        "end": "2025-01-01T02:00:00Z",
        "labels": {"team": "vision"},
    },
}


def test_cost_over_a_window(api: TestClient, sqlite_store: Store):
    sqlite_store.create(registry.validate(RECORD).obj)
    window = {"start": "2025-01-01T00:00:00Z", "end": "2025-01-01T02:00:00Z"}
    answer = api.get("/api/v1/cost", params={**window, "by": "label:team", "bucket": 3600})
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["rows"] == [
        {
            "key": "vision",
            "gpuHours": 8.0,
            "cost": 20.0,
            "idleShare": 0.0,
            "lostGpuHours": 0.0,
            "pods": 1,
            "jobs": 0,
        }
    ]
    assert len(doc["series"]) == 2 and doc["series"][0]["cost"] == {"vision": 10.0}
    bad = api.get("/api/v1/cost", params={**window, "by": "colour"})
    assert bad.status_code == 422 and "cannot group by 'colour'" in bad.json()["error"]["message"]
    late = api.get("/api/v1/cost", params={"start": "yesterday"})
    assert late.status_code == 422 and late.json()["error"]["errors"][0]["path"] == "start"


def test_a_notice_needs_the_control_plane_a_node_and_a_pool(
    sqlite_store: Store, tmp_path: Path, api: TestClient
):
    assert api.post(NOTICE.format("n1"), json={}).status_code == 409  # no manager in this server
    runtime = WatchingFakeRuntime(nodes={"n1": 2})
    manager = Manager(sqlite_store, ManagerConfig(home=tmp_path), runtime=runtime)
    manager.start()
    app = create_app(sqlite_store, [TOKEN])
    try:
        with TestClient(app, headers=AUTH) as client:
            use_manager(app, manager)
            wait_for(lambda: sqlite_store.list("Node").items, 10, what="the node to register")
            assert client.post(NOTICE.format("ghost"), json={}).status_code == 404
            refused = client.post(NOTICE.format("n1"), json={"inSeconds": 30})
            assert (
                refused.status_code == 409
                and "was not made by a NodePool" in refused.json()["error"]["message"]
            )
            both = client.post(NOTICE.format("n1"), json={"inSeconds": 30, "time": "2025-01-01T00:00:00Z"})
            assert both.status_code == 400 and "not both" in both.text
            assert client.post(NOTICE.format("n1"), json={"action": "explode"}).status_code == 400
    finally:
        manager.stop()


def test_the_cli_window():
    assert parse_window("2h", None, None, 10_000.0) == (2_800.0, 10_000.0)
    assert parse_window(None, "2025-01-01", "2025-01-02", 0.0) == (1735689600.0, 1735776000.0)
    with pytest.raises(BadInput, match="not a span"):
        parse_window("two days", None, None, 0.0)
    with pytest.raises(BadInput, match="not both"):
        parse_window("1d", "2025-01-01", None, 0.0)
    with pytest.raises(BadInput, match="end after it starts"):
        parse_window(None, "2025-01-02", "2025-01-01", 0.0)
