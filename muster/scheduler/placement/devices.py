"""Which GPU devices of the chosen node a pod gets.

Whole-GPU pods take the lowest-indexed fully free devices (as the FGD simulator's
``AllocateExclusiveGpuId``). A share (one device, less than 1000 milli, or sized by GPU
memory) follows the policy's device rule: ``fgd`` the device with the best FGD score
(lowest index on ties), ``random`` a seeded random fitting device, ``spread`` the fitting
device with the most free (worst fit), every other policy the fitting device with the
least free (best fit), lowest index on ties.
"""

from __future__ import annotations

import numpy as np

from muster.scheduler.nodes import NodeTable
from muster.scheduler.placement.filters import PodSpec
from muster.scheduler.placement.scores import ScoreContext, fgd_share_scores
from muster.scheduler.snapshot import GPU_MILLI

__all__ = ["choose_devices"]


def choose_devices(
    table: NodeTable, node: int, spec: PodSpec, ctx: ScoreContext, rng: np.random.Generator
) -> tuple[tuple[int, ...], int]:
    """Device indices for one pod of ``spec`` on ``node`` and the milli taken on each;
    ``((), 0)`` for a pod without GPUs."""
    if not spec.gpus:
        return (), 0
    row = table.gpu_free[node]
    if not spec.is_share:
        free = np.flatnonzero(row == GPU_MILLI)[: spec.gpus]
        return tuple(int(d) for d in free), GPU_MILLI
    milli = int(np.asarray(spec.node_milli(table, np.array([node]))).reshape(-1)[0])
    fits = np.flatnonzero(row >= milli)
    policy = ctx.policy.placement
    if policy == "fgd":
        scores = fgd_share_scores(table, np.array([node]), spec, ctx)[0]
        return (int(np.argmax(scores)),), milli
    if policy == "random":
        return (int(fits[rng.integers(len(fits))]),), milli
    free = row[fits]
    pick = np.argmax(free) if policy == "spread" else np.argmin(free)
    return (int(fits[pick]),), milli
