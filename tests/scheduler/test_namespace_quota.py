"""Namespace quotas (ResourceQuota) on top of cluster-queue quota, in the pure core."""

from __future__ import annotations

from dataclasses import replace

from muster.scheduler import GPU, NamespaceQuota, Snapshot, schedule
from tests.scheduler.builders import cq, running, wl

GPUS = {"cpu": 64_000, GPU: 16_000}


def gpu_quota(namespace: str, gpus: int, pods: int | None = None) -> NamespaceQuota:
    hard = {GPU: gpus * 1000}
    keys = {GPU: "requests.nvidia.com/gpu"}
    if pods is not None:
        hard["pods"], keys["pods"] = pods, "pods"
    return NamespaceQuota(namespace, "team", hard, keys)


def in_ns(w, namespace: str):
    return replace(w, namespace=namespace)


def test_admits_up_to_the_namespace_quota_and_names_it_for_the_rest():
    pending = [in_ns(wl(f"j{i}", gpus=2, cpu=0, t=i), "a") for i in range(3)]
    snap = Snapshot([cq("q", GPUS)], pending=pending, namespace_quotas=[gpu_quota("a", 4)])
    d = schedule(snap)
    assert sorted(a.workload.name for a in d.admitted) == ["j0", "j1"]
    (waiting,) = d.pending
    assert waiting.workload.name == "j2" and waiting.reason == "ResourceQuotaExceeded"
    assert waiting.message.startswith(
        "ResourceQuota a/team: requests.nvidia.com/gpu: 4 used + 2 requested > 4 limited"
    )
    assert waiting.details == {
        "resourceQuota": "a/team",
        "key": "requests.nvidia.com/gpu",
        "resource": GPU,
        "used": 4000,
        "requested": 2000,
        "hard": 4000,
    }


def test_another_namespace_with_the_same_shapes_is_not_held_back():
    # Identical workloads share cached outcomes within a cycle; a namespace's quota must not leak.
    pending = [in_ns(wl("a1", gpus=4, cpu=0, t=0), "a"), in_ns(wl("a2", gpus=4, cpu=0, t=1), "a")]
    pending += [in_ns(wl("b1", gpus=4, cpu=0, t=2), "b")]
    d = schedule(Snapshot([cq("q", GPUS)], pending=pending, namespace_quotas=[gpu_quota("a", 4)]))
    assert sorted(a.workload.name for a in d.admitted) == ["a1", "b1"]
    assert [(p.workload.name, p.reason) for p in d.pending] == [("a2", "ResourceQuotaExceeded")]


def test_admitted_and_evicting_workloads_count_and_pods_are_counted():
    admitted = [
        replace(running("old", gpus=1, cpu=0, count=2), namespace="a"),
        replace(running("leaving", gpus=1, cpu=0), namespace="a", evicted=True),
    ]
    pending = [in_ns(wl("new", gpus=1, cpu=0, count=2), "a")]
    d = schedule(
        Snapshot(
            [cq("q", GPUS)], admitted=admitted, pending=pending, namespace_quotas=[gpu_quota("a", 8, pods=4)]
        )
    )
    (waiting,) = d.pending
    assert waiting.reason == "ResourceQuotaExceeded" and waiting.details["key"] == "pods"
    assert (waiting.details["used"], waiting.details["requested"], waiting.details["hard"]) == (3, 2, 4)


def test_gpu_shares_count_their_fraction():
    pending = [in_ns(wl(f"s{i}", gpus=1, milli=250, cpu=0, t=i), "a") for i in range(6)]
    d = schedule(Snapshot([cq("q", GPUS)], pending=pending, namespace_quotas=[gpu_quota("a", 1)]))
    assert len(d.admitted) == 4 and [p.reason for p in d.pending] == ["ResourceQuotaExceeded"] * 2


def test_partial_admission_takes_what_fits_the_namespace_quota():
    pending = [in_ns(wl("elastic", gpus=1, cpu=0, count=8, min_count=2), "a")]
    d = schedule(Snapshot([cq("q", GPUS)], pending=pending, namespace_quotas=[gpu_quota("a", 5)]))
    (admission,) = d.admitted
    assert admission.pod_sets[0].count == 5


def test_a_namespace_quota_does_not_preempt():
    admitted = [replace(running("low", gpus=4, cpu=0, priority=0), namespace="a")]
    pending = [in_ns(wl("high", gpus=4, cpu=0, priority=100), "a")]
    snap = Snapshot(
        [cq("q", GPUS, within="LowerPriority")],
        admitted=admitted,
        pending=pending,
        namespace_quotas=[gpu_quota("a", 4)],
    )
    d = schedule(snap)
    assert d.preempted == [] and [p.reason for p in d.pending] == ["ResourceQuotaExceeded"]


def test_without_namespace_quotas_nothing_changes():
    pending = [in_ns(wl(f"j{i}", gpus=2, cpu=0, t=i), "a") for i in range(3)]
    d = schedule(Snapshot([cq("q", GPUS)], pending=pending))
    assert len(d.admitted) == 3
