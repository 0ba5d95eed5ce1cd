"""Quota arithmetic over the cohort tree, exactly as Kueue's resource nodes.

Every ClusterQueue and Cohort is a :class:`QuotaNode`. For a flavor-resource ``fr``:

* ``localQuota = max(0, subtreeQuota - lendingLimit)`` when a lending limit is set, else 0
  (the part never lent to the parent);
* ``subtreeQuota(CQ) = nominal``; ``subtreeQuota(cohort) = own nominal +
  Σ_child (child.subtreeQuota - child.localQuota)``;
* ``usage(cohort) = Σ_child max(0, child.usage - child.localQuota)``;
* ``available(root) = subtreeQuota - usage``; ``available(node) = max(0, localQuota - usage)
  + min(available(parent), subtreeQuota - localQuota - max(0, usage - localQuota) +
  borrowingLimit)`` (the second term only with a borrowing limit);
* ``potentialAvailable(root) = subtreeQuota``; ``potentialAvailable(node) =
  min(localQuota + potentialAvailable(parent), subtreeQuota + borrowingLimit)``.

A node is *borrowing* on ``fr`` when its usage exceeds its subtree quota. Usage changes are
applied with :meth:`QuotaTree.add_usage`, which bubbles only what exceeds each node's
local quota up to its parent, so the tree stays consistent as a cycle admits and evicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from muster.scheduler.snapshot import (
    GPU,
    AdmittedPodSet,
    ClusterQueue,
    Cohort,
    ResourceGroup,
    Snapshot,
    SnapshotError,
)

__all__ = ["FR", "QuotaNode", "QuotaTree"]

FR = tuple[str, str]  # (flavor, resource)

_INF = float("inf")


class QuotaNode:
    """A ClusterQueue (``cq`` set) or a Cohort of the tree, with its quota and usage per fr."""

    __slots__ = (
        "borrowing_limit",
        "children",
        "cohort",
        "cq",
        "lending_limit",
        "name",
        "nominal",
        "parent",
        "subtree",
        "usage",
        "weight",
    )

    def __init__(self, name: str, cq: ClusterQueue | None = None, cohort: Cohort | None = None) -> None:
        self.name = name
        self.cq = cq
        self.cohort = cohort
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.nominal: dict[FR, int] = {}
        self.borrowing_limit: dict[FR, int] = {}
        self.lending_limit: dict[FR, int] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}
        weight = cq.fair_weight if cq is not None else cohort.fair_weight if cohort is not None else 1.0
        self.weight = weight
        groups = cq.resource_groups if cq is not None else cohort.resource_groups if cohort else []
        _load_groups(self, groups)

    @property
    def is_cq(self) -> bool:
        return self.cq is not None

    def local_quota(self, fr: FR) -> int:
        limit = self.lending_limit.get(fr)
        if limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - limit)

    def local_available(self, fr: FR) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FR, val: int) -> bool:
        """Whether usage plus ``val`` would exceed this node's subtree quota."""
        return self.usage.get(fr, 0) + val > self.subtree.get(fr, 0)

    def within_nominal(self, frs: Iterable[FR]) -> bool:
        """Kueue's IsWithinNominalInResources: not above subtree quota in any of ``frs``."""
        usage, subtree = self.usage, self.subtree
        return all(usage.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)

    def ancestors(self) -> Iterable[QuotaNode]:
        """Parent, grandparent, ..., root."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def height(self) -> int:
        """Distance to the furthest leaf (a cohort with only queues has height 1)."""
        if not self.children:
            return 0
        return max((c.height() + 1 for c in self.children), default=0)

    def __repr__(self) -> str:
        return f"QuotaNode({self.name!r}, cq={self.is_cq})"


class QuotaTree:
    """The cohort forest of one snapshot, with usage from its admitted workloads (unless
    ``with_admitted`` is False: the caller then adds it)."""

    def __init__(self, snapshot: Snapshot, with_admitted: bool = True) -> None:
        self.queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self._pa_cache: dict[tuple[int, FR], float] = {}
        for c in snapshot.cohorts:
            if c.name in self.cohorts:
                raise SnapshotError(f"cohort {c.name} is defined twice")
            self.cohorts[c.name] = QuotaNode(c.name, cohort=c)
        for cq in snapshot.cluster_queues:
            if cq.name in self.queues:
                raise SnapshotError(f"cluster queue {cq.name} is defined twice")
            node = QuotaNode(cq.name, cq=cq)
            self.queues[cq.name] = node
            if cq.cohort:
                parent = self.cohorts.get(cq.cohort)
                if parent is None:  # a cohort named only by its queues exists implicitly
                    parent = self.cohorts[cq.cohort] = QuotaNode(cq.cohort, cohort=Cohort(cq.cohort))
                _link(node, parent)
        for c in snapshot.cohorts:
            if c.parent:
                parent = self.cohorts.get(c.parent)
                if parent is None:
                    parent = self.cohorts[c.parent] = QuotaNode(c.parent, cohort=Cohort(c.parent))
                _link(self.cohorts[c.name], parent)
        self._check_acyclic()
        for root in self.roots():
            _compute_subtree(root)
        for cq in snapshot.cluster_queues:
            for fr, v in cq.usage.items():
                self.add_usage(self.queues[cq.name], fr, v)
        for w in snapshot.admitted if with_admitted else ():
            node = self.queues.get(w.queue)
            if node is None:
                raise SnapshotError(
                    f"admitted workload {w.namespace}/{w.name}: unknown cluster queue {w.queue}"
                )
            for fr, v in workload_usage(w.pod_sets).items():
                self.add_usage(node, fr, v)

    # -- structure ------------------------------------------------------------------------

    def roots(self) -> list[QuotaNode]:
        nodes = list(self.cohorts.values()) + [q for q in self.queues.values() if q.parent is None]
        return [n for n in nodes if n.parent is None]

    def _check_acyclic(self) -> None:
        for c in self.cohorts.values():
            seen = {id(c)}
            for a in c.ancestors():
                if id(a) in seen:
                    raise SnapshotError(f"cohort {c.name} is part of a cycle of parents")
                seen.add(id(a))

    # -- usage ----------------------------------------------------------------------------

    def add_usage(self, node: QuotaNode, fr: FR, val: int) -> None:
        """Add ``val`` (negative to remove) to ``node`` and what exceeds local quotas upwards."""
        cur: QuotaNode | None = node
        while cur is not None and val:
            old = cur.usage.get(fr, 0)
            new = old + val
            cur.usage[fr] = new
            lq = cur.local_quota(fr)
            val = max(0, new - lq) - max(0, old - lq)
            cur = cur.parent

    def add_usages(self, node: QuotaNode, usage: Mapping[FR, int], sign: int = 1) -> None:
        for fr, v in usage.items():
            self.add_usage(node, fr, sign * v)

    # -- Kueue's quantities ---------------------------------------------------------------

    def available(self, node: QuotaNode, fr: FR) -> int:
        if node.parent is None:
            return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
        usage = node.usage.get(fr, 0)
        lq = node.local_quota(fr)
        from_parent = self.available(node.parent, fr)
        limit = node.borrowing_limit.get(fr)
        if limit is not None:
            stored_in_parent = node.subtree.get(fr, 0) - lq
            used_in_parent = max(0, usage - lq)
            from_parent = min(from_parent, stored_in_parent - used_in_parent + limit)
        return max(0, lq - usage) + from_parent

    def potential_available(self, node: QuotaNode, fr: FR) -> float:
        key = (id(node), fr)
        hit = self._pa_cache.get(key)
        if hit is not None:
            return hit
        if node.parent is None:
            out: float = node.subtree.get(fr, 0)
        else:
            out = node.local_quota(fr) + self.potential_available(node.parent, fr)
            limit = node.borrowing_limit.get(fr)
            if limit is not None:
                out = min(out, node.subtree.get(fr, 0) + limit)
        self._pa_cache[key] = out
        return out

    def height_of_lowest_subtree_that_fits(self, cq: QuotaNode, fr: FR, val: int) -> tuple[int, bool]:
        """Kueue's FindHeightOfLowestSubtreeThatFits: 0 when ``cq`` needs no borrowing, else
        the height of the lowest cohort whose subtree holds the request; and whether that
        subtree is below the root (the queue may then reclaim in the hierarchy)."""
        if not (cq.borrowing_with(fr, val) and cq.parent is not None):
            return 0, cq.parent is not None
        remaining = val - cq.local_available(fr)
        node = cq
        for node in cq.ancestors():
            if not node.borrowing_with(fr, remaining):
                return node.height(), node.parent is not None
            remaining -= node.local_available(fr)
        return node.height(), node.parent is not None

    def quantities_fit_in_quota(
        self, node: QuotaNode, requests: Mapping[FR, int]
    ) -> tuple[bool, dict[FR, int]]:
        """Whether ``requests`` fit under ``node``'s subtree quota, and what is left over for
        its parent once its local quota is used."""
        fits = True
        remaining: dict[FR, int] = {}
        for fr, v in requests.items():
            if node.usage.get(fr, 0) + v > node.subtree.get(fr, 0):
                fits = False
            remaining[fr] = max(0, v - node.local_available(fr))
        return fits, remaining

    def fits(self, cq: QuotaNode, requests: Mapping[FR, int], allow_borrowing: bool) -> bool:
        """Kueue's workloadFits: every request within available, and without borrowing
        when ``allow_borrowing`` is False."""
        for fr, v in requests.items():
            if not allow_borrowing and cq.borrowing_with(fr, v):
                return False
            if v > self.available(cq, fr):
                return False
        return True

    # -- fair sharing ---------------------------------------------------------------------

    def dominant_share(self, node: QuotaNode, extra: Mapping[FR, int] | None = None) -> float:
        """Kueue's DominantResourceShare, optionally as if ``extra`` were added to usage:
        max over resources of borrowed·1000 / lendable of the parent, divided by the weight."""
        parent = node.parent
        if parent is None:
            return 0.0
        borrowed: dict[str, int] = {}
        frs = set(node.usage)
        if extra:
            frs.update(extra)
        for fr in sorted(frs):
            over = node.usage.get(fr, 0) + (extra.get(fr, 0) if extra else 0) - node.subtree.get(fr, 0)
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
        if not borrowed:
            return 0.0
        share = 0.0
        for res, amount in borrowed.items():
            lendable = sum(self.potential_available(parent, fr) for fr in parent.subtree if fr[1] == res)
            ratio = amount * 1000 / lendable if lendable > 0 else _INF
            share = max(share, ratio)
        if node.weight <= 0:
            return _INF
        return share / node.weight


def workload_usage(pod_sets: Iterable) -> dict[FR, int]:
    """Quota charged by admitted pod sets: per-pod quota requests × count, by flavor."""
    out: dict[FR, int] = {}
    for ps in pod_sets:
        # ps.quota_requests() without its copy: this runs for every admitted workload of
        # every cycle.
        gpu = ps.gpus * ps.gpu_milli if ps.gpus else None
        for res, v in ps.requests.items():
            if gpu is not None and res == GPU:
                v = gpu
            _charge_usage(out, ps, res, v)
        if gpu is not None and GPU not in ps.requests:
            _charge_usage(out, ps, GPU, gpu)
    return out


def _charge_usage(out: dict[FR, int], ps: AdmittedPodSet, res: str, v: int) -> None:
    if not v:
        return
    flavor = ps.flavors.get(res)
    if flavor is None:
        raise SnapshotError(f"admitted pod set {ps.name} has no flavor for {res}")
    fr = (flavor, res)
    out[fr] = out.get(fr, 0) + v * ps.count


def _link(child: QuotaNode, parent: QuotaNode) -> None:
    child.parent = parent
    parent.children.append(child)


def _load_groups(node: QuotaNode, groups: list[ResourceGroup]) -> None:
    for g in groups:
        for fq in g.flavors:
            for res, q in fq.resources.items():
                fr = (fq.name, res)
                node.nominal[fr] = q.nominal
                if q.borrowing_limit is not None:
                    node.borrowing_limit[fr] = q.borrowing_limit
                if q.lending_limit is not None:
                    node.lending_limit[fr] = q.lending_limit


def _compute_subtree(node: QuotaNode) -> None:
    node.subtree = dict(node.nominal)
    for child in node.children:
        _compute_subtree(child)
        for fr, q in child.subtree.items():
            node.subtree[fr] = node.subtree.get(fr, 0) + q - child.local_quota(fr)
