"""Properties of one cycle over random clusters, queues and workloads (hypothesis).

* no node, GPU device or quota is oversubscribed by admissions and preemptors' claims;
* gangs are all or nothing (every pod set placed whole, or at least minCount);
* victims satisfy the preemptor queue's policy;
* a queue within its nominal quota never loses a workload to another queue;
* every pending workload is decided exactly once, and the same input gives the same output;
* elastic growth stays within each pod set's full count, keeps the running pods where they
  are, never preempts, oversubscribes nothing (counted above) and yields to waiting workloads
  of its priority or higher.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from muster.scheduler import (
    GPU,
    ClusterQueue,
    Decisions,
    Flavor,
    FlavorQuotas,
    Node,
    PendingWorkload,
    PodSet,
    Policy,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    Taint,
    apply_decisions,
    schedule,
)
from muster.scheduler.decisions import as_table, bind_pod, unbind_pod
from muster.scheduler.quota import QuotaTree, workload_usage

RES = ("cpu", GPU)


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[Snapshot, Policy]:
    two_flavors = draw(st.booleans())
    flavor_names = ("a", "b") if two_flavors else ("default",)
    flavors = [Flavor(f, node_labels={"pool": f} if two_flavors else {}) for f in flavor_names]
    with_nodes = draw(st.booleans())
    nodes = None
    if with_nodes:
        nodes = []
        for i in range(draw(st.integers(1, 5))):
            gpus = draw(st.sampled_from([0, 2, 4]))
            nodes.append(
                Node(
                    f"n{i}",
                    {"cpu": draw(st.sampled_from([4000, 8000, 16000]))},
                    labels={"pool": draw(st.sampled_from(flavor_names))},
                    taints=(Taint("t", "", "NoSchedule"),) if draw(st.integers(0, 9)) == 0 else (),
                    gpus=gpus,
                    gpu_model=draw(st.sampled_from(["A", "B"])) if gpus else "",
                    unschedulable=draw(st.integers(0, 9)) == 0,
                )
            )
    cohort = draw(st.integers(0, 9)) < 7
    queues = []
    for k in range(draw(st.integers(1, 3))):
        quota = {}
        for r in RES:
            nominal = draw(st.integers(1, 8)) * 1000
            bl = draw(st.one_of(st.none(), st.integers(0, 4).map(lambda v: v * 1000))) if cohort else None
            ll = (
                draw(st.one_of(st.none(), st.integers(0, nominal // 1000).map(lambda v: v * 1000)))
                if cohort
                else None
            )
            quota[r] = ResourceQuota(nominal, bl, ll)
        group = ResourceGroup(RES, [FlavorQuotas(f, dict(quota)) for f in flavor_names])
        within = draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]))
        reclaim = draw(st.sampled_from(["Never", "LowerPriority", "Any", "Any"])) if cohort else "Never"
        borrow = draw(st.sampled_from(["Never", "LowerPriority"])) if reclaim != "Never" else "Never"
        queues.append(
            ClusterQueue(
                f"q{k}",
                [group],
                cohort="c" if cohort else None,
                queueing_strategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
                preemption=PreemptionConfig(
                    within, reclaim, borrow, draw(st.one_of(st.none(), st.integers(-1, 2)))
                ),
            )
        )
    policy = Policy(
        placement=draw(st.sampled_from(["binpack", "spread", "fgd", "gpu-packing", "random"])),
        fair_sharing=draw(st.booleans()),
        seed=draw(st.integers(0, 3)),
    )
    base = Snapshot(
        queues, pending=workloads(draw, queues, "r", 0.0, (-2, 0), 10), flavors=flavors, nodes=nodes
    )
    first = schedule(base, policy)
    running = apply_decisions(base, first, now=0.0)
    # Some workloads finish (capacity returns); those admitted below their full size may grow
    # (an elastic job whose cool-down passed).
    asked = {w.name: w for w in base.pending}
    table = running.nodes.copy() if running.nodes is not None else None
    admitted = []
    for w in running.admitted:
        if draw(st.integers(0, 3)) == 0:
            for ps in w.pod_sets:
                for pod in ps.pods if table is not None else ():
                    unbind_pod(table, table.index[pod.node], ps.requests, pod.gpus, ps.gpu_milli)
            continue
        if draw(st.booleans()):
            # elastic: it may grow to a few more pods than it runs (or asked for) per pod set
            spec = {ps.name: ps for ps in asked[w.name].pod_sets}
            full = tuple(
                replace(spec[ps.name], count=ps.count + draw(st.integers(0, 3)), min_count=ps.count)
                for ps in w.pod_sets
            )
            w = replace(w, grow=full)
        admitted.append(w)
    return Snapshot(
        queues,
        pending=workloads(draw, queues, "p", 100.0, (-1, 3), 6),
        admitted=admitted,
        flavors=flavors,
        nodes=table,
    ), policy


def workloads(
    draw: st.DrawFn, queues: list[ClusterQueue], prefix: str, t0: float, prio: tuple[int, int], most: int
) -> list[PendingWorkload]:
    out: list[PendingWorkload] = []
    for i in range(draw(st.integers(0, most))):
        if out and draw(st.booleans()):
            # Workloads of one shape share their pod set list, as the snapshot builds them
            # (the core decides a run of them at once: _Admitter._alike); mostly in one
            # queue at one priority, so that runs form.
            prev = out[-1]
            same = draw(st.integers(0, 3)) > 0
            out.append(
                PendingWorkload(
                    f"{prefix}{i}",
                    prev.queue if same else draw(st.sampled_from([q.name for q in queues])),
                    prev.pod_sets,
                    priority=prev.priority if same else draw(st.integers(*prio)),
                    creation_time=t0 + i,
                )
            )
            continue
        pod_sets = []
        for j in range(draw(st.integers(1, 2))):
            count = draw(st.integers(1, 3))
            gpus = draw(st.sampled_from([0, 0, 1, 2]))
            milli = draw(st.sampled_from([1000, 1000, 300, 500])) if gpus == 1 else 1000
            pod_sets.append(
                PodSet(
                    f"ps{j}",
                    count,
                    {"cpu": draw(st.sampled_from([500, 1000, 2000]))},
                    gpus=gpus,
                    gpu_milli=milli,
                    min_count=draw(st.one_of(st.none(), st.integers(1, count))),
                    gpu_models=draw(st.sampled_from([(), ("A",)])) if gpus else (),
                    anti_affinity=draw(st.integers(0, 4)) == 0,
                )
            )
        out.append(
            PendingWorkload(
                f"{prefix}{i}",
                draw(st.sampled_from([q.name for q in queues])),
                pod_sets,
                priority=draw(st.integers(*prio)),
                creation_time=t0 + i,
            )
        )
    return out


# Hypothesis's explain phase re-runs a failing example once per choice it made, which for
# these snapshots outlasts the test timeout and hides the failure itself: skip it.
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
@given(snapshots())
def test_cycle_properties(case: tuple[Snapshot, Policy]) -> None:
    snap, policy = case
    d = schedule(snap, policy)
    _decided_once(snap, d)
    _gangs_whole(snap, d)
    _no_oversubscription(snap, d)
    _victims_eligible(snap, d)
    _growth_bounded(snap, d)
    again = schedule(snap, policy)
    assert _fingerprint(d) == _fingerprint(again)


def _decided_once(snap: Snapshot, d: Decisions) -> None:
    decided = Counter([a.name for a in d.admitted] + [p.name for p in d.pending])
    assert decided == Counter(w.name for w in snap.pending)
    assert d.workloads_considered <= len(snap.pending)


def _gangs_whole(snap: Snapshot, d: Decisions) -> None:
    for a in d.admitted:
        specs = {ps.name: ps for ps in a.workload.pod_sets}
        assert [ps.name for ps in a.pod_sets] == list(specs)
        for ps in a.pod_sets:
            spec = specs[ps.name]
            assert (spec.min_count or spec.count) <= ps.count <= spec.count
            if snap.nodes is not None:
                assert sum(pl.pods for pl in ps.placements) == ps.count
                assert all(len(g) == spec.gpus for pl in ps.placements for g in pl.gpus)
                if spec.anti_affinity:
                    hosts = [
                        pl.node for p in a.pod_sets if specs[p.name].anti_affinity for pl in p.placements
                    ]
                    assert all(pl.pods == 1 for pl in ps.placements) and len(hosts) == len(set(hosts))


def _no_oversubscription(snap: Snapshot, d: Decisions) -> None:
    victims = {id(p.workload) for p in d.preempted}
    tree = QuotaTree(snap, with_admitted=False)
    for w in snap.admitted:
        if id(w) not in victims:
            tree.add_usages(tree.queues[w.queue], workload_usage(w.pod_sets))
    claims = [p for p in d.pending if p.reason == "WaitingForPreemption"]
    for a in d.admitted:
        tree.add_usages(tree.queues[a.cluster_queue], _usage(a.workload, a.pod_sets))
    for p in claims:
        # a claim charges the preemptor's full request (partial claims are reported as counts)
        tree.add_usages(tree.queues[p.workload.queue], _claim_usage(p))
    for r in d.resized:
        tree.add_usages(tree.queues[r.workload.queue], _growth_usage(r))
    for node in tree.queues.values():
        for fr in node.subtree:
            assert node.usage.get(fr, 0) <= tree.potential_available(node, fr)
    for root in tree.roots():
        for fr, quota in root.subtree.items():
            start = sum(v for w in snap.admitted for f, v in workload_usage(w.pod_sets).items() if f == fr)
            assert root.usage.get(fr, 0) <= max(quota, start)
    if snap.nodes is None:
        return
    table = as_table(snap.nodes).copy()
    for p in d.preempted:
        for ps in p.workload.pod_sets:
            for pod in ps.pods:
                unbind_pod(table, table.index[pod.node], ps.requests, pod.gpus, ps.gpu_milli)
    # admissions place whole pod sets, resizes the added pods (of the full-size pod sets)
    placed = [(a.workload.pod_sets, a.pod_sets) for a in d.admitted] + [
        (r.workload.grow, r.pod_sets) for r in d.resized
    ]
    for pod_sets, admitted in placed:
        specs = {ps.name: ps for ps in pod_sets}
        for ps in admitted:
            for pl in ps.placements:
                for g in pl.gpus:
                    bind_pod(table, table.index[pl.node], specs[ps.name].requests, g, pl.gpu_milli)
    for p in claims:
        for c in p.details["claim"]:
            spec = next(ps for ps in p.workload.pod_sets if ps.name == c["podSet"])
            for pl in c["placements"]:
                for g in pl["gpus"]:
                    bind_pod(table, table.index[pl["node"]], spec.requests, tuple(g), spec.gpu_milli)
    assert (table.free >= 0).all()
    healthy = as_table(snap.nodes).gpu_free >= 0
    assert (table.gpu_free[healthy] >= 0).all() and (table.gpu_free <= 1000).all()


def _usage(w: PendingWorkload, pod_sets: list) -> dict:
    specs = {ps.name: ps for ps in w.pod_sets}
    out: dict = {}
    for ps in pod_sets:
        for res, v in specs[ps.name].quota_requests().items():
            fr = (ps.flavors[res], res)
            out[fr] = out.get(fr, 0) + v * ps.count
    return out


def _claim_usage(p) -> dict:
    out: dict = {}
    for c in p.details["claim"]:
        spec = next(ps for ps in p.workload.pod_sets if ps.name == c["podSet"])
        for res, v in spec.quota_requests().items():
            fr = (c["flavors"][res], res)
            out[fr] = out.get(fr, 0) + v * c["count"]
    return out


def _growth_usage(r) -> dict:
    specs = {ps.name: ps for ps in r.workload.grow}
    flavors = {ps.name: ps.flavors for ps in r.workload.pod_sets}
    out: dict = {}
    for ps in r.pod_sets:
        for res, v in specs[ps.name].quota_requests().items():
            fr = (flavors[ps.name][res], res)
            out[fr] = out.get(fr, 0) + v * (ps.count - r.previous[ps.name])
    return out


def _growth_bounded(snap: Snapshot, d: Decisions) -> None:
    victims = {id(p.workload) for p in d.preempted}
    waiting = {"QuotaExhausted", "WaitingForPreemption", "InsufficientResources", "TopologyUnsatisfiable"}
    waiting |= {"GangIncomplete"}
    for r in d.resized:
        w = r.workload
        assert w.grow and not w.evicted and id(w) not in victims
        current = {ps.name: ps.count for ps in w.pod_sets}
        full = {ps.name: ps.count for ps in w.grow}
        assert len({ps.name for ps in r.pod_sets}) == len(r.pod_sets)
        for ps in r.pod_sets:
            assert r.previous[ps.name] == current[ps.name] < ps.count <= full[ps.name]
            if snap.nodes is not None:
                assert sum(pl.pods for pl in ps.placements) == ps.count - current[ps.name]
        # it grew although nothing of its priority or higher waits for capacity it could use
        queues = {q.name: q for q in snap.cluster_queues}
        for p in d.pending:
            if p.reason in waiting and p.workload.priority >= w.priority:
                same_tree = queues[p.workload.queue].cohort == queues[w.queue].cohort is not None
                assert p.reason not in ("QuotaExhausted", "WaitingForPreemption") or not (
                    same_tree or p.workload.queue == w.queue
                )
                assert snap.nodes is None or p.reason in ("QuotaExhausted", "WaitingForPreemption")
    for h in d.held:
        assert h.workload.grow and not h.workload.evicted


def _victims_eligible(snap: Snapshot, d: Decisions) -> None:
    queues = {q.name: q for q in snap.cluster_queues}
    # the most each queue held during the cycle: what it started with plus what it admitted
    # or claimed in the cycle (a queue may start borrowing because of this cycle's admissions)
    tree = QuotaTree(snap)
    for a in d.admitted:
        tree.add_usages(tree.queues[a.cluster_queue], _usage(a.workload, a.pod_sets))
    for p in d.pending:
        if p.reason == "WaitingForPreemption":
            tree.add_usages(tree.queues[p.workload.queue], _claim_usage(p))
    for p in d.preempted:
        victim, pre = p.workload, p.preemptor
        policy = queues[pre.queue].preemption
        assert victim.preemptible
        if victim.queue == pre.queue:
            assert p.reason == "InClusterQueue"
            assert _allowed(policy.within_cluster_queue, victim, pre)
            continue
        assert p.reason != "InClusterQueue"
        assert queues[victim.queue].cohort is not None and queues[pre.queue].cohort is not None
        if p.reason != "InCohortFairSharing":
            assert _allowed(policy.reclaim_within_cohort, victim, pre)
        # a queue within its nominal quota all cycle long never loses to another queue
        vnode = tree.queues[victim.queue]
        assert any(vnode.usage.get(fr, 0) > vnode.subtree.get(fr, 0) for fr in vnode.usage)


def _allowed(policy: str, victim, pre: PendingWorkload) -> bool:
    if policy == "LowerPriority":
        return victim.priority < pre.priority
    if policy == "LowerOrNewerEqualPriority":
        return victim.priority < pre.priority or (
            victim.priority == pre.priority and pre.queue_time < victim.creation_time
        )
    return policy == "Any"


def _fingerprint(d: Decisions) -> tuple:
    return (
        [
            (
                a.name,
                a.flavors,
                [(ps.name, ps.count, [(pl.node, pl.gpus) for pl in ps.placements]) for ps in a.pod_sets],
            )
            for a in d.admitted
        ],
        [(p.name, p.reason, p.preemptor.name) for p in d.preempted],
        [(p.name, p.reason, p.message) for p in d.pending],
        [
            (r.name, [(ps.name, ps.count, [(pl.node, pl.gpus) for pl in ps.placements]) for ps in r.pod_sets])
            for r in d.resized
        ],
        [(h.name, h.reason, h.message) for h in d.held],
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_one_queue_takes_the_short_path_to_the_same_decisions(case: tuple[Snapshot, Policy]) -> None:
    """A cycle with one queue waiting runs it without the rounds' bookkeeping: the decisions
    must be those of the rounds (a round per workload)."""
    import muster.scheduler.admission as admission

    snap, policy = case
    if len({w.queue for w in snap.pending}) != 1:
        return
    short = schedule(snap, policy)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            admission._Admitter,
            "_run_one",
            lambda self, q, waiting: self._run_rounds({q: waiting}, [q]),
        )
        rounds = schedule(snap, policy)
    assert _fingerprint(short) == _fingerprint(rounds)
