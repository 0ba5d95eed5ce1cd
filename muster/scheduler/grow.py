"""Growing elastic workloads back toward their full size, after the cycle's admissions.

An admitted workload whose driver lists its full-size pod sets in
:attr:`~muster.scheduler.snapshot.AdmittedWorkload.grow` (an elastic training job admitted
below ``maxReplicas``, or shrunk by a lost node, whose gang runs and whose cool-down has
passed) is grown in place when capacity allows, once every pending workload has had its
turn. The rule:

* growth never preempts and never changes a running pod's node or devices: only the added
  pods are placed, with the flavors the pod set was admitted on, and the quota they charge
  must fit as an admission's would (borrowing within the cohort's limits);
* growth yields to waiting work: while a workload of the same or higher priority waits for
  quota in the same cohort (or for its ClusterQueue's quota, without one), or waits for nodes
  anywhere, the workload does not grow (:data:`YIELDS`);
* a pod set grows by the largest count that fits, at least one pod (a binary search over
  quota, the namespace's quotas and the nodes); a pod set that asks for a required
  topology or for hostname anti-affinity does not grow (the added pods could not honour it
  together with the running ones: it grows when it is requeued);
* growers go in order: higher priority, then admitted earlier, then namespace/name; a
  stopped ClusterQueue grows nothing.

Every grower that stays below its full size gets a :class:`~muster.scheduler.decisions.GrowthHeld`
saying what is missing for one more pod; every growth is a
:class:`~muster.scheduler.decisions.Resize`.
"""

from __future__ import annotations

from typing import Any

from muster.scheduler import reasons as R
from muster.scheduler.cycle import AdmittedInfo, Cycle
from muster.scheduler.decisions import GrowthHeld, NodePlacement, Pending, PodSetAdmission, Resize
from muster.scheduler.placement.gang import GangItem, GangPlacement
from muster.scheduler.quota import FR
from muster.scheduler.snapshot import AdmittedPodSet, PodSet, format_units

__all__ = ["NOT_GROWABLE", "NO_NODE", "QUOTA", "RESOURCE_QUOTA", "YIELDS", "grow"]

# Why a grower stays below its full size (GrowthHeld.reason).
YIELDS = "WaitingWorkloadsFirst"  # a workload of the same or higher priority waits for capacity
QUOTA = "QuotaExhausted"  # one more pod's quota does not fit its ClusterQueue (and cohort)
RESOURCE_QUOTA = R.RESOURCE_QUOTA_EXCEEDED  # a ResourceQuota of its namespace is full
NO_NODE = R.INSUFFICIENT_RESOURCES  # no node has room for one more pod
NOT_GROWABLE = "NotGrowable"  # a required topology or anti-affinity: the gang grows when requeued

_QUOTA_WAITS = frozenset({R.QUOTA_EXHAUSTED, R.WAITING_FOR_PREEMPTION})
_NODE_WAITS = frozenset({R.INSUFFICIENT_RESOURCES, R.TOPOLOGY_UNSATISFIABLE, R.GANG_INCOMPLETE})


def grow(cycle: Cycle) -> None:
    """Grow every grower of the cycle's snapshot that can grow (module docstring)."""
    growers = [i for i in cycle.infos if i.wl.grow and not i.removed and not i.wl.evicted]
    growers.sort(key=lambda i: (-i.wl.priority, i.wl.admission_time, i.wl.namespace, i.wl.name))
    for info in growers:
        _Grower(cycle, info).run()


class _Grower:
    def __init__(self, cycle: Cycle, info: AdmittedInfo) -> None:
        self.c = cycle
        self.info = info
        self.wl = info.wl
        self.full = {ps.name: ps for ps in info.wl.grow}

    def run(self) -> None:
        room = [(aps, self.full[aps.name]) for aps in self.wl.pod_sets if self._room(aps)]
        if not room:
            return
        if self.info.cq.cq is not None and self.info.cq.cq.stopped:
            self._held(
                R.QUEUE_STOPPED, f"cluster queue {self.info.cq.name} is stopped: it admits nothing", {}
            )
            return
        blocker = self._blocker()
        if blocker is not None:
            who = f"{blocker.namespace}/{blocker.name}"
            self._held(
                YIELDS,
                f"{who} (priority {blocker.workload.priority}) waits for capacity ({blocker.reason}); "
                "a job grows only into capacity no waiting workload of its priority or higher needs",
                {"waiting": who, "waitingReason": blocker.reason},
            )
            return
        grown: list[PodSetAdmission] = []
        previous: dict[str, int] = {}
        held: tuple[str, str, dict[str, Any]] | None = None
        for aps, full in room:
            if full.topology_required or full.anti_affinity:
                held = held or (
                    NOT_GROWABLE,
                    f"pod set {aps.name} asks for a required topology or anti-affinity, which pods added "
                    "beside running ones cannot honour; it runs at the size it was admitted at",
                    {"podSet": aps.name},
                )
                continue
            added, why = self._largest(aps, full)
            if added is not None:
                grown.append(added)
                previous[aps.name] = aps.count
            if why is not None and (added is None or added.count < full.count):
                held = held or why
        if grown:
            self.c.decisions.resized.append(Resize(self.wl, grown, previous))
        if held is not None:
            self._held(*held)

    def _room(self, aps: AdmittedPodSet) -> bool:
        full = self.full.get(aps.name)
        return full is not None and full.count > aps.count

    def _blocker(self) -> Pending | None:
        """The first workload left waiting that this one must not take capacity from."""
        root = self.info.cq.root()
        for p in self.c.decisions.pending:
            if p.workload.priority < self.wl.priority:
                continue
            if p.reason in _NODE_WAITS and self.c.table is not None:
                return p
            if p.reason in _QUOTA_WAITS:
                node = self.c.tree.queues.get(p.workload.queue)
                if node is not None and node.root() is root:
                    return p
        return None

    def _largest(
        self, aps: AdmittedPodSet, full: PodSet
    ) -> tuple[PodSetAdmission | None, tuple[str, str, dict[str, Any]] | None]:
        """The most pods (up to the full count) added to ``aps`` that fit, committed; and why
        not one more (None when it reached its full count)."""
        most = full.count - aps.count
        why = self._try(aps, full, 1, commit=False)
        if why is not None:
            return None, why
        lo, hi = 1, most
        while lo < hi:  # the largest k in [1, most] that fits: fits(lo) holds throughout
            mid = (lo + hi + 1) // 2
            if self._try(aps, full, mid, commit=False) is None:
                lo = mid
            else:
                hi = mid - 1
        placed: list[NodePlacement] = []
        failed = self._try(aps, full, lo, commit=True, out=placed)
        if failed is not None:  # only seeded ties differ from the trial: it stays as it is
            return None, failed
        added = PodSetAdmission(aps.name, aps.count + lo, dict(aps.flavors), placed)
        self.c.decisions.pods_placed += lo
        if lo == most:
            return added, None
        return added, self._try(aps, full, 1, commit=False)

    def _try(
        self,
        aps: AdmittedPodSet,
        full: PodSet,
        k: int,
        commit: bool,
        out: list[NodePlacement] | None = None,
    ) -> tuple[str, str, dict[str, Any]] | None:
        """Whether ``k`` more pods fit (None) or why not; with ``commit`` they are charged."""
        c = self.c
        usage: dict[FR, int] = {}
        for res, v in full.quota_requests().items():
            flavor = aps.flavors.get(res)
            if flavor is None:
                return NOT_GROWABLE, f"pod set {aps.name} was admitted without a flavor for {res}", {}
            usage[(flavor, res)] = usage.get((flavor, res), 0) + v * k
        node = self.info.cq
        if not c.tree.fits(node, usage, True):
            short = [
                f"{res} in flavor {flavor}: {format_units(res, v)} more needed, "
                f"{format_units(res, max(0, c.tree.available(node, (flavor, res))))} available"
                for (flavor, res), v in sorted(usage.items())
                if v > c.tree.available(node, (flavor, res))
            ]
            return (
                QUOTA,
                f"{k} more pod(s) of {aps.name} exceed the quota of ClusterQueue {node.name}: "
                + "; ".join(short),
                {"clusterQueue": node.name, "shortfalls": short},
            )
        blocked = c.namespaces.blocked(self.wl.namespace, [full], [k])
        if blocked is not None:
            return RESOURCE_QUOTA, blocked[0], blocked[1]
        placement = GangPlacement()
        if c.placer is not None:
            flavors = [c.flavor(n) for n in dict.fromkeys(aps.flavors.values())]
            placed = c.placer.place([GangItem(c.placer.spec(full, flavors), k)], explain=False)
            if not isinstance(placed, GangPlacement):
                return (
                    NO_NODE,
                    f"no node has room for {k} more pod(s) of {aps.name} "
                    f"(each: {_shape(full)}) beside what runs now",
                    {"podSet": aps.name, "pods": k},
                )
            placement = placed
        if not commit:
            if c.placer is not None:
                c.placer.release(placement)
            return None
        c.tree.add_usages(node, usage)
        c.namespaces.charge(self.wl.namespace, [full], [k])
        if out is not None and c.table is not None:
            by_node: dict[tuple[str, int], NodePlacement] = {}
            for pod in placement.pods:
                name = c.table.names[pod.node]
                milli = pod.milli or full.gpu_milli
                pl = by_node.get((name, milli))
                if pl is None:
                    pl = by_node[(name, milli)] = NodePlacement(name, gpu_milli=milli)
                    out.append(pl)
                pl.gpus.append(pod.devices)
        return None

    def _held(self, reason: str, message: str, details: dict[str, Any]) -> None:
        self.c.decisions.held.append(GrowthHeld(self.wl, reason, message, details))


def _shape(ps: PodSet) -> str:
    parts = [f"{res} {format_units(res, v)}" for res, v in sorted(ps.requests.items())]
    if ps.gpus:
        parts.append(f"{ps.gpus} GPU(s)" + (f" at {ps.gpu_milli} milli" if ps.gpu_milli < 1000 else ""))
    return ", ".join(parts) or "no requests"
