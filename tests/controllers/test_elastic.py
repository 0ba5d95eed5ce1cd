"""Elastic TrainingJobs through the manager (docs/trainingjob.md, "Elastic jobs"): grown back
toward maxReplicas when capacity returns (after the gang runs and its cool-down), shrunk in
place when a node of it is lost or drained or a GPU of it fails, each size a new run of the gang
from its checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api.labels import DRAIN_ANNOTATION
from muster.cli.why import render
from muster.controllers.insight.explain import Explanation, explain
from muster.controllers.insight.explain.gather import gather
from muster.controllers.scheduling.elastic import shrunk
from muster.runtime.base import GpuFault
from muster.server.views import StoreSource
from muster.store import Store
from tests.controllers.conftest import Harness, job

Obj = dict[str, Any]


def elastic(name: str, workers: int, low: int, cooldown: int | None = 30) -> Obj:
    policy: Obj = {"minReplicas": low, "maxReplicas": workers}
    if cooldown is not None:
        policy["growCooldownSeconds"] = cooldown
    return job(name, workers=workers, gpus=1, elasticPolicy=policy)


def admitted_workers(h: Harness, name: str) -> int:
    wl = h.get("Workload", name)
    (worker,) = [a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == "worker"]
    return int(worker["count"])


def held(h: Harness, name: str) -> str | None:
    return (
        (((h.get("Workload", name) or {}).get("status") or {}).get("elastic") or {})
        .get("held", {})
        .get("reason")
    )


def why(h: Harness, name: str) -> Explanation:
    obj = h.job(name)
    return explain(obj, gather(StoreSource(h.store), obj, now=h.clock()))


def live_workers(h: Harness, name: str) -> list[Obj]:
    return [
        p
        for n, p in sorted(h.pods().items())
        if n.startswith(f"{name}-worker-") and not p["metadata"].get("deletionTimestamp")
    ]


def test_a_job_admitted_small_grows_back_when_capacity_returns(harness: Harness):
    h = harness  # one node, 4 GPUs
    h.apply(job("blocker", workers=1, gpus=2))
    h.settle(lambda: len(h.rt.pods_by_uid) == 1)
    h.rt.run_all()
    h.apply(elastic("train", workers=4, low=1))
    h.settle(lambda: len(h.rt.pods_by_uid) == 3)
    assert admitted_workers(h, "train") == 2
    h.settle()
    assert held(h, "train") == "GangStarting"  # a gang still starting is never restarted
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    h.settle()
    # Nothing free yet: the blocker holds the rest of the default queue's quota (the node's GPUs).
    h.clock.advance(31)
    h.settle()
    assert held(h, "train") == "QuotaExhausted" and admitted_workers(h, "train") == 2
    ex = why(h, "train")
    assert ex.elastic is not None and (
        ex.elastic.workers,
        ex.elastic.min_replicas,
        ex.elastic.max_replicas,
    ) == (
        2,
        1,
        4,
    )
    assert ex.elastic.held_reason == "QuotaExhausted" and "quota of ClusterQueue" in ex.elastic.held_message
    assert "runs 2 of 4 workers (minReplicas 1, maxReplicas 4); not larger: 1 more pod(s)" in ex.summary
    before = h.get("Workload", "train")["status"]["admission"]["podSetAssignments"][0]["pods"]
    h.rt.exit("default/blocker-worker-0", 0)
    h.settle(lambda: admitted_workers(h, "train") == 4)
    wl = h.get("Workload", "train")
    grown = wl["status"]["admission"]["podSetAssignments"][0]
    assert grown["pods"][:2] == before and grown["resourceUsage"]["nvidia.com/gpu"] == "4"
    assert wl["status"]["elastic"]["resizes"] == 1 and "held" not in wl["status"]["elastic"]
    assert ("Resized", "resized worker 2 -> 4: capacity returned") in h.events(wl)
    # The gang restarts at the new size: the old pods are stopped (SIGTERM, the checkpoint
    # handshake), the new ones get the new world size.
    h.settle(lambda: len(live_workers(h, "train")) == 4)
    assert {k for k, _ in h.rt.stops} == {"default/train-worker-0", "default/train-worker-1"}
    envs = [h.rt.find(f"default/train-worker-{i}").env for i in range(4)]
    assert {e["PET_NNODES"] for e in envs} == {"4"} and {e["WORLD_SIZE"] for e in envs} == {"4"}
    assert h.has("TrainingJob", "train", "Restarting", "Resized")
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    status = h.job("train")["status"]
    assert status.get("restartCount", 0) == 0  # a resize is no failure
    (record,) = status["resizes"]
    assert (record["from"], record["to"], record["reason"]) == (2, 4, "CapacityReturned")
    assert ("Resized", "2 -> 4 workers: capacity returned") in h.events(h.job("train"))
    ex = why(h, "train")
    assert "runs at its full size: 4 workers" in ex.summary and ex.elastic.held_reason is None
    render(ex.to_dict())  # the CLI's text form takes it
    h.settle()
    assert held(h, "train") is None  # at its full size: nothing to explain


def running_beside_a_blocker(h: Harness, workers: int, cooldown: int) -> None:
    """A blocker holds 3 of the 4 GPUs; train runs its 1 worker in the GPU left."""
    h.apply(job("blocker", workers=1, gpus=3))
    h.settle(lambda: len(h.rt.pods_by_uid) == 1)
    h.rt.run_all()
    h.apply(elastic("train", workers=workers, low=1, cooldown=cooldown))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))


def test_growth_waits_for_its_cool_down(harness: Harness):
    h = harness
    running_beside_a_blocker(h, workers=3, cooldown=120)
    h.rt.exit("default/blocker-worker-0", 0)
    h.clock.advance(60)
    h.settle()
    assert admitted_workers(h, "train") == 1 and held(h, "train") == "CoolingDown"
    message = h.get("Workload", "train")["status"]["elastic"]["held"]["message"]
    assert "growCooldownSeconds (120s)" in message
    h.clock.advance(61)
    h.settle(lambda: admitted_workers(h, "train") == 3)


def test_growth_yields_to_a_waiting_job(harness: Harness):
    h = harness
    running_beside_a_blocker(h, workers=4, cooldown=0)
    h.apply(job("next", workers=1, gpus=3))
    h.rt.exit("default/blocker-worker-0", 0)
    h.settle(lambda: h.get("Workload", "next") is not None and h.has("TrainingJob", "next", "Queued"))
    h.settle()
    # next (3 GPUs) is admitted into what the blocker left; train does not take it first.
    assert h.get("Workload", "next")["status"].get("admission")
    assert admitted_workers(h, "train") == 1
    # A job that waits for more than is free keeps it from train too (same priority).
    h.apply(job("big", workers=1, gpus=4))
    h.rt.run_all()
    h.rt.exit("default/next-worker-0", 0)
    h.settle(lambda: held(h, "train") == "WaitingWorkloadsFirst")
    assert admitted_workers(h, "train") == 1
    assert "default/big" in h.get("Workload", "train")["status"]["elastic"]["held"]["message"]


@pytest.fixture
def two_nodes(sqlite_store: Store, tmp_path) -> Harness:
    h = Harness(sqlite_store, tmp_path / "home", nodes={"node-a": 2, "node-b": 2}, node_grace_seconds=40)
    yield h
    h.close()


def lose_a_node_under(h: Harness, doc: Obj) -> None:
    """``doc`` runs 2 workers on each node; then node-b stops answering past its grace."""
    h.apply(doc)
    h.settle(lambda: len(h.rt.pods_by_uid) == 4)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    h.rt.lose_node("node-b")
    h.clock.advance(50)


def test_a_lost_node_shrinks_the_job_in_place(two_nodes: Harness):
    h = two_nodes
    lose_a_node_under(h, elastic("train", workers=4, low=2))
    h.settle(lambda: admitted_workers(h, "train") == 2)
    wl = h.get("Workload", "train")
    assert not (wl["status"].get("requeueState") or {}).get("count")  # never requeued
    assert {p["node"] for p in wl["status"]["admission"]["podSetAssignments"][0]["pods"]} == {"node-a"}
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["nvidia.com/gpu"] == "2"
    h.settle(lambda: len(live_workers(h, "train")) == 2 and h.rt.find("default/train-worker-1").env)
    envs = [h.rt.find(f"default/train-worker-{i}").env for i in range(2)]
    assert {e["PET_NNODES"] for e in envs} == {"2"}
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    status = h.job("train")["status"]
    assert status.get("restartCount", 0) == 0 and not status.get("preemptions")
    assert (status["resizes"][-1]["from"], status["resizes"][-1]["to"]) == (4, 2)
    assert status["resizes"][-1]["reason"] == "NodeLost"
    reasons = [r for r, _ in h.events(h.job("train"))]
    assert "Resized" in reasons and "Queued" not in reasons[reasons.index("Running") :]


def test_a_lost_node_below_min_replicas_requeues_as_before(two_nodes: Harness):
    h = two_nodes
    lose_a_node_under(h, elastic("train", workers=4, low=3))
    h.settle(lambda: h.has("TrainingJob", "train", "Queued"))
    assert "NodeLost" in [r for r, _ in h.events(h.get("Workload", "train"))]
    assert not (h.get("Workload", "train")["status"].get("elastic") or {}).get("resizes")


def _start_on_both(h: Harness, doc: Obj) -> None:
    """``doc`` runs 2 workers on each node, its gang running."""
    h.apply(doc)
    h.settle(lambda: len(h.rt.pods_by_uid) == 4)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))


def _restarted_at(h: Harness, workers: int, reason: str) -> Obj:
    """The job restarted in place at ``workers`` (never requeued), the resize's reason given."""
    h.settle(lambda: admitted_workers(h, "train") == workers)
    wl = h.get("Workload", "train")
    assert not (wl["status"].get("requeueState") or {}).get("count")  # never requeued
    assert wl["status"]["elastic"]["lastResize"]["reason"] == reason
    h.settle(
        lambda: (
            len(live_workers(h, "train")) == workers and h.rt.find(f"default/train-worker-{workers - 1}").env
        )
    )
    assert {h.rt.find(f"default/train-worker-{i}").env["PET_NNODES"] for i in range(workers)} == {
        str(workers)
    }
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    status = h.job("train")["status"]
    assert (status["resizes"][-1]["from"], status["resizes"][-1]["to"]) == (4, workers)
    assert status["resizes"][-1]["reason"] == reason and status.get("restartCount", 0) == 0
    return wl


def test_a_drain_shrinks_the_job_in_place(two_nodes: Harness):
    h = two_nodes
    _start_on_both(h, elastic("train", workers=4, low=2))
    node = h.get("Node", "node-b", None)
    node["spec"]["unschedulable"] = True
    node["metadata"].setdefault("annotations", {})[DRAIN_ANNOTATION] = "2025-01-01T00:00:00Z"
    h.store.update(node)
    wl = _restarted_at(h, 2, "NodeDrained")
    assert {p["node"] for p in wl["status"]["admission"]["podSetAssignments"][0]["pods"]} == {"node-a"}
    assert "node node-b is being drained" in wl["status"]["elastic"]["lastResize"]["why"]


def test_a_failed_gpu_shrinks_the_job_in_place_without_the_pod_on_it(two_nodes: Harness):
    h = two_nodes
    _start_on_both(h, elastic("train", workers=4, low=2))
    future = h.manager.request_fault("node-b", GpuFault(gpu=1, xid=79))
    h.settle(future.done)
    future.result()
    wl = _restarted_at(h, 3, "GPUUnhealthy")
    pods = wl["status"]["admission"]["podSetAssignments"][0]["pods"]
    assert sorted((p["node"], tuple(p["gpus"])) for p in pods) == [
        ("node-a", (0,)),
        ("node-a", (1,)),
        ("node-b", (0,)),
    ]
    assert "GPU 1 of node node-b is unhealthy" in wl["status"]["elastic"]["lastResize"]["why"]


def _admitted_wl(min_count: int, pods: dict[str, list[str]]) -> Obj:
    """A Workload of an elastic job with a Master: ``pods`` maps pod set -> the node of each pod."""
    sets = [{"name": n, "count": len(nodes) if n == "master" else 4} for n, nodes in pods.items()]
    sets[-1]["minCount"] = min_count
    return {
        "spec": {"elastic": {"growCooldownSeconds": 0}, "podSets": sets},
        "status": {
            "admission": {
                "clusterQueue": "q",
                "podSetAssignments": [
                    {
                        "name": n,
                        "count": len(nodes),
                        "resourceUsage": {"cpu": f"{len(nodes)}"},
                        "pods": [{"node": x} for x in nodes],
                    }
                    for n, nodes in pods.items()
                ],
            }
        },
    }


def test_shrinking_keeps_min_count_and_the_master():
    wl = _admitted_wl(2, {"master": ["a"], "worker": ["a", "b", "b", "a"]})
    master, worker = shrunk(wl, {"b"})
    assert master["count"] == 1 and worker["count"] == 2
    assert [p["node"] for p in worker["pods"]] == ["a", "a"] and worker["resourceUsage"] == {"cpu": "2"}
    assert shrunk(wl, {"c"}) is None  # nothing of it was there
    assert shrunk(_admitted_wl(3, {"master": ["a"], "worker": ["a", "b", "b", "a"]}), {"b"}) is None
    assert shrunk(_admitted_wl(1, {"master": ["b"], "worker": ["a", "b", "b", "a"]}), {"b"}) is None
    plain = _admitted_wl(1, {"worker": ["a", "b"]})
    del plain["spec"]["elastic"]
    assert shrunk(plain, {"b"}) is None  # not elastic: evicted and requeued as any Workload
    gpus = _admitted_wl(2, {"worker": ["a", "a", "b", "b"]})
    for i, pod in enumerate(gpus["status"]["admission"]["podSetAssignments"][0]["pods"]):
        pod["gpus"] = [i % 2]
    (worker,) = shrunk(gpus, set(), [("b", 1)])
    assert [(p["node"], p["gpus"]) for p in worker["pods"]] == [("a", [0]), ("a", [1]), ("b", [0])]
