"""GET /api/v1/doctor on a prepared cluster driven through the controllers: an idle allocated
GPU, a gang stuck behind fragmentation and an OOM loop are found, each with evidence and a
fix; a healthy cluster has no finding; on a running manager it reads its cache and its Event
index, and finds the same."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from muster.api.conditions import iso
from muster.cli.doctor import markdown
from muster.controllers.capacity.ledger import RECENT_POOL_SECONDS
from muster.controllers.insight.checks import IDLE_COST_WINDOW
from muster.controllers.insight.doctor import Thresholds, diagnose
from muster.controllers.nodes.gpumonitor import GpuReading
from muster.runtime.base import GpuFault, PodReason
from muster.server import create_app
from muster.server.routes.insight import doctor_inputs
from muster.server.views import CacheSource, StoreSource, use_manager
from muster.store import Store
from tests.controllers.conftest import Harness, job
from tests.server.conftest import AUTH, TOKEN

NODES = {"n1": 4, "n2": 4, "n3": 4}


@pytest.fixture
def harness(sqlite_store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(sqlite_store, tmp_path / "home", nodes=NODES)
    h.clock.now = time.time()  # objects carry the store's real time: waits add up
    yield h
    h.close()


def doctor(h: Harness, **params) -> dict:
    app = create_app(h.store, [TOKEN])
    with TestClient(app, headers=AUTH) as api:
        use_manager(app, h.manager)
        answer = api.get("/api/v1/doctor", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def started(h: Harness, pod: str) -> bool:
    return any(f.launch.ref.name == pod and f.phase.value == "Pending" for f in h.rt.pods_by_uid.values())


def run(h: Harness, name: str, **kwargs) -> None:
    h.apply(job(name, workers=1, **kwargs))
    h.settle(lambda: started(h, f"{name}-worker-0"))
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", name, "Running"))


def readings(h: Harness, busy: dict[str, float], minutes: float = 11) -> None:
    """A reading every 30 s for the last ``minutes`` of every GPU (utilisation by UUID, else 0.9)."""
    now = h.clock()
    series = []
    for node, count in NODES.items():
        for i in range(count):
            uuid = f"GPU-{node}-{i}"
            util = busy.get(uuid, 0.9)
            t = now - minutes * 60
            while t <= now:
                series.append((uuid, GpuReading(t, i, util, 1 << 30, 16 << 30, 50.0, 200.0)))
                t += 30
    h.manager.gpus.interval = 30
    h.manager.gpus.record(series)


def gpus_of(h: Harness, name: str) -> list[str]:
    pod = h.pods()[f"{name}-worker-0"]
    return [f"GPU-{pod['spec']['nodeName']}-{g}" for g in pod["spec"]["gpus"]]


def oom_twice(h: Harness) -> None:
    """A job without GPUs that runs out of memory twice (each time a new incarnation of its pod)."""
    run(h, "oom", gpus=0, run_policy={"backoffLimit": 10})
    for attempt in (1, 2):
        h.rt.exit("default/oom-worker-0", 137, reason=PodReason.OOM_KILLED)
        h.settle(
            lambda a=attempt: h.job("oom")["status"].get("restartCount") == a and started(h, "oom-worker-0")
        )
        h.rt.run_all()
        h.settle()


def test_finds_an_idle_gpu_a_stuck_gang_and_an_oom_loop(harness: Harness):
    h = harness
    for name, gpus in (("a", 3), ("b", 3), ("idle", 2)):
        run(h, name, gpus=gpus)
    oom_twice(h)
    # A 4-GPU pod finds 4 free GPUs, but in blocks of 1, 1 and 2.
    h.apply(job("gang", workers=1, gpus=4))
    h.settle(lambda: (h.get("Workload", "gang") or {}).get("status", {}).get("pending"))
    h.clock.advance(31 * 60)
    idle = gpus_of(h, "idle")
    readings(h, {uuid: 0.01 for uuid in idle})

    answer = doctor(h)
    codes = [(f["severity"], f["code"]) for f in answer["findings"]]
    assert codes == [
        ("warning", "OOMLoop"),
        ("warning", "IdleGPU"),
        ("warning", "PendingTooLong"),
        ("warning", "FragmentationBlocksGang"),
    ]
    oom, idle_gpu, pending, fragmented = answer["findings"]
    assert oom["objects"] == ["trainingjob/default/oom"]
    assert "oom-worker-0 OOMKilled 2 time(s)" in oom["evidence"]
    assert "limits.memory" in oom["fix"]
    assert idle_gpu["objects"] == ["trainingjob/default/idle"]
    assert idle_gpu["title"] == "trainingjob default/idle holds 2 GPU(s) idle for 10 min"
    assert all("mean 1.0%, max 1.0% over the last 10 min (21 readings)" in e for e in idle_gpu["evidence"])
    assert "muster suspend job/idle" in idle_gpu["fix"]
    assert pending["objects"] == ["trainingjob/default/gang"]
    assert pending["title"] == (
        "1 workload(s) of ClusterQueue default waited over 30 min for admission (the longest 31 min)"
    )
    assert pending["evidence"][0].startswith(
        "trainingjob/default/gang: waiting 31 min; InsufficientResources: "
    )
    assert pending["fix"].startswith("muster why trainingjob/gang -n default")
    assert fragmented["objects"] == ["trainingjob/default/gang"]
    assert fragmented["evidence"] == [
        "4 free GPUs spread over 3 nodes; the largest free block is 2",
        "trainingjob/default/gang needs 1 pod(s) of 4 GPUs",
    ]
    assert answer["counts"] == {"critical": 0, "warning": 4, "info": 0}
    assert answer["gpuSamples"] is True

    # Thresholds are the caller's: a higher idle bar makes every GPU idle, a longer wait none.
    relaxed = doctor(h, idleThreshold=95, pendingMinutes=60)
    assert "PendingTooLong" not in [f["code"] for f in relaxed["findings"]]
    assert len([f for f in relaxed["findings"] if f["code"] == "IdleGPU"]) == 3
    text = markdown(answer)
    assert text.startswith("# muster doctor\n")
    assert "## WARNING OOMLoop: trainingjob default/oom keeps running out of memory (2 OOM kills)" in text


def test_broken_nodes_are_critical(harness: Harness):
    h = harness
    future = h.manager.request_fault("n2", GpuFault(gpu=3, lost=True))
    h.settle(future.done)
    h.rt.lose_node("n3")
    h.clock.advance(60)
    h.settle()
    node = h.get("Node", "n1", None)
    node["spec"]["unschedulable"] = True
    h.store.update(node)
    answer = doctor(h)
    codes = [(f["severity"], f["code"], f["objects"]) for f in answer["findings"]]
    assert codes == [
        ("critical", "NodeNotReady", ["node/n3"]),
        ("critical", "GPUUnhealthy", ["node/n2"]),
        ("info", "NodeCordoned", ["node/n1"]),
    ]
    lost_gpu = answer["findings"][1]
    assert lost_gpu["evidence"][0].startswith("GPU 3 (GPU-n2-3): GPU is lost")
    assert "the taint nvidia.com/gpu=unhealthy:NoSchedule keeps new pods off the node" in lost_gpu["evidence"]


def test_a_healthy_cluster_has_no_finding(harness: Harness):
    h = harness
    for name, gpus in (("a", 4), ("b", 2)):
        run(h, name, gpus=gpus)
    h.clock.advance(40 * 60)
    readings(h, {})
    answer = doctor(h)
    assert answer["findings"] == []
    assert answer["counts"] == {"critical": 0, "warning": 0, "info": 0}


def test_failed_and_never_fitting_jobs_are_findings(harness: Harness):
    """Right after a job failed, and with a job that no node can ever hold, the doctor does not
    say "No problems found." (issue 14, 2)."""
    h = harness
    run(h, "bad", gpus=1, run_policy={"backoffLimit": 0}, restart_policy="Never")
    h.rt.exit("default/bad-worker-0", 3)
    h.settle(lambda: h.has("TrainingJob", "bad", "Failed"))
    h.apply(job("huge", workers=1, gpus=5))  # within quota, but no node has more than 4 GPUs
    h.settle(lambda: (h.get("Workload", "huge") or {}).get("status", {}).get("pending"))
    answer = doctor(h)
    codes = [(f["severity"], f["code"], f["objects"]) for f in answer["findings"]]
    assert codes == [
        ("warning", "JobFailed", ["trainingjob/default/bad"]),
        ("warning", "NeverFits", ["trainingjob/default/huge"]),
    ]
    failed, never = answer["findings"]
    assert failed["title"] == "trainingjob default/bad failed: ReplicaFailed"
    assert failed["evidence"][0].startswith(
        "trainingjob/default/bad: ReplicaFailed (worker-0: Error, exit code 3)"
    )
    assert failed["fix"].startswith("muster why job/bad -n default shows the replica that failed first")
    assert never["title"] == (
        "1 workload(s) can never be admitted as the cluster is: no node can host a pod: "
        "n1: 4 usable GPU(s), a pod needs 5; n2: 4 usable GPU(s), a pod needs 5; "
        "n3: 4 usable GPU(s), a pod needs 5"
    )
    assert never["evidence"][0].startswith("trainingjob/default/huge: InsufficientResources: ")
    assert never["fix"].startswith("it can never fit as the cluster is: ask for less per pod")


def test_no_gpus_at_all_is_critical(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", gpus=0)
    try:
        h.apply(job("train", workers=1, gpus=1))
        h.settle(lambda: (h.get("Workload", "train") or {}).get("status", {}).get("pending"))
        answer = doctor(h)
        (finding,) = answer["findings"]
        assert (finding["severity"], finding["code"]) == ("critical", "NoGPUs")
        assert finding["title"] == "no node has GPUs: 1 workload(s) that ask for GPUs can never run"
        assert finding["evidence"][0].startswith("root cause: no node has GPUs (node ")
        assert "trainingjob/default/train" in finding["objects"]
        assert finding["fix"].endswith("muster up --fake-gpus 4")
    finally:
        h.close()


def test_waits_are_reported_by_their_root_cause(harness: Harness):
    """A job that would run now on the cordoned node, and one the failed GPU's lost quota keeps
    out for good: each is named by the fact behind it, with the fix that fact needs."""
    h = harness
    for name in ("a", "b"):
        run(h, name, gpus=4)
    placed = {n for name in ("a", "b") for n in [h.pods()[f"{name}-worker-0"]["spec"]["nodeName"]]}
    (free,) = set(NODES) - placed
    node = h.get("Node", free, None)
    node["spec"]["unschedulable"] = True
    h.store.update(node)
    h.apply(job("next", workers=1, gpus=4))
    h.settle(lambda: (h.get("Workload", "next") or {}).get("status", {}).get("pending"))
    answer = doctor(h)
    codes = [(f["severity"], f["code"], f["objects"]) for f in answer["findings"]]
    assert codes == [
        ("warning", "AvoidableWait", [f"node/{free}", "trainingjob/default/next"]),
        ("info", "NodeCordoned", [f"node/{free}"]),
    ]
    avoidable = answer["findings"][0]
    assert avoidable["title"] == (
        f"node {free} is cordoned (spec.unschedulable): its 4 GPU(s) take no new pods: "
        "it keeps 1 workload(s) waiting that would run now"
    )
    assert avoidable["fix"] == f"muster node uncordon {free} once it is fit to take pods"


def test_on_a_running_manager_the_doctor_reads_its_cache_and_event_index_and_finds_the_same(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
):
    h = harness
    oom_twice(h)
    run(h, "bad", gpus=1, run_policy={"backoffLimit": 0}, restart_policy="Never")
    h.rt.exit("default/bad-worker-0", 3)
    h.settle(lambda: h.has("TrainingJob", "bad", "Failed"))
    run(h, "done", gpus=1)
    h.rt.exit("default/done-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", "done", "Succeeded"))
    listed: list[str] = []
    store_list = h.store.list
    monkeypatch.setattr(
        h.store, "list", lambda kind, *a, **kw: listed.append(kind) or store_list(kind, *a, **kw)
    )

    now = h.clock()
    live = doctor_inputs(CacheSource(h.store, h.manager), now, {}, None)
    assert listed == []  # not one stored object listed: the cache, the Event index, the ledger
    listed.clear()
    every = doctor_inputs(StoreSource(h.store), now, {}, None)
    assert "Event" in listed and "TrainingJob" in listed

    assert diagnose(live) == diagnose(every)
    assert [f.code for f in diagnose(live)] == ["JobFailed", "OOMLoop"]
    # Of the Events, only those about the pods of jobs not finished, every incarnation of each.
    assert {e["involvedObject"]["name"] for e in live.events} == {"oom-worker-0"}
    assert len({e["involvedObject"]["uid"] for e in live.events}) == 3
    oom = lambda events: sorted(e["metadata"]["name"] for e in events if e["reason"] == "OOMKilled")  # noqa: E731
    assert oom(live.events) == oom(every.events) and len(oom(live.events)) == 2
    assert sorted(w["metadata"]["name"] for w in live.workloads) == ["oom"]  # in play only


def test_the_idle_pool_check_reads_the_pool_records_the_cost_ledger_keeps(
    sqlite_store: Store, tmp_path: Path
):
    now = time.time()
    hour = 3600.0

    def record(name: str, kind: str, start: float, end: float | None, pool: str = "a100", **spec) -> dict:
        times = {"start": iso(start), **({"end": iso(end)} if end is not None else {})}
        body = {"type": kind, "name": name, "uid": f"uid-{name}", "node": "gone", "nodePool": pool}
        body |= {"pricePerHour": 30.0, "nodeGpus": 8, "gpus": 8.0} | times | spec
        return {
            "apiVersion": "muster.dev/v1",
            "kind": "UsageRecord",
            "metadata": {"name": name},
            "spec": body,
        }

    sqlite_store.apply(
        [
            record("node-open", "Node", now - 2 * hour, None),  # its node is gone: closed at the first pass
            record("pod-recent", "Pod", now - 2 * hour, now - hour / 2),
            record("node-old", "Node", now - 5 * hour, now - 2 * hour),  # ended before the window
            record("pod-no-pool", "Pod", now - hour, now - 600, pool=""),
        ]
    )
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        h.clock.now = now
        h.settle()
        assert IDLE_COST_WINDOW == RECENT_POOL_SECONDS  # else the doctor reads the store for them
        live = doctor_inputs(CacheSource(h.store, h.manager), now, {}, None)
        every = doctor_inputs(StoreSource(h.store), now, {}, None)
        assert sorted(r["metadata"]["name"] for r in live.usage_records) == ["node-open", "pod-recent"]
        assert len(every.usage_records) == 4
        thresholds = Thresholds(idle_pool_cost=1.0)
        found = diagnose(live, thresholds)
        assert found == diagnose(every, thresholds)
        assert [f.title for f in found] == [
            "NodePool a100 paid 15.00 per hour for idle capacity over the last hour"
        ]
        # Further back than the ledger keeps: from the store.
        assert h.manager.capacity.ledger.pool_records(now - 2 * hour) is None
        assert len(CacheSource(h.store, h.manager).pool_usage_records(now - 2 * hour)) == 4
    finally:
        h.close()
