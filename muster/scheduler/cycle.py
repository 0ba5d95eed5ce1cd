"""The working state of one cycle: quota tree, node table copy, placer, admitted index.

Everything :func:`~muster.scheduler.schedule` changes lives here, on copies: the quota tree
is built from the snapshot, the node table is copied, and admitted workloads are indexed
per queue in preemption-candidate order. Removing a workload (a preemption victim being
simulated) takes its usage out of the tree and its pods off the nodes; restoring puts
them back, so simulations leave no trace.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterator

import numpy as np

from muster.scheduler.decisions import Decisions, as_table
from muster.scheduler.nodes import NodeTable, gpu_tag
from muster.scheduler.ordering import candidate_key
from muster.scheduler.placement.fragmentation import typical_pods
from muster.scheduler.placement.gang import Placer
from muster.scheduler.policy import Policy, TypicalPod
from muster.scheduler.quota import FR, QuotaNode, QuotaTree, workload_usage
from muster.scheduler.snapshot import CPU, AdmittedWorkload, Flavor, Snapshot, SnapshotError

__all__ = ["AdmittedInfo", "Cycle", "PodArrays"]


class AdmittedInfo:
    """An admitted workload as the cycle sees it: its queue node, usage and bound pods."""

    __slots__ = ("cq", "frs", "index", "key", "pods", "removed", "usage", "wl")

    def __init__(self, wl: AdmittedWorkload, index: int, cq: QuotaNode, table: NodeTable | None) -> None:
        self.wl = wl
        self.index = index
        self.cq = cq
        self.usage: dict[FR, int] = workload_usage(wl.pod_sets)
        self.frs = frozenset(self.usage)
        self.key = candidate_key(wl)
        self.removed = False
        # (node, cols, vals, devices, milli, tag) per bound pod
        self.pods: list[tuple[int, np.ndarray, np.ndarray, tuple[int, ...], int, int]] = []
        if table is None:
            return
        for ps in wl.pod_sets:
            items = [(table.res_index[r], v) for r, v in ps.requests.items() if v and r in table.res_index]
            cols = np.array([c for c, _ in items], dtype=np.intp)
            vals = np.array([v for _, v in items], dtype=np.int64)
            for pod in ps.pods:
                node = table.index.get(pod.node)
                if node is None:
                    raise SnapshotError(
                        f"admitted workload {wl.namespace}/{wl.name}: unknown node {pod.node}"
                    )
                milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                self.pods.append((node, cols, vals, pod.gpus, milli, gpu_tag(len(pod.gpus), milli)))

    def uses(self, frs: frozenset[FR] | set[FR]) -> bool:
        return not self.frs.isdisjoint(frs)


class PodArrays:
    """Admitted workloads' pods as arrays, for finding nodes that preemption could free."""

    __slots__ = (
        "cq_id",
        "frbit",
        "frmask",
        "pd_dev",
        "pd_milli",
        "pd_node",
        "pd_wl",
        "pod_node",
        "pod_res",
        "pod_wl",
        "preemptible",
        "prio",
        "qtime",
    )

    def __init__(self, infos: list[AdmittedInfo], queue_ids: dict[str, int], table: NodeTable) -> None:
        frs = sorted({fr for i in infos for fr in i.frs})
        self.frbit = {fr: k for k, fr in enumerate(frs[:63])}
        self.prio = np.array([i.wl.priority for i in infos], dtype=np.int64)
        self.qtime = np.array([i.wl.creation_time for i in infos], dtype=np.float64)
        self.cq_id = np.array([queue_ids[i.cq.name] for i in infos], dtype=np.int64)
        self.preemptible = np.array([i.wl.preemptible for i in infos], dtype=bool)
        self.frmask = np.array(
            [sum(1 << self.frbit[fr] for fr in i.frs if fr in self.frbit) or -1 for i in infos],
            dtype=np.int64,
        )
        pod_node, pod_wl, res_rows = [], [], []
        pd_node, pd_dev, pd_milli, pd_wl = [], [], [], []
        nres = len(table.resources)
        for i in infos:
            for node, cols, vals, devices, milli, _tag in i.pods:
                pod_node.append(node)
                pod_wl.append(i.index)
                row = np.zeros(nres, dtype=np.int64)
                row[cols] = vals
                res_rows.append(row)
                for d in devices:
                    pd_node.append(node)
                    pd_dev.append(d)
                    pd_milli.append(milli)
                    pd_wl.append(i.index)
        self.pod_node = np.array(pod_node, dtype=np.intp)
        self.pod_wl = np.array(pod_wl, dtype=np.intp)
        self.pod_res = np.array(res_rows, dtype=np.int64).reshape(len(res_rows), nres)
        self.pd_node = np.array(pd_node, dtype=np.intp)
        self.pd_dev = np.array(pd_dev, dtype=np.intp)
        self.pd_milli = np.array(pd_milli, dtype=np.int64)
        self.pd_wl = np.array(pd_wl, dtype=np.intp)

    def fr_mask(self, frs: set[FR] | frozenset[FR]) -> int:
        bits = [self.frbit.get(fr) for fr in frs]
        return -1 if any(b is None for b in bits) else sum(1 << b for b in bits)  # type: ignore[operator]


class Cycle:
    """Mutable state of one scheduling cycle."""

    def __init__(self, snapshot: Snapshot, policy: Policy) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.fair = policy.fair_sharing
        self.flavors: dict[str, Flavor] = {f.name: f for f in snapshot.flavors}
        self.tree = QuotaTree(snapshot)
        self.rng = np.random.default_rng(policy.seed)
        self.decisions = Decisions()
        self.table: NodeTable | None = None
        self.placer: Placer | None = None
        if snapshot.nodes is not None:
            self.table = as_table(snapshot.nodes).copy()
            self.placer = Placer(self.table, policy, self.rng, policy.typical_pods or _typical_from(snapshot))
        self.infos: list[AdmittedInfo] = []
        self.by_cq: dict[str, list[AdmittedInfo]] = {name: [] for name in self.tree.queues}
        self.evicted_by_cq: dict[str, list[AdmittedInfo]] = {name: [] for name in self.tree.queues}
        for w in snapshot.admitted:
            info = AdmittedInfo(w, len(self.infos), self.tree.queues[w.queue], self.table)
            self.infos.append(info)
            target = self.evicted_by_cq if w.evicted else self.by_cq
            target[w.queue].append(info)
        for lst in (*self.by_cq.values(), *self.evicted_by_cq.values()):
            lst.sort(key=lambda i: i.key)
        self.queue_ids = {name: k for k, name in enumerate(self.tree.queues)}
        self._pod_arrays: PodArrays | None = None
        self.removed = np.zeros(len(self.infos), dtype=bool)

    def flavor(self, name: str) -> Flavor:
        f = self.flavors.get(name)
        if f is None:
            f = self.flavors[name] = Flavor(name)
        return f

    def pod_arrays(self) -> PodArrays:
        if self._pod_arrays is None:
            assert self.table is not None
            self._pod_arrays = PodArrays(self.infos, self.queue_ids, self.table)
        return self._pod_arrays

    def candidates_of(self, cq: str, evicted: bool) -> list[AdmittedInfo]:
        return (self.evicted_by_cq if evicted else self.by_cq)[cq]

    def all_candidates(self, cq: str) -> Iterator[AdmittedInfo]:
        yield from self.evicted_by_cq[cq]
        yield from self.by_cq[cq]

    # -- simulated eviction ---------------------------------------------------------------

    def remove(self, info: AdmittedInfo) -> None:
        """Take a workload's quota and pods out (a victim, simulated or final)."""
        self._apply(info, -1)

    def restore(self, info: AdmittedInfo) -> None:
        """Undo :meth:`remove`."""
        self._apply(info, 1)

    def _apply(self, info: AdmittedInfo, sign: int) -> None:
        self.tree.add_usages(info.cq, info.usage, sign)
        if self.table is not None:
            charge = self.table.bind if sign > 0 else self.table.unbind
            for node, cols, vals, devices, milli, tag in info.pods:
                charge(node, cols, vals, devices, milli, tag)
        info.removed = sign < 0
        self.removed[info.index] = sign < 0

    def forget(self, info: AdmittedInfo) -> None:
        """Drop a removed workload from the candidate index (it was preempted for good)."""
        lst = self.candidates_of(info.cq.name, info.wl.evicted)
        lst.remove(info)

    def add_candidate(self, info: AdmittedInfo) -> None:
        insort(self.candidates_of(info.cq.name, info.wl.evicted), info, key=lambda i: i.key)


def _typical_from(snapshot: Snapshot) -> tuple[TypicalPod, ...]:
    """The snapshot's own pods as the typical pod set (for fgd without a given one)."""
    shapes = []
    for w in snapshot.pending:
        for ps in w.pod_sets:
            shape = (ps.requests.get(CPU, 0), ps.gpu_milli if ps.gpus else 0, ps.gpus, ps.gpu_models)
            shapes.extend([shape] * ps.count)
    for a in snapshot.admitted:
        for aps in a.pod_sets:
            shape = (aps.requests.get(CPU, 0), aps.gpu_milli if aps.gpus else 0, aps.gpus, ())
            shapes.extend([shape] * aps.count)
    return typical_pods(shapes)
