"""Writing scheduling decisions back to Workloads."""

from __future__ import annotations

import copy

from muster.api.conditions import condition
from muster.controllers.cache import Cache
from muster.controllers.context import Context
from muster.controllers.scheduling.apply import DecisionWriter, admission_dict
from muster.controllers.scheduling.snapshot import Built
from muster.scheduler import (
    Admission,
    AdmittedWorkload,
    Decisions,
    NodePlacement,
    Pending,
    PendingWorkload,
    PodSet,
    PodSetAdmission,
    Preemption,
    Snapshot,
)
from muster.store import Store
from muster.store.events import events_for
from tests.controllers.conftest import Clock


def stored_workload(store: Store, name: str, admitted: bool = False) -> dict:
    wl = store.create(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"podSets": [{"name": "worker", "count": 2, "requests": {"nvidia.com/gpu": "1"}}]},
        }
    )
    if admitted:
        wl["status"] = {"admission": {"clusterQueue": "default", "podSetAssignments": []}}
        wl = store.update_status(wl)
    return wl


def pending_wl(name: str) -> PendingWorkload:
    return PendingWorkload(name, "default", [PodSet("worker", 2, gpus=1)], priority=10)


def writer(store: Store, clock: Clock) -> tuple[DecisionWriter, Cache]:
    cache = Cache(store)
    ctx = Context(store=store, cache=cache, home=None, clock=clock)  # type: ignore[arg-type]
    return DecisionWriter(ctx, message_interval=10), cache


def test_admission_lists_one_placement_per_pod_in_order():
    a = Admission(
        workload=pending_wl("w"),
        cluster_queue="default",
        flavors={"nvidia.com/gpu": "default"},
        pod_sets=[
            PodSetAdmission(
                "worker",
                2,
                {"nvidia.com/gpu": "default"},
                [NodePlacement("n1", [(0,)]), NodePlacement("n2", [(3,)], gpu_milli=1000)],
            )
        ],
    )
    assert admission_dict(a) == {
        "clusterQueue": "default",
        "podSetAssignments": [
            {
                "name": "worker",
                "count": 2,
                "flavors": {"nvidia.com/gpu": "default"},
                "resourceUsage": {"nvidia.com/gpu": "2"},
                "pods": [{"node": "n1", "gpus": [0]}, {"node": "n2", "gpus": [3]}],
            }
        ],
    }


def test_admit_preempt_and_pending(sqlite_store: Store):
    clock = Clock()
    w, _ = writer(sqlite_store, clock)
    new = stored_workload(sqlite_store, "new")
    victim = stored_workload(sqlite_store, "victim", admitted=True)
    waiting = stored_workload(sqlite_store, "waiting")
    built = Built(
        snapshot=Snapshot(cluster_queues=[]),
        workloads={("default", "new"): new, ("default", "victim"): victim, ("default", "waiting"): waiting},
    )
    preemptor = pending_wl("waiting")
    decisions = Decisions(
        admitted=[Admission(pending_wl("new"), "default", {}, [PodSetAdmission("worker", 2, {}, [])])],
        preempted=[Preemption(AdmittedWorkload("victim", "default", []), "InClusterQueue", preemptor)],
        pending=[
            Pending(preemptor, "WaitingForPreemption", "waiting for default/victim", {"victims": ("v",)})
        ],
    )
    (admitted,) = w.write(built, decisions)
    assert admitted["status"]["admission"]["clusterQueue"] == "default"
    assert condition(admitted, "Admitted")["status"] == "True"
    v = sqlite_store.get("Workload", "victim", "default")
    assert condition(v, "Evicted")["reason"] == "Preempted"
    assert condition(v, "Preempted")["reason"] == "InClusterQueue"
    assert v["status"]["preemptedBy"] == "default/waiting"
    assert [e["reason"] for e in events_for(sqlite_store, v)] == ["Preempted"]
    p = sqlite_store.get("Workload", "waiting", "default")
    assert p["status"]["pending"] == {
        "reason": "WaitingForPreemption",
        "message": "waiting for default/victim",
        "details": {"victims": ["v"]},
    }
    assert condition(p, "QuotaReserved")["reason"] == "WaitingForPreemption"
    assert [e["reason"] for e in events_for(sqlite_store, p)] == ["Preempting"]


def test_pending_reason_is_written_only_when_it_changes(sqlite_store: Store):
    clock = Clock()
    w, _ = writer(sqlite_store, clock)
    wl = stored_workload(sqlite_store, "w")

    def cycle(reason: str, message: str) -> dict:
        current = sqlite_store.get("Workload", "w", "default")
        built = Built(snapshot=Snapshot(cluster_queues=[]), workloads={("default", "w"): current})
        w.write(built, Decisions(pending=[Pending(pending_wl("w"), reason, message)]))
        return sqlite_store.get("Workload", "w", "default")

    first = cycle("QuotaExhausted", "need 2, 0 free")
    rv = first["metadata"]["resourceVersion"]
    assert cycle("QuotaExhausted", "need 2, 0 free")["metadata"]["resourceVersion"] == rv
    # A reworded message (new numbers) waits for the interval; a new reason does not.
    assert cycle("QuotaExhausted", "need 2, 1 free")["status"]["pending"]["message"] == "need 2, 0 free"
    clock.advance(10)
    assert cycle("QuotaExhausted", "need 2, 1 free")["status"]["pending"]["message"] == "need 2, 1 free"
    assert cycle("InsufficientResources", "no node")["status"]["pending"]["reason"] == "InsufficientResources"
    assert events_for(sqlite_store, copy.deepcopy(wl)) == []  # a pending reason is no transition
