"""The insight views under /api/v1: why, GPUs, queue and node usage."""

from __future__ import annotations

from fastapi.testclient import TestClient

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.nodes.gpumonitor import GpuReading
from muster.server import create_app
from muster.server.views import use_manager
from muster.store import Store
from muster.testing import cluster as c
from muster.testing.fake_runtime import FakeRuntime
from tests.server.conftest import AUTH, TOKEN


def put(store: Store, obj: dict) -> dict:
    created = store.create(obj)
    if obj.get("status"):
        created["status"] = obj["status"]
        created = store.update_status(created)
    return created


def test_queue_and_node_usage(api: TestClient, sqlite_store: Store):
    put(sqlite_store, c.gpu_node("n1", gpus=4))
    put(sqlite_store, c.cluster_queue("team-a", {"default": {"nvidia.com/gpu": "8"}}))
    wl = c.admitted(c.workload("held", pods=2), "team-a", "n1", [[0], [1]])
    put(sqlite_store, wl)
    put(sqlite_store, c.pod("held-worker-0", job="held", node="n1", gpus=[0]))
    queues = api.get("/api/v1/queues/usage").json()["clusterQueues"]
    assert queues[0]["name"] == "team-a"
    assert queues[0]["admitted"] == 1
    assert queues[0]["quota"][0] == {
        "flavor": "default",
        "resource": "nvidia.com/gpu",
        "used": "2",
        "nominal": "8",
        "borrowed": "0",
        "borrowingLimit": None,
        "lendingLimit": None,
    }
    nodes = api.get("/api/v1/nodes/usage").json()["nodes"]
    assert nodes[0]["name"] == "n1"
    assert nodes[0]["resources"]["nvidia.com/gpu"] == {"used": "1", "total": "4", "percent": 25}


def test_why_answers_for_a_job_and_404s_for_a_missing_one(api: TestClient, sqlite_store: Store):
    put(sqlite_store, c.ddp_job("ghost", conditions=[c.condition("Created")]))
    answer = api.get("/api/v1/why/tj/default/ghost")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "TrainingJob" and body["reason"] == "NoWorkload"
    missing = api.get("/api/v1/why/trainingjob/default/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["reason"] == "NotFound"
    assert api.get("/api/v1/why/node/default/x").status_code == 400


def test_gpus_without_a_control_plane_have_no_readings(api: TestClient, sqlite_store: Store):
    put(sqlite_store, c.gpu_node("n1", gpus=2, unhealthy=[1]))
    put(sqlite_store, c.pod("j-worker-0", job="j", node="n1", gpus=[0]))
    body = api.get("/api/v1/gpus").json()
    assert body["sampleSeconds"] is None
    first, second = body["gpus"]
    assert (first["node"], first["index"], first["allocatedMilli"]) == ("n1", 0, 1000)
    assert first["holders"][0]["job"] == "j" and first["latest"] is None
    assert second["health"] == "Unhealthy" and second["holders"] == []


def test_gpus_carry_the_managers_readings(sqlite_store: Store, tmp_path):
    runtime = FakeRuntime(nodes={"n1": 2})
    manager = Manager(sqlite_store, ManagerConfig(home=tmp_path, gpu_sample_seconds=5), runtime=runtime)
    manager.open()
    runtime.gpu("n1", 1).utilization_pct = 75.0
    manager.gpus.sample(1000.0)
    manager.gpus.record([("GPU-n1-1", GpuReading(1005.0, 1, 0.5, 1 << 30, 16 << 30, 50.0, 100.0))])
    app = create_app(sqlite_store, [TOKEN])
    with TestClient(app, headers=AUTH) as api:
        use_manager(app, manager)
        body = api.get("/api/v1/gpus?historySeconds=100000000000").json()
        brief = api.get("/api/v1/gpus?history=false").json()
    manager.stop()
    assert body["sampleSeconds"] == 5
    gpu1 = body["gpus"][1]
    assert gpu1["uuid"] == "GPU-n1-1"
    assert [r["utilization"] for r in gpu1["history"]] == [0.75, 0.5]
    assert gpu1["latest"]["temperatureCelsius"] == 50.0
    assert "history" not in brief["gpus"][0]
