"""The cluster's nodes as NumPy arrays, the form placement filters and scores work on.

A :class:`NodeTable` is built once from :class:`~muster.scheduler.snapshot.Node` objects
(:meth:`NodeTable.from_nodes`) and then only copied and mutated by binding and unbinding
pods. Static facts (allocatable, labels, taints, GPU model) are shared between copies;
mutable ones (free resources, per-device free milli-GPU and the aggregates derived from
them) are copied. Every bind/unbind appends the node index to :attr:`NodeTable.log`, so
caches can recompute only the nodes that changed since they last looked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from muster.scheduler.snapshot import GPU, GPU_MILLI, Node, SnapshotError, Taint

__all__ = ["GPU_TAGS", "NodeTable", "gpu_tag"]

GPU_TAGS = 10  # pod classes for gpu-clustering: 0 = share, k = k whole GPUs, 9 = more than 8


def gpu_tag(gpus: int, milli: int) -> int:
    """The GPU-affinity class of a pod (gpu-clustering groups pods by it); -1 for no GPU."""
    if gpus <= 0:
        return -1
    if milli < GPU_MILLI:
        return 0
    return min(gpus, GPU_TAGS - 1)


class NodeTable:
    """Nodes as arrays. ``N`` nodes, ``R`` resources (no GPUs), ``G`` = most devices on a node.

    Arrays: ``alloc``/``free`` (N, R) units; ``gpu_free`` (N, G) free milli per device, -1
    where a node has no such device or it is unhealthy; ``gpu_total`` usable devices;
    ``model_ids`` index into ``models`` ("" = no GPU); ``gpu_replicas`` time-slicing
    replicas per device (1: not shared); ``schedulable`` ready and not cordoned. Derived and
    kept current: ``full_free`` (devices fully free), ``max_free`` (largest free milli on one
    device), ``free_milli`` (sum of free milli), ``gpu_tags`` (N, GPU_TAGS) pods per GPU class.
    """

    __slots__ = (
        "_col_cache",
        "_label_cache",
        "alloc",
        "free",
        "free_milli",
        "full_free",
        "gpu_free",
        "gpu_memory",
        "gpu_replicas",
        "gpu_tags",
        "gpu_total",
        "index",
        "labels",
        "log",
        "max_free",
        "model_ids",
        "models",
        "names",
        "res_index",
        "resources",
        "schedulable",
        "taint_group",
        "taint_sets",
    )

    def __init__(self) -> None:  # use from_nodes / copy
        self.log: list[int] = []

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node], extra_resources: Iterable[str] = ()) -> NodeTable:
        """Build the arrays. ``extra_resources`` adds columns no node lists (requests for
        them then fit nowhere, with a clear reason instead of a KeyError)."""
        t = cls()
        n = len(nodes)
        t.names = [nd.name for nd in nodes]
        t.index = {name: i for i, name in enumerate(t.names)}
        if len(t.index) != n:
            raise SnapshotError("node names must be unique")
        resources: dict[str, None] = {}
        for nd in nodes:
            for r in nd.allocatable:
                if r != GPU:
                    resources.setdefault(r)
        for r in extra_resources:
            if r != GPU:
                resources.setdefault(r)
        t.resources = list(resources)
        t.res_index = {r: i for i, r in enumerate(t.resources)}
        nr = len(t.resources)
        alloc = np.zeros((n, nr), dtype=np.int64)
        used = np.zeros((n, nr), dtype=np.int64)
        g = max((nd.gpus for nd in nodes), default=0)
        gpu_free = np.full((n, g), -1, dtype=np.int64)
        models: dict[str, int] = {"": 0}
        model_ids = np.zeros(n, dtype=np.int32)
        gpu_memory = np.zeros(n, dtype=np.int64)
        gpu_replicas = np.ones(n, dtype=np.int64)
        schedulable = np.ones(n, dtype=bool)
        taint_sets: dict[tuple[Taint, ...], int] = {}
        taint_group = np.zeros(n, dtype=np.int32)
        for i, nd in enumerate(nodes):
            for r, v in nd.allocatable.items():
                if r != GPU:
                    alloc[i, t.res_index[r]] = v
            for r, v in nd.used.items():
                if r != GPU:
                    if r not in t.res_index:
                        raise SnapshotError(f"node {nd.name}: uses {r} it does not have")
                    used[i, t.res_index[r]] = v
            if nd.gpus:
                free = list(nd.gpu_free) if nd.gpu_free else [GPU_MILLI] * nd.gpus
                healthy = list(nd.gpu_healthy) if nd.gpu_healthy else [True] * nd.gpus
                if len(free) != nd.gpus or len(healthy) != nd.gpus:
                    raise SnapshotError(f"node {nd.name}: gpu_free/gpu_healthy must list {nd.gpus} devices")
                for d in range(nd.gpus):
                    gpu_free[i, d] = free[d] if healthy[d] else -1
                model_ids[i] = models.setdefault(nd.gpu_model, len(models))
                gpu_memory[i] = nd.gpu_memory
                gpu_replicas[i] = max(1, min(nd.gpu_replicas, GPU_MILLI))
            schedulable[i] = nd.ready and not nd.unschedulable
            taint_group[i] = taint_sets.setdefault(tuple(nd.taints), len(taint_sets))
        t.alloc = alloc
        t.free = alloc - used
        t.gpu_free = gpu_free
        t.gpu_total = (gpu_free >= 0).sum(axis=1).astype(np.int64)
        t.models = list(models)
        t.model_ids = model_ids
        t.gpu_memory = gpu_memory
        t.gpu_replicas = gpu_replicas
        t.schedulable = schedulable
        t.labels = [nd.labels for nd in nodes]
        t.taint_sets = list(taint_sets)
        t.taint_group = taint_group
        t.gpu_tags = np.zeros((n, GPU_TAGS), dtype=np.int32)
        t._label_cache = {}
        t._col_cache = {}
        t._derive_all()
        return t

    def copy(self) -> NodeTable:
        """A copy whose free capacity can change without touching this one."""
        t = NodeTable()
        for name in self.__slots__:
            if name != "log":
                setattr(t, name, getattr(self, name))
        t.free = self.free.copy()
        t.gpu_free = self.gpu_free.copy()
        t.full_free = self.full_free.copy()
        t.max_free = self.max_free.copy()
        t.free_milli = self.free_milli.copy()
        t.gpu_tags = self.gpu_tags.copy()
        return t

    def __len__(self) -> int:
        return len(self.names)

    # -- lookups --------------------------------------------------------------------------

    def label_codes(self, key: str) -> tuple[np.ndarray, dict[str, int]]:
        """Per-node code of label ``key`` (-1 where absent) and the value -> code map."""
        hit = self._label_cache.get(key)
        if hit is None:
            vocab: dict[str, int] = {}
            codes = np.fromiter(
                (vocab.setdefault(lb[key], len(vocab)) if key in lb else -1 for lb in self.labels),
                dtype=np.int32,
                count=len(self.labels),
            )
            hit = (codes, vocab)
            self._label_cache[key] = hit
        return hit

    def resource_col(self, resource: str) -> int:
        """Column of ``resource``, or -1 when no node has it."""
        return self.res_index.get(resource, -1)

    def request_columns(self, requests: dict[str, int]) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """Columns and amounts of a pod's non-zero requests (GPUs excluded), and the
        requested resources no node has."""
        key = tuple(requests.items())
        hit = self._col_cache.get(key)
        if hit is None:
            items = [(self.res_index[r], v) for r, v in key if v and r != GPU and r in self.res_index]
            missing = tuple(r for r, v in key if v and r != GPU and r not in self.res_index)
            cols = np.array([c for c, _ in items], dtype=np.intp)
            vals = np.array([v for _, v in items], dtype=np.int64)
            hit = self._col_cache[key] = (cols, vals, missing)
        return hit

    # -- mutation -------------------------------------------------------------------------

    def bind(
        self, node: int, cols: np.ndarray, vals: np.ndarray, devices: Sequence[int], milli: int, tag: int
    ) -> None:
        """Charge one pod to ``node``: resources ``vals`` in columns ``cols``, ``milli`` on
        each device in ``devices``, and its GPU class ``tag`` (-1: none)."""
        self._charge(node, cols, vals, devices, milli, tag, 1)

    def unbind(
        self, node: int, cols: np.ndarray, vals: np.ndarray, devices: Sequence[int], milli: int, tag: int
    ) -> None:
        """Undo :meth:`bind` (a pod finished, was preempted, or a trial placement is dropped)."""
        self._charge(node, cols, vals, devices, milli, tag, -1)

    def _charge(
        self,
        node: int,
        cols: np.ndarray,
        vals: np.ndarray,
        devices: Sequence[int],
        milli: int,
        tag: int,
        sign: int,
    ) -> None:
        if len(cols):
            self.free[node, cols] -= sign * vals
        if devices:
            self.gpu_free[node, list(devices)] -= sign * milli
            self._derive(node)
        if tag >= 0:
            self.gpu_tags[node, tag] += sign
        self.log.append(node)

    # -- derived arrays -------------------------------------------------------------------

    def _derive_all(self) -> None:
        gf = self.gpu_free
        self.full_free = (gf == GPU_MILLI).sum(axis=1).astype(np.int64)
        self.max_free = gf.max(axis=1) if gf.shape[1] else np.full(len(self.names), -1, dtype=np.int64)
        self.free_milli = np.where(gf > 0, gf, 0).sum(axis=1).astype(np.int64)

    def _derive(self, node: int) -> None:
        row = self.gpu_free[node].tolist()
        self.full_free[node] = row.count(GPU_MILLI)
        self.max_free[node] = max(row)
        self.free_milli[node] = sum(v for v in row if v > 0)
