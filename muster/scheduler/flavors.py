"""Flavor assignment: which flavor each pod set's resources are charged to, and whether
the quota fits, needs preemption, or can never fit.

Per pod set and resource group, the flavors eligible for it are those whose node labels
do not contradict its nodeSelector / required node affinity / GPU model list and whose
taints it tolerates (flavor tolerations included), in the queue's order. An *assignment*
picks one eligible flavor per (pod set, group); assignments are enumerated in preference
order (the first pod set's first flavor first). For each, every flavor-resource total is
classified as Kueue's flavor assigner does:

* ``NOFIT`` when it exceeds potentialAvailable (can never fit: ExceedsMaxQuota) or it does
  not fit and no preemption could help;
* ``FIT`` when it is within available (``borrow`` is the height of the lowest cohort
  subtree that holds it; 0 means no borrowing);
* ``PREEMPT`` otherwise, when the request is within nominal quota, the queue has a
  hierarchical reclaim path, or it may preempt while borrowing.

Fungibility (documented rule): with ``when_can_borrow`` MayStopSearch the first
assignment that fits is taken even if it borrows, with TryNextFlavor assignments that fit
without borrowing come first; with ``when_can_preempt`` MayStopSearch nothing after the
first assignment that would need preemption is considered. Assignments that fit quota
are then placed in that order and an assignment whose nodes cannot take the gang is
skipped for the next; preemption is tried on the rest in preference order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from itertools import islice, product

from muster.scheduler.quota import FR, QuotaNode, QuotaTree
from muster.scheduler.snapshot import ClusterQueue, Flavor, PodSet

__all__ = ["MAX_ASSIGNMENTS", "Assignment", "FlavorPlan", "Mode", "Shortfall", "flavor_conflict"]

MAX_ASSIGNMENTS = 64  # flavor combinations tried per workload (pod sets × resource groups)

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"


class Mode(IntEnum):
    NOFIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass(slots=True)
class Shortfall:
    """A flavor-resource that did not fit: what was asked, what is free, the most ever."""

    fr: FR
    need: int
    available: int
    potential: float
    nominal: int
    used: int


@dataclass(slots=True)
class Assignment:
    """One flavor choice for every pod set, with counts, total quota usage and its mode."""

    flavors: list[dict[str, str]]
    counts: list[int]
    usage: dict[FR, int]
    mode: Mode
    borrow: int
    exceeds_max: bool
    need_preemption: list[FR] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)


class FlavorPlan:
    """The eligible flavors of one workload's pod sets in one cluster queue."""

    __slots__ = ("_combos", "choices", "cq", "errors", "no_match", "per_pod", "pod_sets", "slots")

    def __init__(self, cq: ClusterQueue, pod_sets: list[PodSet], flavors: dict[str, Flavor]) -> None:
        self.cq = cq
        self.pod_sets = pod_sets
        self.errors: list[str] = []  # resources the queue does not cover
        self.no_match: list[str] = []  # pod sets no flavor matches, with why
        # slots: one per (pod set, group) -> (pod set index, resources, eligible flavors)
        self.slots: list[tuple[int, tuple[str, ...], list[str]]] = []
        group_of: dict[str, int] = {}
        for gi, g in enumerate(cq.resource_groups):
            for r in g.covered_resources:
                group_of[r] = gi
        for pi, ps in enumerate(pod_sets):
            wanted: dict[int, list[str]] = {}
            for res, v in ps.quota_requests().items():
                if not v:
                    continue
                gi = group_of.get(res)
                if gi is None:
                    self.errors.append(
                        f"pod set {ps.name} requests {res}, which cluster queue {cq.name} has no quota for"
                    )
                    continue
                wanted.setdefault(gi, []).append(res)
            for gi, resources in wanted.items():
                eligible, why = [], []
                for fq in cq.resource_groups[gi].flavors:
                    flavor = flavors.get(fq.name) or Flavor(fq.name)
                    conflict = flavor_conflict(flavor, ps)
                    if conflict:
                        why.append(f"flavor {fq.name} {conflict}")
                    else:
                        eligible.append(fq.name)
                if not eligible:
                    self.no_match.append(f"pod set {ps.name}: " + "; ".join(why))
                self.slots.append((pi, tuple(resources), eligible))
        self.choices = [s[2] for s in self.slots]
        self.per_pod = [ps.quota_requests() for ps in pod_sets]
        self._combos = list(islice(product(*self.choices), MAX_ASSIGNMENTS))

    @property
    def admissible(self) -> bool:
        return not self.errors and not self.no_match

    def combos(self) -> list[tuple[str, ...]]:
        """Flavor choices per slot in preference order, at most :data:`MAX_ASSIGNMENTS`."""
        return self._combos

    def evaluate(
        self, tree: QuotaTree, node: QuotaNode, combo: tuple[str, ...], counts: list[int], fair: bool
    ) -> Assignment:
        """Classify one flavor choice at the given pod counts against the current usage."""
        flavors: list[dict[str, str]] = [{} for _ in self.pod_sets]
        usage: dict[FR, int] = {}
        for (pi, resources, _), fname in zip(self.slots, combo, strict=True):
            per_pod = self.per_pod[pi]
            for res in resources:
                flavors[pi][res] = fname
                fr = (fname, res)
                usage[fr] = usage.get(fr, 0) + per_pod[res] * counts[pi]
        mode, borrow, exceeds = Mode.FIT, 0, False
        need: list[FR] = []
        shortfalls: list[Shortfall] = []
        preempt_while_borrowing = _can_preempt_while_borrowing(self.cq, fair)
        for fr, val in usage.items():
            potential = tree.potential_available(node, fr)
            available = tree.available(node, fr)
            if val > potential:
                mode, exceeds = Mode.NOFIT, True
                shortfalls.append(_shortfall(node, fr, val, available, potential))
                continue
            height, may_reclaim = tree.height_of_lowest_subtree_that_fits(node, fr, val)
            borrow = max(borrow, height)
            if val <= available:
                continue
            shortfalls.append(_shortfall(node, fr, val, available, potential))
            need.append(fr)
            if val <= node.nominal.get(fr, 0) or may_reclaim or preempt_while_borrowing:
                mode = min(mode, Mode.PREEMPT)
            else:
                mode = Mode.NOFIT
        return Assignment(flavors, list(counts), usage, mode, borrow, exceeds, need, shortfalls)


def flavor_conflict(flavor: Flavor, ps: PodSet) -> str:
    """Why ``ps`` cannot use ``flavor`` ("" when it can)."""
    labels = flavor.node_labels
    for k, v in ps.node_selector.items():
        if k in labels and labels[k] != v:
            return f"has node label {k}={labels[k]}, the pod set selects {k}={v}"
    if ps.node_affinity and labels:
        ok = False
        for term in ps.node_affinity:
            if all(r.matches(labels) for r in term.match_expressions if r.key in labels):
                ok = True
                break
        if not ok:
            return "has node labels that match none of the pod set's required node affinity terms"
    if (
        ps.gpus
        and ps.gpu_models
        and GPU_PRODUCT_LABEL in labels
        and labels[GPU_PRODUCT_LABEL] not in ps.gpu_models
    ):
        return f"has GPU model {labels[GPU_PRODUCT_LABEL]}, the pod set allows {', '.join(ps.gpu_models)}"
    tolerations = ps.tolerations + flavor.tolerations
    for taint in flavor.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in tolerations):
            return f"has the taint {taint}, which the pod set does not tolerate"
    return ""


def _can_preempt_while_borrowing(cq: ClusterQueue, fair: bool) -> bool:
    p = cq.preemption
    return p.borrow_within_cohort != "Never" or (fair and p.reclaim_within_cohort != "Never")


def _shortfall(node: QuotaNode, fr: FR, val: int, available: int, potential: float) -> Shortfall:
    return Shortfall(fr, val, available, potential, node.nominal.get(fr, 0), node.usage.get(fr, 0))
