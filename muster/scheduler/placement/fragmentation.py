"""GPU fragmentation (Weng et al., ATC'23, the simulator's ``frag.go``) and the typical pod set.

For a node ``n`` and a typical pod ``m`` (frequency ``p_m``):

* ``m`` is CPU-only, or ``n``'s GPU model is not allowed for ``m``, or ``n`` cannot host
  ``m``'s GPUs: all of ``n``'s idle milli-GPU counts as fragmented;
* ``n`` can host ``m``'s GPUs but lacks CPU for it: all idle milli-GPU counts;
* ``n`` fits ``m`` entirely: the free milli of the devices with less free than ``m``'s
  ``gpu_milli`` counts.

``F(n) = Σ_m p_m·frag_m(n)``. :class:`FragModel` computes F for many nodes at once and,
for a pod being placed, F after placing it on each candidate device (closed form: only the
chosen device and the node's CPU change), which is what FGD's score needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from muster.scheduler.nodes import NodeTable
from muster.scheduler.policy import TypicalPod
from muster.scheduler.snapshot import CPU, GPU_MILLI

__all__ = ["FragModel", "cluster_fragmentation", "typical_pods"]

PodShape = tuple[int, int, int, tuple[str, ...]]  # cpu milli, gpu milli per GPU, GPUs, models


def typical_pods(pods: Iterable[PodShape], coverage: float = 0.95) -> tuple[TypicalPod, ...]:
    """The FGD simulator's typical pod set: group pods by (cpu, gpu milli, GPUs, models),
    take the most frequent groups until they cover ``coverage`` of the pods, renormalise.

    Ties in frequency go to the larger shape first, as the simulator's reverse sort does.
    A CPU-only pod is ``(cpu, 0, 0, ())``.
    """
    counts: dict[PodShape, int] = {}
    total = 0
    for cpu, milli, gpus, models in pods:
        key = (int(cpu), int(milli) if gpus else 0, int(gpus), tuple(models))
        counts[key] = counts.get(key, 0) + 1
        total += 1
    if not total:
        return ()
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][:3], "|".join(kv[0][3])), reverse=True)
    chosen, cum = [], 0
    for key, n in ordered:
        if cum >= coverage * total:
            break
        chosen.append((key, n))
        cum += n
    return tuple(
        TypicalPod(cpu_milli=k[0], gpu_milli=k[1], gpus=k[2], frequency=n / cum, gpu_models=k[3])
        for k, n in chosen
    )


class FragModel:
    """Vectorised fragmentation of nodes against one typical pod set."""

    def __init__(self, table: NodeTable, typical: Sequence[TypicalPod]) -> None:
        self.cpu_col = table.resource_col(CPU)
        self.tc = np.array([t.cpu_milli for t in typical], dtype=np.int64)
        self.tg = np.array([t.gpu_milli if t.gpus else 0 for t in typical], dtype=np.int64)
        self.tk = np.array([t.gpus for t in typical], dtype=np.int64)
        self.tp = np.array([t.frequency for t in typical], dtype=np.float64)
        # accessible[model id, m]: the node's GPU model is allowed for typical pod m
        self.accessible = np.array(
            [
                [(not t.gpu_models) or (bool(model) and model in t.gpu_models) for t in typical]
                for model in table.models
            ],
            dtype=bool,
        ).reshape(len(table.models), len(typical))
        self.gpu_pod = self.tk > 0

    def cpu_left(self, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        if self.cpu_col < 0:
            return np.zeros(len(idx), dtype=np.int64)
        return table.free[idx, self.cpu_col]

    def frag(self, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """F(n) for the nodes ``idx`` as they are now."""
        free = table.gpu_free[idx]
        return self._frag(free, table.free_milli[idx], self.cpu_left(table, idx), table.model_ids[idx])

    def frag_after_whole(self, table: NodeTable, idx: np.ndarray, cpu: int, gpus: int) -> np.ndarray:
        """F(n) after a pod with ``cpu`` and ``gpus`` whole GPUs lands on each node."""
        free = table.gpu_free[idx].copy()
        if gpus:
            # the pod takes the lowest-indexed fully free devices
            full = free == GPU_MILLI
            take = full & (np.cumsum(full, axis=1) <= gpus)
            free[take] = 0
        total = table.free_milli[idx] - gpus * GPU_MILLI
        return self._frag(free, total, self.cpu_left(table, idx) - cpu, table.model_ids[idx])

    def frag_after_share(
        self, table: NodeTable, idx: np.ndarray, cpu: int, milli: np.ndarray | int
    ) -> np.ndarray:
        """F(n) after a share of ``milli`` lands on each device of each node: shape
        (len(idx), G), +inf where the device cannot take it."""
        free = table.gpu_free[idx]  # (n, G)
        g = np.asarray(milli, dtype=np.int64)
        g_nodes = g.reshape(-1, 1) if g.ndim else g
        tg = self.tg[None, None, :]
        fc = np.where(free > 0, free, 0)
        ge = free[:, None, :] >= self.tg[None, :, None]  # (n, M, G)
        base_ge = ge.sum(axis=2)
        base_lt = (fc[:, None, :] * (free[:, None, :] < self.tg[None, :, None])).sum(axis=2)
        new = free - g_nodes  # (n, G)
        old3 = free[:, :, None]
        new3 = new[:, :, None]
        count_ge = base_ge[:, None, :] - (old3 >= tg) + (new3 >= tg)  # (n, G, M)
        old_lt = np.where(old3 > 0, old3, 0) * (old3 < tg)
        new_lt = np.where(new3 > 0, new3, 0) * (new3 < tg)
        sum_lt = base_lt[:, None, :] - old_lt + new_lt
        total = (table.free_milli[idx] - (g_nodes.ravel() if g.ndim else g))[:, None, None]
        cpu_after = (self.cpu_left(table, idx) - cpu)[:, None, None]
        acc = self.accessible[table.model_ids[idx]][:, None, :]
        q3 = (
            self.gpu_pod[None, None, :]
            & acc
            & (count_ge >= self.tk[None, None, :])
            & (cpu_after >= self.tc[None, None, :])
        )
        frag = np.where(q3, sum_lt, total) @ self.tp  # (n, G)
        return np.where(new >= 0, frag, np.inf) if free.shape[1] else frag

    def _frag(
        self, free: np.ndarray, total: np.ndarray, cpu_left: np.ndarray, models: np.ndarray
    ) -> np.ndarray:
        tg = self.tg[None, :, None]
        f3 = free[:, None, :]
        count_ge = (f3 >= tg).sum(axis=2)  # (n, M)
        sum_lt = (np.where(f3 > 0, f3, 0) * (f3 < tg)).sum(axis=2)
        q3 = (
            self.gpu_pod[None, :]
            & self.accessible[models]
            & (count_ge >= self.tk[None, :])
            & (cpu_left[:, None] >= self.tc[None, :])
        )
        return np.where(q3, sum_lt, total[:, None]) @ self.tp


def cluster_fragmentation(table: NodeTable, typical: Sequence[TypicalPod]) -> tuple[float, float]:
    """Cluster-wide fragmented milli-GPU (Σ_n F(n)) and idle milli-GPU, as the simulator's
    ``ClusterGpuFragReport`` logs them (frag ratio = first / second)."""
    if not len(table):
        return 0.0, 0.0
    model = FragModel(table, typical)
    idx = np.arange(len(table))
    return float(model.frag(table, idx).sum()), float(table.free_milli.sum())
