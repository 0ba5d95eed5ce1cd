"""Classical preemption (Kueue ``classicalPreemptionStrategy``).

Candidates come in six groups, each in candidate order: already evicted hierarchical,
evicted priority, evicted same-queue, then hierarchical, priority and same-queue ones.
*Hierarchical* candidates are in queues that borrow from a cohort subtree the preemptor
fits in (it has the stronger claim); *priority* candidates are other borrowing queues'
workloads, preemptible by priority under ``reclaimWithinCohort``. Attempts with and
without borrowing are tried in Kueue's order; in each, candidates are removed one by one
until the preemptor's quota fits -- with nodes, first victims are added node by node
until its gang has a placement (they free quota too) -- and finally victims are added
back, newest-removed-but-one first, while everything still fits.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from itertools import takewhile

from muster.scheduler.cycle import AdmittedInfo, Cycle
from muster.scheduler.preemption.common import (
    NEVER,
    REASONS,
    PreemptionCtx,
    Rules,
    Target,
    fill_back,
    free_nodes,
    restore_all,
)
from muster.scheduler.quota import QuotaNode

__all__ = ["classical_targets", "collect_other_queues"]


def classical_targets(ctx: PreemptionCtx) -> list[Target] | None:
    """Victims that make room for the preemptor, or None when none can."""
    cyc = ctx.cycle
    rules = Rules(ctx, collect_other_queues(ctx))
    groups = _groups(cyc, rules)
    has_hier = any(_peek(g) for g in (groups[0], groups[3]))
    has_other = has_hier or any(_peek(g) for g in (groups[1], groups[4]))
    if not has_other and not any(_peek(g) for g in (groups[2], groups[5])):
        return None
    p = ctx.cq.cq.preemption  # type: ignore[union-attr]
    forbidden = p.borrow_within_cohort == "Never"
    if not has_other or (forbidden and not _under_nominal(ctx)):
        attempts = [True]
    elif forbidden and not has_hier:
        attempts = [False, True]
    else:
        attempts = [True, False]
    node_rules = Rules(ctx, rules.other, frs=ctx.usage_frs)
    for allow_borrowing in attempts:
        targets: list[Target] = []
        # nodes first: victims that make room on a node also free quota, so starting
        # with them avoids scattered quota victims that fill-back would only undo
        ok = free_nodes(ctx, node_rules, targets, allow_borrowing)
        if ok and not ctx.quota_fits(allow_borrowing):
            ok = False
            for info, variant in _iterate(cyc, rules):
                if not rules.valid(info, variant, allow_borrowing):
                    continue
                cyc.remove(info)
                targets.append(Target(info, REASONS[variant]))
                if ctx.quota_fits(allow_borrowing):
                    ok = True
                    break
        if not ok or not targets:
            restore_all(cyc, targets)
            continue
        return fill_back(ctx, targets, allow_borrowing)
    return None


def collect_other_queues(ctx: PreemptionCtx) -> dict[str, tuple[QuotaNode, bool]]:
    """Queues of the cohort tree the preemptor may reclaim from (Kueue's hierarchical
    walk): queue -> (the cohort where the walk found it, hierarchical advantage)."""
    cq = ctx.cq
    if cq.parent is None or cq.cq.preemption.reclaim_within_cohort == "Never":  # type: ignore[union-attr]
        return {}
    tree = ctx.cycle.tree
    out: dict[str, tuple[QuotaNode, bool]] = {}
    advantage, remaining = tree.quantities_fit_in_quota(cq, ctx.assignment.usage)
    previous: QuotaNode | None = None
    for subtree in cq.ancestors():
        _collect(subtree, subtree, previous, cq, advantage, ctx, out)
        fits, remaining = tree.quantities_fit_in_quota(subtree, remaining)
        advantage = advantage or fits
        previous = subtree
    return out


def _collect(
    cohort: QuotaNode,
    lca: QuotaNode,
    skip: QuotaNode | None,
    preemptor: QuotaNode,
    advantage: bool,
    ctx: PreemptionCtx,
    out: dict[str, tuple[QuotaNode, bool]],
) -> None:
    for child in cohort.children:
        if child is skip or child is preemptor or child.within_nominal(ctx.frs):
            continue
        if child.is_cq:
            out[child.name] = (lca, advantage)
        else:
            _collect(child, lca, skip, preemptor, advantage, ctx, out)


def _bounded(infos: list[AdmittedInfo], policy: str, priority: int) -> Iterator[AdmittedInfo]:
    # candidate lists are sorted by priority, so a priority policy ends the scan early
    if policy == "LowerPriority":
        return takewhile(lambda i: i.wl.priority < priority, infos)
    if policy == "LowerOrNewerEqualPriority":
        return takewhile(lambda i: i.wl.priority <= priority, infos)
    return iter(infos) if policy == "Any" else iter(())


class _Group:
    """A lazily merged, lazily classified stream of candidates."""

    __slots__ = ("_head", "_it", "_rules")

    def __init__(self, rules: Rules, sources: Iterable[Iterator[AdmittedInfo]]) -> None:
        self._rules = rules
        self._it = heapq.merge(*sources, key=lambda i: i.key)
        self._head: tuple[AdmittedInfo, int] | None = None

    def peek(self) -> tuple[AdmittedInfo, int] | None:
        while self._head is None:
            info = next(self._it, None)
            if info is None:
                return None
            if info.removed:
                continue
            variant = self._rules.classify(info)
            if variant != NEVER:
                self._head = (info, variant)
        return self._head

    def pop(self) -> tuple[AdmittedInfo, int] | None:
        head = self.peek()
        self._head = None
        return head


def _groups(cyc: Cycle, rules: Rules) -> list[_Group]:
    ctx = rules.ctx
    prio = ctx.wl.priority
    own = ctx.cq.name
    hier = [n for n, (_, adv) in rules.other.items() if adv]
    plain = [n for n, (_, adv) in rules.other.items() if not adv]
    out = []
    for evicted in (True, False):
        for names, policy in (
            (hier, rules.reclaim_policy),
            (plain, rules.reclaim_policy),
            ([own], rules.own_policy),
        ):
            out.append(_Group(rules, [_bounded(cyc.candidates_of(n, evicted), policy, prio) for n in names]))
    return out


def _iterate(cyc: Cycle, rules: Rules) -> Iterator[tuple[AdmittedInfo, int]]:
    for group in _groups(cyc, rules):
        while (item := group.pop()) is not None:
            yield item


def _peek(group: _Group) -> bool:
    return group.peek() is not None


def _under_nominal(ctx: PreemptionCtx) -> bool:
    cq = ctx.cq
    return all(cq.usage.get(fr, 0) < cq.nominal.get(fr, 0) for fr in ctx.frs)
