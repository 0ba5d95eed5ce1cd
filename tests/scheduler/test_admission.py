"""The cycle: queue order, StrictFIFO, flavors and fungibility, claims, partial admission."""

from __future__ import annotations

from dataclasses import replace

import pytest

import muster.scheduler.admission as admission
from muster.scheduler import (
    GPU,
    Decisions,
    Flavor,
    NamespaceQuota,
    Policy,
    ResourceQuota,
    Snapshot,
    Taint,
    Toleration,
    apply_decisions,
    schedule,
)
from tests.scheduler.builders import cq, node, running, wl


def names(items) -> list[str]:
    return [i.name for i in items]


def test_queue_order_is_priority_then_fifo() -> None:
    snap = Snapshot(
        [cq("q", {"cpu": 2000})], pending=[wl("old", t=1), wl("new", t=2), wl("vip", priority=5, t=3)]
    )
    d = schedule(snap)
    assert names(d.admitted) == ["vip", "old"]
    assert d.pending[0].name == "new" and d.pending[0].reason == "QuotaExhausted"


def test_unknown_and_stopped_queues() -> None:
    snap = Snapshot([cq("q"), cq("off", stopped=True)], pending=[wl("lost", "missing"), wl("held", "off")])
    d = schedule(snap)
    reasons = {p.name: (p.reason, p.message) for p in d.pending}
    assert reasons["lost"][0] == "Inadmissible" and "missing does not exist" in reasons["lost"][1]
    assert reasons["held"][0] == "QueueStopped"


def test_resource_without_quota_is_inadmissible() -> None:
    d = schedule(Snapshot([cq("q", {"cpu": 4000})], pending=[wl("gpu", gpus=1)]))
    (p,) = d.pending
    assert p.reason == "Inadmissible" and "nvidia.com/gpu" in p.message


def test_strict_fifo_blocks_and_names_the_head() -> None:
    snap = Snapshot(
        [cq("q", {"cpu": 2000}, queueing_strategy="StrictFIFO")],
        pending=[wl("big", cpu=3000, t=1), wl("small", t=2)],
    )
    d = schedule(snap)
    assert names(d.admitted) == []
    small = next(p for p in d.pending if p.name == "small")
    assert small.reason == "StrictFIFOBlocked" and small.details["head"] == "big"
    assert small.details["headReason"] == "ExceedsMaxQuota"


def test_cycle_never_over_admits_and_reports_in_order() -> None:
    pending = [wl(f"w{i}", cpu=1000, t=i) for i in range(10)]
    d = schedule(Snapshot([cq("q", {"cpu": 4000})], pending=pending))
    assert names(d.admitted) == ["w0", "w1", "w2", "w3"]
    assert d.workloads_considered == 10
    assert {p.reason for p in d.pending} == {"QuotaExhausted"}


def test_when_can_borrow_try_next_flavor_prefers_a_non_borrowing_flavor() -> None:
    a = cq("a", {"cpu": ResourceQuota(1000)}, cohort="c", flavors=("first", "second"))
    lender = cq("lender", {"cpu": 4000}, cohort="c", flavors=("first", "second"))
    snap = Snapshot(
        [a, lender], pending=[wl("w", "a", cpu=1000)], admitted=[running("r", "a", flavor="first")]
    )
    # MayStopSearch (default): the first flavor fits by borrowing and is taken
    d = schedule(snap)
    assert d.admitted[0].flavors == {"cpu": "first"}
    # TryNextFlavor: the second flavor fits without borrowing, so it wins
    snap2 = replace(snap, cluster_queues=[replace(a, when_can_borrow="TryNextFlavor"), lender])
    d2 = schedule(snap2)
    assert d2.admitted[0].flavors == {"cpu": "second"}


def test_when_can_preempt_may_stop_search() -> None:
    a = cq("a", {"cpu": 1000}, flavors=("first", "second"), within="LowerPriority")
    snap = Snapshot(
        [a], pending=[wl("w", "a", priority=5)], admitted=[running("low", "a", priority=0, flavor="first")]
    )
    # default TryNextFlavor: the second flavor fits, nothing is preempted
    d = schedule(snap)
    assert names(d.admitted) == ["w"] and d.preempted == []
    # MayStopSearch: preempting in the first flavor is chosen over looking further
    d2 = schedule(replace(snap, cluster_queues=[replace(a, when_can_preempt="MayStopSearch")]))
    assert names(d2.preempted) == ["low"] and d2.pending[0].reason == "WaitingForPreemption"


def test_preemptor_keeps_its_claim_for_the_rest_of_the_cycle() -> None:
    q = cq("q", {"cpu": 2000}, within="LowerPriority")
    snap = Snapshot(
        [q],
        pending=[wl("boss", priority=9, cpu=2000, t=1), wl("sneaky", priority=9, cpu=1000, t=2)],
        admitted=[running("low1", priority=0), running("low2", priority=0)],
    )
    d = schedule(snap)
    assert sorted(names(d.preempted)) == ["low1", "low2"]
    reasons = {p.name: p.reason for p in d.pending}
    # the freed quota belongs to boss for this cycle; sneaky cannot take it
    assert reasons == {"boss": "WaitingForPreemption", "sneaky": "QuotaExhausted"}


def test_priority_class_that_never_preempts() -> None:
    q = cq("q", {"cpu": 1000}, within="LowerPriority")
    w = replace(wl("meek", priority=9), can_preempt=False)
    d = schedule(Snapshot([q], pending=[w], admitted=[running("low")]))
    assert d.preempted == [] and d.pending[0].reason == "QuotaExhausted"
    assert "never preempts" in d.pending[0].message


def test_partial_admission_prefers_full_count_then_largest_that_fits() -> None:
    q = cq("q", {"cpu": 100_000})
    nodes = [node("n1", cpu=3000), node("n2", cpu=2000)]
    d = schedule(Snapshot([q], pending=[wl("e", count=8, min_count=2)], nodes=nodes))
    assert d.admitted[0].pod_sets[0].count == 5
    d2 = schedule(Snapshot([q], pending=[wl("e", count=8, min_count=6)], nodes=nodes))
    assert d2.pending[0].reason == "InsufficientResources"


def test_flavor_taints_and_labels_steer_nodes() -> None:
    flavors = [
        Flavor(
            "gpu", node_labels={"pool": "gpu"}, node_taints=(Taint("gpu", "", "NoSchedule"),), tolerations=()
        )
    ]
    q = cq("q", {"cpu": 8000}, flavors=("gpu",))
    nodes = [node("plain", cpu=8000), replace(node("g1", cpu=8000), labels={"pool": "gpu"})]
    d = schedule(Snapshot([q], pending=[wl("w")], flavors=flavors, nodes=nodes))
    assert d.pending[0].reason == "NoMatchingFlavor" and "taint gpu:NoSchedule" in d.pending[0].message
    tolerant = [replace(flavors[0], tolerations=(Toleration("gpu", "Exists"),))]
    d2 = schedule(Snapshot([q], pending=[wl("w")], flavors=tolerant, nodes=nodes))
    assert d2.admitted[0].pod_sets[0].placements[0].node == "g1"


def test_apply_decisions_loops_cycles_without_mutating_input() -> None:
    q = cq("q", {"cpu": 8000, "nvidia.com/gpu": 8000})
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    snap = Snapshot([q], pending=[wl(f"w{i}", gpus=2, t=i) for i in range(5)], nodes=nodes)
    d1 = schedule(snap)
    assert len(d1.admitted) == 4
    snap2 = apply_decisions(snap, d1, now=1.0)
    assert snap.nodes is nodes and nodes[0].gpu_free == ()  # the input is unchanged
    assert len(snap2.admitted) == 4 and names(snap2.pending) == ["w4"]
    assert int(snap2.nodes.free_milli.sum()) == 0  # type: ignore[union-attr]
    d2 = schedule(snap2)
    assert d2.admitted == [] and d2.pending[0].reason == "QuotaExhausted"


def test_same_snapshot_same_decisions() -> None:
    q = cq("q", {"cpu": 64_000, "nvidia.com/gpu": 64_000})
    nodes = [node(f"n{i}", gpus=8) for i in range(6)]
    pending = [wl(f"w{i}", gpus=1 + i % 3, t=i) for i in range(20)]
    snap = Snapshot([q], pending=pending, nodes=nodes)
    for placement in ("random", "spread", "binpack"):
        a, b = (
            schedule(snap, Policy(placement=placement, seed=3)),
            schedule(snap, Policy(placement=placement, seed=3)),
        )
        assert [(x.name, x.pod_sets[0].placements) for x in a.admitted] == [
            (x.name, x.pod_sets[0].placements) for x in b.admitted
        ]


def _decided(d: Decisions) -> list[tuple[str, str, str]]:
    return [(p.name, p.reason, p.message) for p in d.pending]


def _by_rounds(snap: Snapshot) -> Decisions:
    """The same cycle with a round per workload, as several queues run: nothing decided in a run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            admission._Admitter, "_run_one", lambda self, q, waiting: self._run_rounds({q: waiting}, [q])
        )
        return schedule(snap)


@pytest.mark.parametrize("within", ["Never", "LowerOrNewerEqualPriority"])
def test_a_backlog_of_one_shape_is_decided_in_one_run_as_one_at_a_time_would_be(within: str) -> None:
    """A long queue of one shape (one pod set list, as the snapshot shares it) behind a full
    queue: the first that fails is worked out, the rest of its run waits with its reason at
    once. A different shape, or a namespace with a quota, behind them is decided on its own.
    Where the queue time decides preemption, each workload has a signature of its own."""
    shape = wl("proto", gpus=1, cpu=0).pod_sets
    backlog = [replace(wl(f"b{i}", t=i), pod_sets=shape) for i in range(40)]
    small = wl("small", cpu=500, t=50)  # another shape: fits what is left
    limited = replace(backlog[0], name="team-a", namespace="a", creation_time=60)
    free = replace(backlog[0], name="team-b", namespace="b", creation_time=70)
    quotas = [NamespaceQuota("a", "team", {GPU: 8000}, {GPU: "requests.nvidia.com/gpu"})]
    snap = Snapshot(
        [cq("q", {"cpu": 4000, GPU: 2000}, within=within)],
        pending=[*backlog, small, limited, free],
        namespace_quotas=quotas,
    )
    worked_out: list[str] = []
    process = admission._Admitter._process
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            admission._Admitter, "_process", lambda self, w: worked_out.append(w.name) or process(self, w)
        )
        d = schedule(snap)
    backlog_worked_out = ["b0", "b1", "b2"] if within == "Never" else [w.name for w in backlog]
    assert worked_out == [*backlog_worked_out, "small", "team-a", "team-b"]
    assert names(d.admitted) == ["b0", "b1", "small"]
    assert [p.name for p in d.pending] == [f"b{i}" for i in range(2, 40)] + ["team-a", "team-b"]
    assert {p.reason for p in d.pending} == {"QuotaExhausted"}
    assert d.workloads_considered == 43
    rounds = _by_rounds(snap)
    assert _decided(d) == _decided(rounds) and names(d.admitted) == names(rounds.admitted)
