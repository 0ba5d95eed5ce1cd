"""What classical and fair-sharing preemption share: the rules that say which admitted
workload may be evicted for a preemptor and why, the fit test (quota *and* a placement for
the whole gang), Kueue's fill-back, and the node phase that frees room on nodes.

Candidate classification and validity follow Kueue (``classifyPreemptionVariant``,
``candidateIsValid``): a workload of the preemptor's own queue is a candidate under
``withinClusterQueue``; one of another queue only under ``reclaimWithinCohort``, only while
its queue (and its cohorts up to the common ancestor) is above nominal quota on the
contested resources — so a queue within its nominal quota is never preempted by another
queue — and, unless the preemptor has a hierarchical advantage, either with the preemptor
not borrowing afterwards (InCohortReclamation) or under ``borrowWithinCohort`` with a
priority at or below its threshold (InCohortReclaimWhileBorrowing).

Node phase: when quota allows the preemptor but no node can take some pod of its gang,
victims are added node by node: among nodes where evicting eligible workloads would make
room, the one whose eligible victims have the lowest top priority (then the fewest pods) is
chosen, and its eligible workloads are evicted in candidate order until the pod fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from muster.scheduler.cycle import AdmittedInfo, Bucket, Cycle
from muster.scheduler.flavors import Assignment
from muster.scheduler.placement.filters import PodSpec, dynamic_mask
from muster.scheduler.placement.gang import GangItem, GangPlacement, PlacementFailure
from muster.scheduler.quota import FR, QuotaNode
from muster.scheduler.snapshot import GPU_MILLI, PendingWorkload

__all__ = [
    "HIERARCHICAL",
    "REASONS",
    "RECLAIM_WHILE_BORROWING",
    "RECLAIM_WITHOUT_BORROWING",
    "WITHIN_CQ",
    "PreemptionCtx",
    "Rules",
    "Target",
    "fill_back",
    "free_nodes",
    "policy_allows",
    "restore_all",
]

NEVER, WITHIN_CQ, HIERARCHICAL, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = range(5)
REASONS = {
    WITHIN_CQ: "InClusterQueue",
    HIERARCHICAL: "InCohortReclamation",
    RECLAIM_WITHOUT_BORROWING: "InCohortReclamation",
    RECLAIM_WHILE_BORROWING: "InCohortReclaimWhileBorrowing",
}


@dataclass(slots=True)
class Target:
    """A chosen victim and the Preempted reason it will carry."""

    info: AdmittedInfo
    reason: str


class PreemptionCtx:
    """One preemptor in one flavor assignment: what it asks and how to test a fit."""

    __slots__ = ("assignment", "cq", "cycle", "frs", "items", "last_failure", "usage_frs", "wl")

    def __init__(
        self,
        cycle: Cycle,
        wl: PendingWorkload,
        cq: QuotaNode,
        assignment: Assignment,
        items: Sequence[GangItem],
    ) -> None:
        self.cycle = cycle
        self.wl = wl
        self.cq = cq
        self.assignment = assignment
        self.items = list(items)
        self.usage_frs = frozenset(assignment.usage)
        # contested flavor-resources: those that do not fit, or all when only nodes are short
        self.frs = frozenset(assignment.need_preemption) or self.usage_frs
        self.last_failure: PlacementFailure | None = None

    def quota_fits(self, allow_borrowing: bool) -> bool:
        return self.cycle.tree.fits(self.cq, self.assignment.usage, allow_borrowing)

    def place_trial(self) -> PlacementFailure | None:
        """Try the gang on the nodes as they are now and undo it; the failure if any."""
        placer = self.cycle.placer
        if placer is None:
            return None
        result = placer.place(self.items, explain=False)
        if isinstance(result, GangPlacement):
            placer.release(result)
            return None
        self.last_failure = result
        return result

    def fits(self, allow_borrowing: bool) -> bool:
        return self.quota_fits(allow_borrowing) and self.place_trial() is None


def policy_allows(policy: str, cand_priority: int, cand_time: float, wl: PendingWorkload) -> bool:
    """Kueue's SatisfiesPreemptionPolicy for one candidate."""
    if policy == "LowerPriority":
        return cand_priority < wl.priority
    if policy == "LowerOrNewerEqualPriority":
        return cand_priority < wl.priority or (cand_priority == wl.priority and wl.queue_time < cand_time)
    return policy == "Any"


class Rules:
    """Which admitted workloads the preemptor may evict, for one preemption attempt.

    ``other`` maps a queue name to (lowest common cohort with the preemptor, whether the
    preemptor has a hierarchical advantage over it); queues absent from it are never
    reclaimed from.
    """

    __slots__ = ("ctx", "frs", "other", "own_policy", "reclaim_policy")

    def __init__(
        self,
        ctx: PreemptionCtx,
        other: dict[str, tuple[QuotaNode, bool]],
        frs: frozenset[FR] | None = None,
        own: bool = True,
    ) -> None:
        self.ctx = ctx
        self.other = other
        self.frs = ctx.frs if frs is None else frs
        p = ctx.cq.cq.preemption  # type: ignore[union-attr]
        self.own_policy = p.within_cluster_queue if own else "Never"
        self.reclaim_policy = p.reclaim_within_cohort

    def classify(self, info: AdmittedInfo) -> int:
        """The candidate's variant (NEVER when it may not be evicted at all)."""
        ctx = self.ctx
        w = info.wl
        if not w.preemptible or not info.uses(self.frs):
            return NEVER
        if info.cq is ctx.cq:
            return WITHIN_CQ if policy_allows(self.own_policy, w.priority, w.creation_time, ctx.wl) else NEVER
        entry = self.other.get(info.cq.name)
        if entry is None or not policy_allows(self.reclaim_policy, w.priority, w.creation_time, ctx.wl):
            return NEVER
        if entry[1]:
            return HIERARCHICAL
        p = ctx.cq.cq.preemption  # type: ignore[union-attr]
        if p.borrow_within_cohort == "Never" or w.priority >= ctx.wl.priority:
            return RECLAIM_WITHOUT_BORROWING
        if p.max_priority_threshold is not None and w.priority > p.max_priority_threshold:
            return RECLAIM_WITHOUT_BORROWING
        return RECLAIM_WHILE_BORROWING

    def valid(self, info: AdmittedInfo, variant: int, allow_borrowing: bool) -> bool:
        """Kueue's candidateIsValid, evaluated as victims are removed."""
        if info.cq is self.ctx.cq:
            return True
        if allow_borrowing and variant == RECLAIM_WITHOUT_BORROWING:
            return False
        frs = self.frs
        if info.cq.within_nominal(frs):
            return False
        lca = self.other[info.cq.name][0]
        for node in info.cq.ancestors():
            if node is lca:
                break
            if node.within_nominal(frs):
                return False
        return True

    def reason(self, info: AdmittedInfo, allow_borrowing: bool) -> str | None:
        if info.removed:
            return None
        variant = self.classify(info)
        if variant == NEVER or not self.valid(info, variant, allow_borrowing):
            return None
        return REASONS[variant]

    def bucket_ok(self, b: Bucket, allow_borrowing: bool) -> bool:
        """Whether a bucket may hold victims: a superset test of :meth:`reason` (equal
        priorities pass under LowerOrNewerEqualPriority; the exact test runs per victim)."""
        ctx = self.ctx
        if not b.preemptible or b.frs.isdisjoint(self.frs):
            return False
        p = ctx.wl.priority
        if b.cq == ctx.cq.name:
            return _priority_ok(self.own_policy, b.priority, p)
        entry = self.other.get(b.cq)
        if entry is None or not _priority_ok(self.reclaim_policy, b.priority, p):
            return False
        if ctx.cycle.tree.queues[b.cq].within_nominal(self.frs):
            return False
        if allow_borrowing and not entry[1]:
            pc = ctx.cq.cq.preemption  # type: ignore[union-attr]
            if pc.borrow_within_cohort == "Never" or b.priority >= p:
                return False
            return pc.max_priority_threshold is None or b.priority <= pc.max_priority_threshold
        return True


def _priority_ok(policy: str, candidate: int, preemptor: int) -> bool:
    if policy == "LowerPriority":
        return candidate < preemptor
    if policy == "LowerOrNewerEqualPriority":
        return candidate <= preemptor
    return policy == "Any"


def restore_all(cycle: Cycle, targets: Sequence[Target]) -> None:
    for t in reversed(targets):
        cycle.restore(t.info)


def fill_back(ctx: PreemptionCtx, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """Re-admit victims, last removed but one first, while the preemptor still fits."""
    cyc = ctx.cycle
    for i in range(len(targets) - 2, -1, -1):
        info = targets[i].info
        cyc.restore(info)
        if ctx.fits(allow_borrowing):
            targets.pop(i)
        else:
            cyc.remove(info)
    return targets


def free_nodes(ctx: PreemptionCtx, rules: Rules, targets: list[Target], allow_borrowing: bool) -> bool:
    """Evict node by node until the gang has a placement (True) or nothing more helps."""
    cyc = ctx.cycle
    if cyc.placer is None:
        return True
    rounds = sum(i.count for i in ctx.items) + 2
    for _ in range(rounds):
        failure = ctx.place_trial()
        if failure is None:
            return True
        if failure.spec is None or not _evict_on_some_node(
            ctx, rules, failure.spec, targets, allow_borrowing
        ):
            return False
    return ctx.place_trial() is None


def _evict_on_some_node(
    ctx: PreemptionCtx, rules: Rules, spec: PodSpec, targets: list[Target], allow_borrowing: bool
) -> bool:
    """Evict eligible workloads on the best node until ``spec`` fits there. A node whose
    victims all turn out invalid (the superset filter let them through) is skipped."""
    cyc = ctx.cycle
    skip: set[int] = set()
    for _ in range(_NODE_TRIES):
        node = _pick_node(ctx, rules, spec, allow_borrowing, skip)
        if node < 0:
            return False
        progressed = False
        for info in _victims_on(ctx, node):
            reason = rules.reason(info, allow_borrowing)
            if reason is None:
                continue
            cyc.remove(info)
            targets.append(Target(info, reason))
            progressed = True
            if dynamic_mask(cyc.table, spec, np.array([node]))[0]:  # type: ignore[arg-type]
                break
        if progressed:
            return True
        skip.add(node)
    return False


_NODE_TRIES = 4


def _pick_node(ctx: PreemptionCtx, rules: Rules, spec: PodSpec, allow_borrowing: bool, skip: set[int]) -> int:
    """The node where evicting eligible workloads would make room for ``spec`` and whose
    eligible victims have the lowest top priority, then the fewest pods."""
    cyc = ctx.cycle
    table, placer = cyc.table, cyc.placer
    assert table is not None and placer is not None
    count, freed, dev, top = cyc.victims().aggregate(
        lambda b: rules.bucket_ok(b, allow_borrowing), spec.cols, bool(spec.gpus)
    )
    mask = placer.static(spec) & (count > 0)
    if len(spec.cols):
        mask &= (table.free[:, spec.cols] + freed >= spec.vals).all(axis=1)
    if spec.gpus and not table.gpu_free.shape[1]:
        return -1  # no node has a GPU device at all
    if spec.gpus:
        after = table.gpu_free + dev
        if spec.is_share:
            mask &= after.max(axis=1) >= np.asarray(spec.node_milli(table))
        else:
            mask &= (after == GPU_MILLI).sum(axis=1) >= spec.gpus
    if skip:
        mask[list(skip)] = False
    cand = np.flatnonzero(mask)
    if not len(cand):
        return -1
    order = np.lexsort((count[cand], top[cand]))
    first = cand[order[0]]
    best = cand[(top[cand] == top[first]) & (count[cand] == count[first])]
    return int(best[0] if len(best) == 1 else best[cyc.rng.integers(len(best))])


def _victims_on(ctx: PreemptionCtx, node: int) -> list[AdmittedInfo]:
    infos = [i for i in ctx.cycle.victims().node_infos[node] if not i.removed]
    own = ctx.cq
    infos.sort(key=lambda i: (not i.wl.evicted, i.cq is own, i.key))
    return infos
