"""The dashboard's JSON views over a cluster in motion (objects as the controllers write them)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from muster.store import Store
from muster.testing import cluster as c


def job(name: str, workers: int, state: str, reason: str, message: str, at: str) -> dict:
    """A job of queue ``team`` whose latest condition is ``state`` since 2025-01-01T``at``."""
    cond = c.condition(state, reason=reason, message=message, at=f"2025-01-01T{at}:00Z")
    obj = c.ddp_job(name, workers=workers, conditions=[c.condition("Created"), cond])
    obj["spec"]["queueName"] = "team"
    return obj


@pytest.fixture
def busy(sqlite_store: Store) -> Store:
    """One node with 4 GPUs: job `train` (master + 1 worker) on GPUs 0 and 1, a 250m share of
    GPU 2 held by a workflow task, job `wait` pending for quota; a few events."""
    s = sqlite_store
    s.create(c.gpu_node("node-a", gpus=4, unhealthy=[3]))
    s.create(c.cluster_queue("team", {"default": {"nvidia.com/gpu": "3"}}, cohort="org"))
    s.create(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": "default"},
            "spec": {"clusterQueue": "team"},
        }
    )
    train = s.create(job("train", 1, "Running", "Running", "all 2 pod(s) of the gang are running", "00:01"))
    s.create(c.admitted(c.workload("train", queue="team", owner="train"), "team", "node-a", [[0], [1]]))
    s.create(c.pod("train-master-0", job="train", replica=("Master", 0), gpus=[0]))
    s.create(c.pod("train-worker-0", job="train", replica=("Worker", 0), gpus=[1]))
    share = c.pod("etl-prep-1a2b3c4d", gpus=[2], gpu_milli=250)
    share["metadata"]["labels"] = {"muster.dev/workflow": "etl", "muster.dev/workflow-task": "prep"}
    s.create(share)
    wait = s.create(
        job("wait", 3, "Queued", "QuotaExhausted", "cluster queue team has too little quota", "00:02")
    )
    s.create(
        c.workload(
            "wait",
            queue="team",
            pods=4,
            owner="wait",
            pending=("QuotaExhausted", "cluster queue team has too little quota", {}),
        )
    )
    s.create(c.event(train, "Running", "all 2 pod(s) of the gang are running", at="2025-01-01T00:01:00Z"))
    s.create(c.event(wait, "Queued", "waiting in queue team", at="2025-01-01T00:02:00Z"))
    gone = {"kind": "Pod", "metadata": {"name": "train-worker-0", "namespace": "default"}}
    old = c.event(gone, "Preempted", "stopped for default/urgent", type_="Warning", at="2025-01-01T00:00:30Z")
    old["metadata"]["name"] = "train-worker-0.old"
    s.create(old)
    return s


def test_overview_colours_gpus_by_owner_and_counts_jobs(api: TestClient, busy: Store):
    data = api.get("/ui/api/overview").json()
    assert data["revision"] == busy.revision()
    gpus = {g["index"]: g for g in data["gpus"]}
    assert [(h["pod"], h["job"], h["workflow"]) for h in gpus[0]["holders"]] == [
        ("train-master-0", "train", None)
    ]
    assert gpus[2]["holders"][0] | {"job": None, "workflow": "etl", "milli": 250} == gpus[2]["holders"][0]
    assert gpus[2]["allocatedMilli"] == 250 and "history" not in gpus[2]
    assert gpus[3]["health"] == "Unhealthy" and gpus[3]["holders"] == []
    (team,) = data["queues"]
    assert (team["name"], team["cohort"], team["admitted"], team["pending"]) == ("team", "org", 1, 1)
    assert team["quota"][0] | {"used": "2", "nominal": "3"} == team["quota"][0]
    assert data["jobStates"] == {"Running": 1, "Queued": 1}
    assert data["nodes"] == {"total": 1, "ready": 1}
    assert [e["reason"] for e in data["events"]] == ["Queued", "Running", "Preempted"]  # newest first


def test_jobs_rows_carry_state_reason_and_size(api: TestClient, busy: Store):
    rows = {r["name"]: r for r in api.get("/ui/api/jobs").json()["jobs"]}
    assert (
        rows["wait"]
        | {"state": "Queued", "reason": "QuotaExhausted", "queue": "team", "replicas": 4, "gpus": "4"}
        == rows["wait"]
    )
    assert rows["train"]["state"] == "Running" and rows["train"]["gpus"] == "2"


def test_a_job_comes_with_why_replicas_and_every_event_about_it(api: TestClient, busy: Store):
    data = api.get("/ui/api/jobs/default/wait").json()
    assert data["why"]["state"] == "Queued" and data["why"]["reason"] == "QuotaExhausted"
    assert [r["replica"] for r in data["replicas"]] == ["master-0", "worker-0", "worker-1", "worker-2"]
    assert not any(r["exists"] for r in data["replicas"])
    assert [e["reason"] for e in data["events"]] == ["Queued"]

    train = api.get("/ui/api/jobs/default/train").json()
    replicas = {r["replica"]: r for r in train["replicas"]}
    assert (
        replicas["worker-0"] | {"exists": True, "phase": "Running", "node": "node-a", "gpus": [1]}
        == replicas["worker-0"]
    )
    # The event of an earlier pod of the same name is the job's too (pods come and go, names stay).
    assert [e["reason"] for e in train["events"]] == ["Running", "Preempted"]
    assert "master-0 on node-a GPU 0" in train["why"]["summary"]


def test_a_missing_job_is_404(api: TestClient, busy: Store):
    resp = api.get("/ui/api/jobs/default/nope")
    assert resp.status_code == 404 and resp.json()["error"]["reason"] == "NotFound"


def test_queues_view_adds_policies_and_local_queues(api: TestClient, busy: Store):
    queues = api.get("/ui/api/queues").json()
    (team,) = queues["clusterQueues"]
    assert team["strategy"] == "BestEffortFIFO" and team["preemption"] == {
        "withinClusterQueue": "LowerPriority"
    }
    assert team["quota"] == api.get("/api/v1/queues/usage").json()["clusterQueues"][0]["quota"]
    assert queues["localQueues"] == [
        {"namespace": "default", "name": "team", "clusterQueue": "team", "stopPolicy": None}
    ]


def test_the_serving_view_lists_services_with_traffic_revisions_and_replicas(
    api: TestClient, sqlite_store: Store
):
    sqlite_store.create(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "InferenceService",
            "metadata": {"name": "llm", "namespace": "default"},
            "spec": {"predictor": {"containers": [{"name": "s", "command": ["serve"]}]}, "minReplicas": 0},
        }
    )
    isvc = sqlite_store.get("InferenceService", "llm", "default")
    isvc["status"] = {
        "url": "http://127.0.0.1:7071",
        "modelNames": ["llm"],
        "readyReplicas": 1,
        "desiredReplicas": 2,
        "conditions": [c.condition("Ready", reason="ReplicasReady")],
        "traffic": [{"revisionName": "llm-00001", "percent": 100, "tag": "latest", "latestRevision": True}],
        "revisions": [
            {
                "name": "llm-00001",
                "number": 1,
                "hash": "h",
                "predictor": {},
                "desiredReplicas": 2,
                "readyReplicas": 1,
                "autoscaler": {"desired": 2, "panicking": True, "reason": "panic: 9.0 in flight"},
            }
        ],
        "replicas": [
            {"name": "llm-00001-0", "revision": "llm-00001", "state": "Ready", "node": "n", "gpus": [0]}
        ],
    }
    sqlite_store.update_status(isvc)
    view = api.get("/ui/api/serving").json()
    assert view["gateway"] is False  # no gateway in this process: no request series
    (svc,) = view["services"]
    assert (svc["name"], svc["ready"], svc["readyReplicas"], svc["desiredReplicas"]) == ("llm", True, 1, 2)
    assert svc["revisions"][0]["autoscaler"]["panicking"] is True
    assert svc["replicas"][0]["gpus"] == [0] and svc["series"] == []
