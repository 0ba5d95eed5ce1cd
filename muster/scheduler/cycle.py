"""The working state of one cycle: quota tree, node table copy, placer, admitted index.

Everything :func:`~muster.scheduler.schedule` changes lives here, on copies: the quota tree
is built from the snapshot, the node table is copied, and admitted workloads are indexed
per queue in preemption-candidate order. Removing a workload (a preemption victim being
simulated) takes its usage out of the tree and its pods off the nodes; restoring puts
them back, so simulations leave no trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from muster.scheduler.decisions import Decisions, as_table
from muster.scheduler.namespaces import NamespaceLedger
from muster.scheduler.nodes import NodeTable, gpu_tag
from muster.scheduler.ordering import candidate_key
from muster.scheduler.placement.fragmentation import typical_pods
from muster.scheduler.placement.gang import Placer
from muster.scheduler.policy import Policy, TypicalPod
from muster.scheduler.quota import FR, QuotaNode, QuotaTree, workload_usage
from muster.scheduler.snapshot import CPU, AdmittedWorkload, Flavor, Snapshot, SnapshotError

__all__ = ["AdmittedInfo", "Bucket", "Cycle", "VictimIndex"]


class AdmittedInfo:
    """An admitted workload as the cycle sees it: its queue node, usage and bound pods."""

    __slots__ = ("_pods", "_table", "cq", "frs", "index", "key", "removed", "usage", "wl")

    def __init__(self, wl: AdmittedWorkload, index: int, cq: QuotaNode, table: NodeTable | None) -> None:
        self.wl = wl
        self.index = index
        self.cq = cq
        self.usage: dict[FR, int] = workload_usage(wl.pod_sets)
        self.frs = frozenset(self.usage)
        self.key = candidate_key(wl)
        self.removed = False
        self._table = table
        self._pods: list[tuple[int, np.ndarray, np.ndarray, tuple[int, ...], int, int]] | None = None
        if table is None:
            return
        index_of = table.index
        for ps in wl.pod_sets:
            for pod in ps.pods:
                if pod.node not in index_of:
                    raise SnapshotError(
                        f"admitted workload {wl.namespace}/{wl.name}: unknown node {pod.node}"
                    )

    @property
    def pods(self) -> list[tuple[int, np.ndarray, np.ndarray, tuple[int, ...], int, int]]:
        """(node, cols, vals, devices, milli, tag) per bound pod. Built on first use: only
        cycles that look for victims or evict need it, and most cycles do neither."""
        if self._pods is None:
            self._pods = []
            table = self._table
            if table is not None:
                for ps in self.wl.pod_sets:
                    cols, vals, _ = table.request_columns(ps.requests)
                    for pod in ps.pods:
                        milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                        tag = gpu_tag(len(pod.gpus), milli)
                        self._pods.append((table.index[pod.node], cols, vals, pod.gpus, milli, tag))
        return self._pods

    def uses(self, frs: frozenset[FR] | set[FR]) -> bool:
        return not self.frs.isdisjoint(frs)


class Bucket:
    """Pods of admitted workloads sharing queue, priority, preemptibility and
    flavor-resources, summed per node: what evicting all of them would free."""

    __slots__ = ("count", "cq", "dev", "frs", "preemptible", "priority", "res")

    def __init__(self, key: tuple, n: int, nres: int, g: int) -> None:
        self.cq, self.priority, self.preemptible, self.frs = key
        self.count = np.zeros(n, dtype=np.int64)
        self.res = np.zeros((n, nres), dtype=np.int64)
        self.dev = np.zeros((n, g), dtype=np.int64)


class VictimIndex:
    """Where admitted workloads run, for preemption's node phase: per node the workloads
    on it, and :class:`Bucket` sums kept current as workloads are removed and restored."""

    __slots__ = ("_delta", "_infos", "bucket_of", "buckets", "node_infos", "table")

    def __init__(self, infos: list[AdmittedInfo], table: NodeTable) -> None:
        self.table = table
        n, nres, g = len(table), len(table.resources), table.gpu_free.shape[1]
        self.node_infos: list[list[AdmittedInfo]] = [[] for _ in range(n)]
        self.buckets: dict[tuple, Bucket] = {}
        self.bucket_of: list[Bucket] = []
        self._delta: dict[int, int] = {}  # info index -> net sign not yet in the sums
        for info in infos:
            w = info.wl
            key = (info.cq.name, w.priority, w.preemptible, info.frs)
            b = self.buckets.get(key)
            if b is None:
                b = self.buckets[key] = Bucket(key, n, nres, g)
            self.bucket_of.append(b)
            for node in dict.fromkeys(p[0] for p in info.pods):
                self.node_infos[node].append(info)
            if not info.removed:
                self._apply(info, 1)
        self._infos = infos

    def update(self, info: AdmittedInfo, sign: int) -> None:
        """Record a removal (-1) or restore (+1); sums catch up lazily, so the
        remove/restore pairs of fill-back cost nothing."""
        net = self._delta.get(info.index, 0) + sign
        if net:
            self._delta[info.index] = net
        else:
            self._delta.pop(info.index, None)

    def _flush(self) -> None:
        for index, sign in self._delta.items():
            self._apply(self._infos[index], sign)
        self._delta.clear()

    def _apply(self, info: AdmittedInfo, sign: int) -> None:
        b = self.bucket_of[info.index]
        for node, cols, vals, devices, milli, _tag in info.pods:
            b.count[node] += sign
            if len(cols):
                b.res[node, cols] += sign * vals
            if devices:
                b.dev[node, list(devices)] += sign * milli

    def aggregate(
        self, ok: Callable[[Bucket], bool], cols: np.ndarray, gpus: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per node, over the buckets ``ok`` accepts: pods, freed resources in ``cols``,
        freed milli per device, and the highest priority among them (min int if none)."""
        self._flush()
        n = len(self.table)
        count = np.zeros(n, dtype=np.int64)
        res = np.zeros((n, len(cols)), dtype=np.int64)
        dev = np.zeros_like(self.table.gpu_free) if gpus else None
        top = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        for b in self.buckets.values():
            if not ok(b):
                continue
            count += b.count
            if len(cols):
                res += b.res[:, cols]
            if dev is not None:
                dev += b.dev
            top = np.where(b.count > 0, np.maximum(top, b.priority), top)
        return count, res, dev, top  # type: ignore[return-value]


class Cycle:
    """Mutable state of one scheduling cycle."""

    def __init__(self, snapshot: Snapshot, policy: Policy) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.fair = policy.fair_sharing
        self.flavors: dict[str, Flavor] = {f.name: f for f in snapshot.flavors}
        self.tree = QuotaTree(snapshot, with_admitted=False)
        self.rng = np.random.default_rng(policy.seed)
        self.decisions = Decisions()
        self.namespaces = NamespaceLedger(snapshot)
        self.table: NodeTable | None = None
        self.placer: Placer | None = None
        if snapshot.nodes is not None:
            self.table = as_table(snapshot.nodes).copy()
            typical = policy.typical_pods
            if policy.placement == "fgd" and not typical:
                typical = _typical_from(snapshot)
            self.placer = Placer(self.table, policy, self.rng, typical)
        self.infos: list[AdmittedInfo] = []
        self.by_cq: dict[str, list[AdmittedInfo]] = {name: [] for name in self.tree.queues}
        self.evicted_by_cq: dict[str, list[AdmittedInfo]] = {name: [] for name in self.tree.queues}
        # Usage is summed per queue and charged to the tree once per queue: adding to an
        # empty tree telescopes (what passes a node's local quota upwards depends only on
        # the total), so this equals charging each workload, at a fraction of the walks.
        queue_usage: dict[str, dict[FR, int]] = {}
        for w in snapshot.admitted:
            node = self.tree.queues.get(w.queue)
            if node is None:
                raise SnapshotError(
                    f"admitted workload {w.namespace}/{w.name}: unknown cluster queue {w.queue}"
                )
            info = AdmittedInfo(w, len(self.infos), node, self.table)
            total = queue_usage.setdefault(w.queue, {})
            for fr, v in info.usage.items():
                total[fr] = total.get(fr, 0) + v
            self.infos.append(info)
            target = self.evicted_by_cq if w.evicted else self.by_cq
            target[w.queue].append(info)
        for name, usage in queue_usage.items():
            self.tree.add_usages(self.tree.queues[name], usage)
        for lst in (*self.by_cq.values(), *self.evicted_by_cq.values()):
            lst.sort(key=lambda i: i.key)
        self._victims: VictimIndex | None = None

    def flavor(self, name: str) -> Flavor:
        f = self.flavors.get(name)
        if f is None:
            f = self.flavors[name] = Flavor(name)
        return f

    def victims(self) -> VictimIndex:
        """The node-phase index of admitted workloads (built on first use)."""
        if self._victims is None:
            assert self.table is not None
            self._victims = VictimIndex(self.infos, self.table)
        return self._victims

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
        if self._victims is not None:
            self._victims.update(info, sign)


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
