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
    old["involvedObject"]["uid"] = "uid-of-an-earlier-worker-0"
    old["related"] = {"kind": "TrainingJob", "name": "train", "uid": train["metadata"]["uid"]}
    s.create(old)
    # What a job of the same name, deleted before `train` was applied, left behind.
    earlier = {
        "kind": "TrainingJob",
        "name": "train",
        "namespace": "default",
        "uid": "uid-of-a-deleted-train",
    }
    stale_job = c.event({**train, "metadata": {"name": "train", "namespace": "default"}}, "Failed", "old run")
    stale_job["involvedObject"]["uid"] = earlier["uid"]
    s.create(stale_job)
    stale_pod = c.event(gone, "OOMKilled", "old run's worker", type_="Warning", at="2024-12-31T00:00:00Z")
    stale_pod["metadata"]["name"] = "train-worker-0.stale"
    stale_pod["involvedObject"]["uid"] = "uid-of-the-deleted-train's-worker-0"
    stale_pod["related"] = earlier
    s.create(stale_pod)
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
    assert [e["reason"] for e in data["events"]] == ["Queued", "Running", "Preempted", "Failed", "OOMKilled"]


def test_jobs_rows_carry_state_reason_and_size(api: TestClient, busy: Store):
    rows = {r["name"]: r for r in api.get("/ui/api/jobs").json()["jobs"]}
    assert (
        rows["wait"]
        | {"state": "Queued", "reason": "QuotaExhausted", "queue": "team", "replicas": 4, "gpus": "4"}
        == rows["wait"]
    )
    assert rows["train"]["state"] == "Running" and rows["train"]["gpus"] == "2"


def test_the_jobs_rows_come_filtered_and_a_page_at_a_time(api: TestClient, sqlite_store: Store):
    states = ("Running", "Failed", "Succeeded")
    for i in range(25):
        obj = job(f"job-{i:02d}", 1, states[i % 3], "", "", f"00:{i:02d}")
        obj["metadata"]["namespace"] = "lab" if i < 5 else "default"
        obj["spec"]["queueName"] = "batch" if i % 2 else "team"
        sqlite_store.create(obj)
    # creationTimestamp is the store's clock: the jobs were created in name order.
    everything = api.get("/ui/api/jobs").json()
    assert everything["total"] == everything["matched"] == 25 and len(everything["jobs"]) == 25
    newest_first = [r["name"] for r in everything["jobs"]]
    assert newest_first == [f"job-{i:02d}" for i in reversed(range(25))]
    assert everything["queues"] == ["batch", "team"]

    first = api.get("/ui/api/jobs", params={"limit": 10}).json()
    last = api.get("/ui/api/jobs", params={"limit": 10, "offset": 20}).json()
    assert [r["name"] for r in first["jobs"]] == newest_first[:10]
    assert [r["name"] for r in last["jobs"]] == newest_first[20:]
    assert (last["total"], last["matched"], last["offset"]) == (25, 25, 20)

    failed = api.get("/ui/api/jobs", params={"state": "Failed", "queue": "batch"}).json()
    assert [r["name"] for r in failed["jobs"]] == ["job-19", "job-13", "job-07", "job-01"]
    assert (failed["total"], failed["matched"]) == (25, 4)
    assert failed["queues"] == ["batch", "team"]  # the filter's choices stay every queue
    lab = api.get("/ui/api/jobs", params={"q": "LAB", "limit": 2}).json()
    assert [r["name"] for r in lab["jobs"]] == ["job-04", "job-03"] and lab["matched"] == 5
    assert api.get("/ui/api/jobs", params={"q": "nothing"}).json()["jobs"] == []
    refused = api.get("/ui/api/jobs", params={"limit": 0})
    assert refused.status_code == 400 and "limit" in refused.text


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
    # The event of an earlier pod of the same job is the job's too (pods come and go, names
    # stay); those of a deleted job of the same name, and of its pods, are not.
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
