"""Node scores of the named placement policies; the highest score wins, ties go to the
node first in a seeded order (see :mod:`.gang`).

``binpack`` and ``spread`` (DESIGN §5) average, over the resources the pod asks for (GPUs
as milli-GPU of the node's usable devices), the allocated fraction after placing it
(binpack: highest wins) or the free fraction left (spread: highest wins).

The six policies of the FGD paper follow the simulator of Weng et al. (reference/perf.md
§2.1), including its integer truncations, since those create the ties its results depend
on. ``cpu`` means the node's free milli-CPU; GPU totals are free milli-GPU summed over
devices; ``MAXC``/``MAXG`` are the policy's max spec (128 cores, 8 GPUs):

* ``random``: every feasible node scores 0 (a uniform seeded choice).
* ``dotprod``: ⌊100·(1 − (cpu/MAXC·req_cpu/MAXC + gpu/MAXG·req_gpu/MAXG)/2)⌋.
* ``gpu-clustering``: 25·(MAXG − gpu)/MAXG (integer) plus 75 when the node only hosts pods
  of the pod's GPU class, 50 when it hosts that class among others, 25 when it hosts no GPU
  pod, 0 otherwise; CPU-only pods score 0.
* ``gpu-packing``: a share fitting on an already shared device scores
  100 − ⌊⌊free·100/1000⌋/10⌋ (at least 50); needing fully free devices on a used node
  max(50 − devices used, 33); on an idle node max(33 − free devices, free devices).
* ``bestfit``: ⌊100·(1 − Σ_{cpu,gpu} 0.5·(free − req)/max)⌋.
* ``fgd``: ⌊100·sigmoid((F_before − F_after)/1000)⌋ with F the node's fragmentation against
  the typical pod set; a share tries every device and keeps the best.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from muster.scheduler.nodes import NodeTable
from muster.scheduler.placement.filters import PodSpec
from muster.scheduler.placement.fragmentation import FragModel
from muster.scheduler.policy import Policy
from muster.scheduler.snapshot import CPU, GPU_MILLI

__all__ = ["SCORERS", "ScoreContext", "fgd_share_scores", "sigmoid_score"]


class ScoreContext:
    """What scores need besides the node table: the policy and, for fgd, the frag model
    with a per-node cache of F before placement."""

    __slots__ = ("_inverse", "frag", "frag_cache", "frag_pos", "policy")

    def __init__(self, policy: Policy, frag: FragModel | None) -> None:
        self.policy = policy
        self.frag = frag
        self.frag_cache: np.ndarray | None = None
        self.frag_pos = 0
        self._inverse: tuple[np.ndarray, np.ndarray] | None = None

    def inverse_capacity(self, table: NodeTable) -> tuple[np.ndarray, np.ndarray]:
        """1/allocatable per node and resource and 1/GPU milli capacity (0 where none)."""
        if self._inverse is None:
            alloc = table.alloc.astype(np.float64)
            gpu = (table.gpu_total * GPU_MILLI).astype(np.float64)
            with np.errstate(divide="ignore"):
                self._inverse = (
                    np.where(alloc > 0, 1.0 / np.where(alloc > 0, alloc, 1), 0.0),
                    np.where(gpu > 0, 1.0 / np.where(gpu > 0, gpu, 1), 0.0),
                )
        return self._inverse

    def frag_before(self, table: NodeTable, idx: np.ndarray) -> np.ndarray:
        """F(n) now, kept current from the table's change log."""
        assert self.frag is not None
        if self.frag_cache is None or len(self.frag_cache) != len(table):
            self.frag_cache = self.frag.frag(table, np.arange(len(table)))
        elif self.frag_pos < len(table.log):
            changed = np.unique(np.asarray(table.log[self.frag_pos :], dtype=np.intp))
            self.frag_cache[changed] = self.frag.frag(table, changed)
        self.frag_pos = len(table.log)
        return self.frag_cache[idx]


def _cpu(table: NodeTable, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = table.resource_col(CPU)
    if c < 0:
        z = np.zeros(len(idx), dtype=np.int64)
        return z, z
    return table.free[idx, c], table.alloc[idx, c]


def _pod_gpu(spec: PodSpec, table: NodeTable, idx: np.ndarray) -> np.ndarray | int:
    return spec.gpus * spec.node_milli(table, idx) if spec.gpus else 0


def binpack(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    return _mean_fraction(table, idx, spec, ctx, allocated=True)


def spread(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    return _mean_fraction(table, idx, spec, ctx, allocated=False)


def _mean_fraction(
    table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext, allocated: bool
) -> np.ndarray:
    """Mean, over the resources the pod asks for, of the fraction free after placing it
    (spread), or allocated after placing it (binpack)."""
    parts = len(spec.cols) + (1 if spec.gpus else 0)
    if not parts:
        return np.zeros(len(idx))
    inv_alloc, inv_gpu = ctx.inverse_capacity(table)
    free = 0.0
    if len(spec.cols):
        sub = np.ix_(idx, spec.cols)
        free = ((table.free[sub] - spec.vals) * inv_alloc[sub]).sum(axis=1)
    if spec.gpus:
        free = free + (table.free_milli[idx] - _pod_gpu(spec, table, idx)) * inv_gpu[idx]
    mean_free = free / parts
    return 1.0 - mean_free if allocated else mean_free


def random_score(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    return np.zeros(len(idx))


def dotprod(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    maxc, maxg = ctx.policy.max_spec_cpu, ctx.policy.max_spec_gpus * GPU_MILLI
    cpu_left, _ = _cpu(table, idx)
    req_cpu = spec.pod_set.requests.get(CPU, 0)
    dot = (cpu_left / maxc) * (req_cpu / maxc) + (table.free_milli[idx] / maxg) * (
        _pod_gpu(spec, table, idx) / maxg
    )
    return np.floor(100 * (1 - dot / 2))


def bestfit(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    maxc, maxg = ctx.policy.max_spec_cpu, ctx.policy.max_spec_gpus * GPU_MILLI
    cpu_left, _ = _cpu(table, idx)
    req_cpu = spec.pod_set.requests.get(CPU, 0)
    s = (cpu_left - req_cpu) / maxc * 0.5 + (table.free_milli[idx] - _pod_gpu(spec, table, idx)) / maxg * 0.5
    return np.floor((1.0 - s) * 100)


def gpu_clustering(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    if not spec.gpus:
        return np.zeros(len(idx))
    maxg = ctx.policy.max_spec_gpus * GPU_MILLI
    base = np.trunc(25 * (maxg - table.free_milli[idx]) / maxg)
    tags = table.gpu_tags[idx]
    same = tags[:, spec.tag] > 0
    kinds = (tags > 0).sum(axis=1)
    bonus = np.where(same, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
    return base + bonus


def gpu_packing(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    if not spec.gpus:
        return np.zeros(len(idx))
    full = table.full_free[idx]
    idle = full == table.gpu_total[idx]
    idle_score = np.maximum(33 - full, full)
    if spec.is_share:
        milli = spec.node_milli(table, idx)
        free = table.gpu_free[idx]
        fits = free >= np.asarray(milli).reshape(-1, 1) if np.ndim(milli) else free >= milli
        tightest = np.where(fits, free, GPU_MILLI + 1).min(axis=1)
        shared = np.maximum(100 - (tightest * 100 // GPU_MILLI) // 10, 50)
        used_score = np.where(tightest == GPU_MILLI, 49, shared)
    else:
        used_score = np.full(len(idx), max(50 - spec.gpus, 33))
    return np.where(idle, idle_score, used_score).astype(np.float64)


def sigmoid_score(delta: np.ndarray) -> np.ndarray:
    """⌊100·sigmoid(delta/1000)⌋, FGD's score of a fragmentation decrease."""
    return np.floor(100.0 / (1.0 + np.exp(-delta / 1000.0)))


def fgd_share_scores(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    """Per-device FGD scores of a share on the nodes ``idx``: (len(idx), G), -inf where the
    device cannot take it."""
    assert ctx.frag is not None
    before = ctx.frag_before(table, idx)
    cpu = spec.pod_set.requests.get(CPU, 0)
    after = ctx.frag.frag_after_share(table, idx, cpu, spec.node_milli(table, idx))
    scores = sigmoid_score(before[:, None] - after)
    return np.where(np.isfinite(after), scores, -np.inf)


def fgd(table: NodeTable, idx: np.ndarray, spec: PodSpec, ctx: ScoreContext) -> np.ndarray:
    assert ctx.frag is not None
    if spec.is_share:
        per_device = fgd_share_scores(table, idx, spec, ctx)
        return per_device.max(axis=1) if per_device.shape[1] else np.full(len(idx), -np.inf)
    before = ctx.frag_before(table, idx)
    after = ctx.frag.frag_after_whole(table, idx, spec.pod_set.requests.get(CPU, 0), spec.gpus)
    return sigmoid_score(before - after)


SCORERS: dict[str, Callable[[NodeTable, np.ndarray, PodSpec, ScoreContext], np.ndarray]] = {
    "binpack": binpack,
    "spread": spread,
    "random": random_score,
    "dotprod": dotprod,
    "bestfit": bestfit,
    "gpu-clustering": gpu_clustering,
    "gpu-packing": gpu_packing,
    "fgd": fgd,
}
