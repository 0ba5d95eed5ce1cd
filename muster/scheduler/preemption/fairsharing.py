"""Fair-sharing preemption (Kueue ``fairPreemptionStrategy``, KEP 1714).

Candidates are the preemptor queue's own workloads under ``withinClusterQueue`` and the
workloads of every queue of the cohort tree that borrows on the contested resources under
``reclaimWithinCohort``. With the preemptor's usage simulated, target queues are visited
by walking down from the root to the child with the highest dominant resource share
(DRS; a cohort wins ties with a queue, among queues the first by name), and:

* in the preemptor's own queue its lowest candidate is evicted (InClusterQueue);
* when the preemptor stays within nominal quota, the target queue's first candidate is
  evicted (InCohortReclamation);
* otherwise rule S2-a (LessThanOrEqualToFinalShare): a candidate goes if the preemptor's
  share after admission is at most the target's share after the eviction (shares taken at
  the children of the lowest common ancestor); rejected candidates get rule S2-b
  (LessThanInitialShare: preemptor's new share below the target's current share), at most
  once per queue. Both are InCohortFairSharing.

Eviction stops as soon as the preemptor fits; with nodes, victims are then added node by
node (own queue, and borrowing queues when the preemptor stays within nominal), and all
are filled back as in classical preemption.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from muster.scheduler.cycle import AdmittedInfo
from muster.scheduler.preemption.common import (
    PreemptionCtx,
    Rules,
    Target,
    fill_back,
    free_nodes,
    policy_allows,
    restore_all,
)
from muster.scheduler.quota import QuotaNode, QuotaTree

__all__ = ["fair_targets"]


class _Queue:
    """One queue's candidates, consumed in order."""

    __slots__ = ("_head", "_it", "node")

    def __init__(self, node: QuotaNode, it: Iterator[AdmittedInfo]) -> None:
        self.node = node
        self._it = it
        self._head: AdmittedInfo | None = None

    def peek(self) -> AdmittedInfo | None:
        while self._head is None:
            info = next(self._it, None)
            if info is None:
                return None
            if not info.removed:
                self._head = info
        return self._head

    def pop(self) -> AdmittedInfo | None:
        head = self.peek()
        self._head = None
        return head


def fair_targets(ctx: PreemptionCtx) -> list[Target] | None:
    cyc = ctx.cycle
    tree = cyc.tree
    cq = ctx.cq
    usage = ctx.assignment.usage
    targets: list[Target] = []
    strategies = cyc.policy.fair_sharing_strategies

    def take(info: AdmittedInfo, reason: str) -> bool:
        """Evict one candidate; True once the preemptor fits its quota."""
        cyc.remove(info)
        targets.append(Target(info, reason))
        tree.add_usages(cq, usage, -1)
        ok = ctx.quota_fits(True)
        tree.add_usages(cq, usage, 1)
        return ok

    tree.add_usages(cq, usage, 1)  # shares are computed as if the preemptor were admitted
    within_nominal = cq.within_nominal(ctx.frs)
    tree.add_usages(cq, usage, -1)
    if not ctx.quota_fits(True):
        tree.add_usages(cq, usage, 1)
        try:
            queues = _candidates(ctx)
            fits, retry = _first_strategy(ctx, queues, within_nominal, strategies[0], take)
            if not fits and len(strategies) > 1 and retry:
                fits = _second_strategy(ctx, retry, take)
        finally:
            tree.add_usages(cq, usage, -1)
        if not fits:
            restore_all(cyc, targets)
            return None
    other = {n: (cq.root(), True) for n in _borrowing_queues(ctx)} if within_nominal else {}
    if not free_nodes(ctx, Rules(ctx, other, frs=ctx.usage_frs), targets, True) or not targets:
        restore_all(cyc, targets)
        return None
    return fill_back(ctx, targets, True)


def _candidates(ctx: PreemptionCtx) -> dict[str, _Queue]:
    cyc = ctx.cycle
    cq = ctx.cq
    p = cq.cq.preemption  # type: ignore[union-attr]
    out: dict[str, _Queue] = {}

    def usable(info: AdmittedInfo, policy: str) -> bool:
        w = info.wl
        return (
            w.preemptible
            and info.uses(ctx.frs)
            and policy_allows(policy, w.priority, w.creation_time, ctx.wl)
        )

    if p.within_cluster_queue != "Never":
        own = (i for i in cyc.all_candidates(cq.name) if usable(i, p.within_cluster_queue))
        out[cq.name] = _Queue(cq, own)
    if cq.parent is not None and p.reclaim_within_cohort != "Never":
        for name in _borrowing_queues(ctx):
            node = cyc.tree.queues[name]
            it = (i for i in cyc.all_candidates(name) if usable(i, p.reclaim_within_cohort))
            out[name] = _Queue(node, it)
    return {n: q for n, q in out.items() if q.peek() is not None}


def _borrowing_queues(ctx: PreemptionCtx) -> list[str]:
    cq = ctx.cq
    if cq.parent is None:
        return []
    out: list[str] = []
    stack = [cq.root()]
    while stack:
        node = stack.pop()
        for child in node.children:
            if child.is_cq:
                if child is not cq and not child.within_nominal(ctx.frs):
                    out.append(child.name)
            else:
                stack.append(child)
    return sorted(out)


Take = Callable[[AdmittedInfo, str], bool]


def _first_strategy(
    ctx: PreemptionCtx, queues: dict[str, _Queue], within_nominal: bool, strategy: str, take: Take
) -> tuple[bool, list[AdmittedInfo]]:
    retry: list[AdmittedInfo] = []
    for target in _targets(ctx, queues):
        if target.node is ctx.cq:
            if take(target.pop(), "InClusterQueue"):  # type: ignore[arg-type]
                return True, retry
            continue
        if within_nominal:
            if take(target.pop(), "InCohortReclamation"):  # type: ignore[arg-type]
                return True, retry
            continue
        pre_side, tgt_side = _sides(ctx.cq, target.node)
        tree = ctx.cycle.tree
        preemptor_new = tree.dominant_share(pre_side)
        target_old = tree.dominant_share(tgt_side)
        if strategy == "LessThanOrEqualToFinalShare" and preemptor_new > target_old:
            while (info := target.pop()) is not None:  # no candidate here can pass
                retry.append(info)
            continue
        while (info := target.pop()) is not None:
            target_new = _share_without(tree, tgt_side, info)
            if _passes(strategy, preemptor_new, target_old, target_new):
                if take(info, "InCohortFairSharing"):
                    return True, retry
                break
            retry.append(info)
    return False, retry


def _second_strategy(ctx: PreemptionCtx, retry: list[AdmittedInfo], take: Take) -> bool:
    cyc = ctx.cycle
    by_queue: dict[str, list[AdmittedInfo]] = {}
    for info in retry:
        by_queue.setdefault(info.cq.name, []).append(info)
    queues = {n: _Queue(cyc.tree.queues[n], iter(lst)) for n, lst in by_queue.items()}
    for target in _targets(ctx, queues):
        pre_side, tgt_side = _sides(ctx.cq, target.node)
        passed = cyc.tree.dominant_share(pre_side) < cyc.tree.dominant_share(tgt_side)
        info = target.pop()
        if passed and info is not None and take(info, "InCohortFairSharing"):
            return True
        queues.pop(target.node.name, None)  # S2-b applies at most once per queue
    return False


def _targets(ctx: PreemptionCtx, queues: dict[str, _Queue]) -> Iterator[_Queue]:
    """Kueue's TargetClusterQueueOrdering: repeatedly descend from the root to the
    child with the highest DRS that still has candidates."""
    cq = ctx.cq
    tree = ctx.cycle.tree
    if cq.parent is None:
        own = queues.get(cq.name)
        while own is not None and own.peek() is not None:
            yield own
        return
    on_path = {id(a) for a in cq.ancestors()}
    pruned: set[int] = set()
    root = cq.root()
    while id(root) not in pruned:
        node = root
        while True:
            nxt = _next_child(tree, node, queues, cq, on_path, pruned)
            if nxt is None:
                pruned.add(id(node))
                break
            if nxt.is_cq:
                yield queues[nxt.name]
                break
            node = nxt


def _next_child(
    tree: QuotaTree,
    cohort: QuotaNode,
    queues: dict[str, _Queue],
    preemptor: QuotaNode,
    on_path: set[int],
    pruned: set[int],
) -> QuotaNode | None:
    best_cq, best_cq_drs = None, -1.0
    best_co, best_co_drs = None, -1.0
    for child in sorted(cohort.children, key=lambda c: c.name):
        if id(child) in pruned:
            continue
        drs = tree.dominant_share(child)
        if child.is_cq:
            q = queues.get(child.name)
            if (drs == 0 and child is not preemptor) or q is None or q.peek() is None:
                pruned.add(id(child))
            elif drs > best_cq_drs:
                best_cq, best_cq_drs = child, drs
        elif drs == 0 and id(child) not in on_path:
            pruned.add(id(child))
        elif drs > best_co_drs:
            best_co, best_co_drs = child, drs
    if best_co is not None and best_co_drs >= best_cq_drs:
        return best_co
    return best_cq


def _sides(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """The children of the lowest common ancestor on the paths to ``a`` and ``b``."""
    path_a = [a, *a.ancestors()]
    ids_a = {id(n) for n in path_a}
    prev_b = b
    for node in b.ancestors():
        if id(node) in ids_a:
            prev_a = a
            for n in path_a[1:]:
                if n is node:
                    break
                prev_a = n
            return prev_a, prev_b
        prev_b = node
    return a, b


def _share_without(tree: QuotaTree, side: QuotaNode, info: AdmittedInfo) -> float:
    tree.add_usages(info.cq, info.usage, -1)
    share = tree.dominant_share(side)
    tree.add_usages(info.cq, info.usage, 1)
    return share


def _passes(strategy: str, preemptor_new: float, target_old: float, target_new: float) -> bool:
    if strategy == "LessThanOrEqualToFinalShare":
        return preemptor_new <= target_new
    return preemptor_new < target_old
