"""Preemption: candidate order, fill-back, node phase, fair sharing strategies."""

from __future__ import annotations

from dataclasses import replace

from muster.scheduler import PodBinding, Policy, Snapshot, schedule
from tests.scheduler.builders import cq, node, running, wl


def victims(d) -> list[str]:
    return sorted(p.name for p in d.preempted)


def test_fill_back_leaves_a_minimal_set() -> None:
    q = cq("q", {"cpu": 6}, within="LowerPriority")
    admitted = [
        running("a", cpu=1, priority=-2),
        running("b", cpu=3, priority=-1),
        running("c", cpu=2, priority=0),
    ]
    d = schedule(Snapshot([q], pending=[wl("p", cpu=3, priority=5)], admitted=admitted))
    # a (lowest) then b are removed until 3 fit; adding a back still fits, so only b goes
    assert victims(d) == ["b"]


def test_already_evicted_and_non_preemptible() -> None:
    q = cq("q", {"cpu": 2}, within="LowerPriority")
    admitted = [
        running("evicting", cpu=1, priority=0, evicted=True),
        running("lowest", cpu=1, priority=-5),
    ]
    d = schedule(Snapshot([q], pending=[wl("p", cpu=1, priority=5)], admitted=admitted))
    assert victims(d) == ["evicting"]  # workloads already being evicted go first
    pinned = [replace(a, preemptible=False) for a in admitted]
    d2 = schedule(Snapshot([q], pending=[wl("p", cpu=1, priority=5)], admitted=pinned))
    assert d2.preempted == [] and d2.pending[0].reason == "QuotaExhausted"


def test_gang_preemption_frees_whole_nodes() -> None:
    q = cq("q", {"cpu": 64_000, "nvidia.com/gpu": 8000}, within="LowerPriority")
    nodes = [node("n1", gpus=4), node("n2", gpus=4), node("n3", gpus=4, unschedulable=True)]
    admitted = [
        running(f"{n}-{d}", gpus=1, cpu=1000, priority=-1, t=i, pods=(PodBinding(n, (d,)),))
        for i, (n, d) in enumerate((n, d) for n in ("n1", "n2") for d in range(4))
    ]
    nodes = [
        replace(nd, used={"cpu": 4000}, gpu_free=(0, 0, 0, 0)) if nd.name != "n3" else nd for nd in nodes
    ]
    gang = wl("gang", gpus=4, cpu=4000, count=2, priority=3)
    d = schedule(Snapshot([q], pending=[gang], admitted=admitted, nodes=nodes))
    assert len(d.preempted) == 8 and {p.reason for p in d.preempted} == {"InClusterQueue"}
    (p,) = d.pending
    assert p.reason == "WaitingForPreemption"
    claim = p.details["claim"][0]["placements"]
    assert sorted(pl["node"] for pl in claim) == ["n1", "n2"]


def test_half_full_node_needs_fewer_victims() -> None:
    q = cq("q", {"cpu": 64_000, "nvidia.com/gpu": 8000}, within="LowerPriority")
    n1 = replace(node("n1", gpus=4), used={"cpu": 4000}, gpu_free=(0, 0, 0, 0))
    n2 = replace(node("n2", gpus=4), used={"cpu": 2000}, gpu_free=(0, 0, 1000, 1000))
    admitted = [running(f"a{d}", gpus=1, priority=-1, pods=(PodBinding("n1", (d,)),)) for d in range(4)]
    admitted += [running(f"b{d}", gpus=1, priority=-1, pods=(PodBinding("n2", (d,)),)) for d in range(2)]
    d = schedule(Snapshot([q], pending=[wl("p", gpus=4, priority=1)], admitted=admitted, nodes=[n1, n2]))
    assert victims(d) == ["b0", "b1"]


def test_reclaim_takes_borrowers_only() -> None:
    a = cq("a", {"cpu": 4}, cohort="c", reclaim="Any")
    b = cq("b", {"cpu": 4}, cohort="c")
    admitted = [
        running("b1", "b", cpu=3, priority=9, t=1),
        running("b2", "b", cpu=3, priority=9, t=2),
        running("a1", "a", cpu=2),
    ]
    d = schedule(Snapshot([a, b], pending=[wl("p", "a", cpu=2)], admitted=admitted))
    # b borrows 2; reclaiming one of its workloads (the newest, b2) gives a its nominal back
    assert victims(d) == ["b2"] and d.preempted[0].reason == "InCohortReclamation"


def _fair_cohort() -> list:
    return [
        cq(n, {"cpu": 3}, cohort="all", within="LowerPriority", reclaim="Any") for n in ("qa", "qb", "qc")
    ]


def test_fair_sharing_reclaims_within_nominal_unconditionally() -> None:
    admitted = [running(f"a{i}", "qa", cpu=1) for i in range(6)] + [
        running(f"b{i}", "qb", cpu=1) for i in range(3)
    ]
    snap = Snapshot(_fair_cohort(), pending=[wl("p", "qc", cpu=3)], admitted=admitted)
    d = schedule(snap, Policy(fair_sharing=True))
    assert victims(d) == ["a0", "a1", "a2"]
    assert {p.reason for p in d.preempted} == {"InCohortReclamation"}


def test_fair_sharing_stops_before_the_target_becomes_poorer_than_the_preemptor() -> None:
    admitted = [running(f"a{i}", "qa", cpu=1) for i in range(6)] + [
        running(f"b{i}", "qb", cpu=1) for i in range(3)
    ]
    # qc would borrow 1 after admission: qa may go from 3 borrowed down to 1, not below
    snap = Snapshot(_fair_cohort(), pending=[wl("p", "qc", cpu=4)], admitted=admitted)
    d = schedule(snap, Policy(fair_sharing=True))
    assert d.preempted == [] and d.pending[0].reason == "QuotaExhausted"
    # with qb running only 1 CPU, two evictions suffice and leave qa (1 borrowed) no poorer
    # than qc after admission (1 borrowed): rule S2-a allows them
    d2 = schedule(replace(snap, admitted=admitted[:7]), Policy(fair_sharing=True))
    assert d2.admitted == [] and victims(d2) == ["a0", "a1"]
    assert {p.reason for p in d2.preempted} == {"InCohortFairSharing"}
