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

from muster.scheduler.cycle import AdmittedInfo, Cycle
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
        result = placer.place(self.items)
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

    def mask(self, allow_borrowing: bool) -> np.ndarray:
        """A vectorised superset filter of :meth:`reason` over all admitted workloads."""
        cyc = self.ctx.cycle
        pa = cyc.pod_arrays()
        wl = self.ctx.wl
        own_id = cyc.queue_ids[self.ctx.cq.name]
        own = pa.cq_id == own_id
        ok_own = own & _policy_vec(self.own_policy, pa.prio, pa.qtime, wl)
        nq = len(cyc.queue_ids)
        cq_ok = np.zeros(nq, dtype=bool)
        cq_adv = np.zeros(nq, dtype=bool)
        for name, (_lca, adv) in self.other.items():
            node = cyc.tree.queues[name]
            if not node.within_nominal(self.frs):
                cq_ok[cyc.queue_ids[name]] = True
                cq_adv[cyc.queue_ids[name]] = adv
        ok_other = ~own & cq_ok[pa.cq_id] & _policy_vec(self.reclaim_policy, pa.prio, pa.qtime, wl)
        if allow_borrowing:
            p = self.ctx.cq.cq.preemption  # type: ignore[union-attr]
            while_borrowing = np.zeros(len(pa.prio), dtype=bool)
            if p.borrow_within_cohort != "Never":
                while_borrowing = pa.prio < wl.priority
                if p.max_priority_threshold is not None:
                    while_borrowing &= pa.prio <= p.max_priority_threshold
            ok_other &= cq_adv[pa.cq_id] | while_borrowing
        cmask = pa.fr_mask(self.frs)
        uses = np.ones(len(pa.prio), dtype=bool) if cmask == -1 else (pa.frmask & cmask) != 0
        return ~cyc.removed & pa.preemptible & uses & (ok_own | ok_other)


def _policy_vec(policy: str, prio: np.ndarray, qtime: np.ndarray, wl: PendingWorkload) -> np.ndarray:
    if policy == "LowerPriority":
        return prio < wl.priority
    if policy == "LowerOrNewerEqualPriority":
        return (prio < wl.priority) | ((prio == wl.priority) & (qtime > wl.queue_time))
    return np.full(len(prio), policy == "Any")


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
        spec = failure.spec
        if spec is None:
            return False
        node = _pick_node(ctx, rules, spec, allow_borrowing)
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
        if not progressed:
            return False
    return ctx.place_trial() is None


def _pick_node(ctx: PreemptionCtx, rules: Rules, spec: PodSpec, allow_borrowing: bool) -> int:
    cyc = ctx.cycle
    table, placer = cyc.table, cyc.placer
    assert table is not None and placer is not None
    pa = cyc.pod_arrays()
    eligible = rules.mask(allow_borrowing)
    pods = eligible[pa.pod_wl]
    n = len(table)
    if not pods.any():
        return -1
    nodes = pa.pod_node[pods]
    mask = placer.static(spec) & (np.bincount(nodes, minlength=n) > 0)
    for c, v in zip(spec.cols.tolist(), spec.vals.tolist(), strict=True):
        freed = np.bincount(nodes, weights=pa.pod_res[pods, c], minlength=n)
        mask &= table.free[:, c] + freed >= v
    if spec.gpus and mask.any():
        devs = eligible[pa.pd_wl]
        g = table.gpu_free.shape[1]
        flat = pa.pd_node[devs] * g + pa.pd_dev[devs]
        add = np.bincount(flat, weights=pa.pd_milli[devs], minlength=n * g).reshape(n, g)
        dev = table.gpu_free + add.astype(np.int64)
        if spec.is_share:
            mask &= dev.max(axis=1) >= np.asarray(spec.node_milli(table))
        else:
            mask &= (dev == GPU_MILLI).sum(axis=1) >= spec.gpus
    cand = np.flatnonzero(mask)
    if not len(cand):
        return -1
    top = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(top, nodes, pa.prio[pa.pod_wl[pods]])
    count = np.bincount(nodes, minlength=n)
    order = np.lexsort((count[cand], top[cand]))
    first = order[0]
    best = cand[(top[cand] == top[cand[first]]) & (count[cand] == count[cand[first]])]
    return int(best[0] if len(best) == 1 else best[cyc.rng.integers(len(best))])


def _victims_on(ctx: PreemptionCtx, node: int) -> list[AdmittedInfo]:
    cyc = ctx.cycle
    pa = cyc.pod_arrays()
    ids = np.unique(pa.pod_wl[pa.pod_node == node])
    infos = [cyc.infos[i] for i in ids.tolist() if not cyc.infos[i].removed]
    own = ctx.cq
    infos.sort(key=lambda i: (not i.wl.evicted, i.cq is own, i.key))
    return infos
