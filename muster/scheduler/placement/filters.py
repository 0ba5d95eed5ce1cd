"""Node filters, vectorised over a :class:`~muster.scheduler.nodes.NodeTable`.

A :class:`PodSpec` is one pod set's pod as placement sees it under a flavor choice: its
resource columns, GPU demand and the constraints that decide which nodes may ever take it
(:func:`static_mask`: ready and schedulable, taints tolerated, node selector, required node
affinity, flavor node labels, GPU model list, GPU memory). :func:`dynamic_mask` adds what
changes as pods are bound (free resources and devices). :func:`explain` counts, for a pod
that fits nowhere, why each node refused it, for the reason message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from muster.scheduler.nodes import NodeTable, gpu_tag
from muster.scheduler.snapshot import GPU, GPU_MILLI, Flavor, PodSet, Taint, Toleration, format_units

__all__ = ["PodSpec", "dynamic_mask", "explain", "static_mask"]

_BLOCKING = ("NoSchedule", "NoExecute")


@dataclass(slots=True, eq=False)
class PodSpec:
    """A pod of ``pod_set`` placed under ``flavors`` (the flavors of its resource groups)."""

    pod_set: PodSet
    flavors: tuple[Flavor, ...]
    cols: np.ndarray
    vals: np.ndarray
    missing: tuple[str, ...]
    gpus: int
    milli: int  # per device; for memory-sized shares and time-sliced nodes see node_milli
    tag: int
    key: tuple
    # One whole GPU in a table with time-sliced nodes: a share there (one replica), a whole
    # device elsewhere, so placement treats it as a share sized per node.
    sliced: bool = False

    @classmethod
    def build(cls, table: NodeTable, pod_set: PodSet, flavors: Sequence[Flavor]) -> PodSpec:
        cols, vals, missing = table.request_columns(pod_set.requests)
        milli = pod_set.gpu_milli if pod_set.gpus else 0
        key = (
            tuple(sorted(pod_set.node_selector.items())),
            pod_set.node_affinity,
            pod_set.tolerations,
            tuple(f.name for f in flavors),
            pod_set.gpu_models if pod_set.gpus else (),
            pod_set.gpu_memory if pod_set.gpus else 0,
            pod_set.gpus,
        )
        sliced = (
            pod_set.gpus == 1
            and milli == GPU_MILLI
            and not pod_set.gpu_memory
            and bool(len(table))
            and int(table.gpu_replicas.max()) > 1
        )
        return cls(
            pod_set,
            tuple(flavors),
            cols,
            vals,
            missing,
            pod_set.gpus,
            milli,
            gpu_tag(pod_set.gpus, milli),
            key,
            sliced,
        )

    @property
    def shape_key(self) -> tuple:
        """Everything that decides where this pod fits and how it scores."""
        return (self.key, self.cols.tobytes(), self.vals.tobytes(), self.gpus, self.milli)

    @property
    def is_share(self) -> bool:
        return self.gpus == 1 and (self.milli < GPU_MILLI or self.pod_set.gpu_memory > 0 or self.sliced)

    @property
    def per_node(self) -> bool:
        """Whether the milli taken on a device differs by node (see :meth:`node_milli`)."""
        return self.sliced or (self.gpus > 0 and self.pod_set.gpu_memory > 0)

    def node_milli(self, table: NodeTable, nodes: np.ndarray | None = None) -> np.ndarray | int:
        """Milli-GPU per device on each node: ``milli``, sized by the node's GPU memory, or
        one replica of a time-sliced node's GPU (a whole one elsewhere)."""
        if self.sliced:
            replicas = table.gpu_replicas if nodes is None else table.gpu_replicas[nodes]
            return GPU_MILLI // replicas
        mem = self.pod_set.gpu_memory
        if not mem or not self.gpus:
            return self.milli
        gm = table.gpu_memory if nodes is None else table.gpu_memory[nodes]
        safe = np.where(gm > 0, gm, 1)
        return np.where(gm >= mem, -(-mem * 1000 // safe), GPU_MILLI + 1)

    def describe(self, table: NodeTable) -> str:
        """``4 nvidia.com/gpu, A100, 8 cpu`` for messages."""
        parts = []
        ps = self.pod_set
        if ps.gpus:
            if ps.gpu_memory:
                parts.append(f"{format_units('memory', ps.gpu_memory)} of one GPU")
            elif ps.gpu_milli < GPU_MILLI:
                parts.append(f"{format_units(GPU, ps.gpu_milli)} of one GPU")
            else:
                parts.append(f"{ps.gpus} {GPU}")
            if ps.gpu_models:
                parts.append("|".join(ps.gpu_models))
        for r, v in ps.requests.items():
            if v and r != GPU:
                parts.append(f"{format_units(r, v)} {r}")
        return ", ".join(parts) or "no resources"


def static_mask(table: NodeTable, spec: PodSpec) -> np.ndarray:
    """Nodes that could ever take the pod, whatever runs on them."""
    mask = table.schedulable.copy()
    tolerations = spec.pod_set.tolerations + tuple(t for f in spec.flavors for t in f.tolerations)
    ok_groups = np.array([_tolerated(ts, tolerations) is None for ts in table.taint_sets], dtype=bool)
    if not ok_groups.all():
        mask &= ok_groups[table.taint_group]
    mask &= label_mask(table, spec)
    if spec.gpus:
        mask &= table.gpu_total >= spec.gpus
        if spec.gpus > 1:
            mask &= table.gpu_replicas == 1
        mask &= model_mask(table, spec)
        if spec.pod_set.gpu_memory:
            mask &= table.gpu_memory >= spec.pod_set.gpu_memory
    if spec.missing:
        mask[:] = False
    return mask


def label_mask(table: NodeTable, spec: PodSpec) -> np.ndarray:
    """Nodes whose labels satisfy the flavors' node labels, the node selector and affinity."""
    n = len(table)
    mask = np.ones(n, dtype=bool)
    wanted: dict[str, str] = {}
    for f in spec.flavors:
        wanted.update(f.node_labels)
    wanted.update(spec.pod_set.node_selector)
    for k, v in wanted.items():
        codes, vocab = table.label_codes(k)
        code = vocab.get(v)
        if code is None:
            return np.zeros(n, dtype=bool)
        mask &= codes == code
    terms = spec.pod_set.node_affinity
    if terms:
        ok = np.fromiter((any(t.matches(lb) for t in terms) for lb in table.labels), dtype=bool, count=n)
        mask &= ok
    return mask


def model_mask(table: NodeTable, spec: PodSpec) -> np.ndarray:
    models = spec.pod_set.gpu_models
    if not models:
        return np.ones(len(table), dtype=bool)
    allowed = np.array([m in models for m in table.models], dtype=bool)
    return allowed[table.model_ids]


def dynamic_mask(table: NodeTable, spec: PodSpec, nodes: np.ndarray | None = None) -> np.ndarray:
    """Which nodes (all, or those in ``nodes``) have room for the pod now."""
    if nodes is None:
        mask = np.ones(len(table), dtype=bool)
        for c, v in zip(spec.cols.tolist(), spec.vals.tolist(), strict=True):
            mask &= table.free[:, c] >= v
    elif len(spec.cols):
        mask = (table.free[np.ix_(nodes, spec.cols)] >= spec.vals).all(axis=1)
    else:
        mask = np.ones(len(nodes), dtype=bool)
    if spec.gpus:
        if spec.is_share:
            max_free = table.max_free if nodes is None else table.max_free[nodes]
            mask &= max_free >= spec.node_milli(table, nodes)
        else:
            full = table.full_free if nodes is None else table.full_free[nodes]
            mask &= full >= spec.gpus
    return mask


def explain(
    table: NodeTable, spec: PodSpec, pod_name: str, excluded: np.ndarray | None = None
) -> tuple[str, dict]:
    """Why no node takes the pod: ``0/12 nodes can host pod worker-0 (...): 9 have ...``.

    Each node is counted once, under the first filter it fails, in the order: not ready,
    taint, labels, GPU model, devices missing, already hosting a pod of the gang, each
    resource, free GPUs. Returns the sentence and the counts as details.
    """
    n = len(table)
    left = np.ones(n, dtype=bool)
    counts: dict[str, int] = {}

    def take(bad: np.ndarray, why: str) -> None:
        hit = left & bad
        k = int(hit.sum())
        if k:
            counts[why] = counts.get(why, 0) + k
            left[hit] = False

    take(~table.schedulable, "are not ready or are cordoned")
    tolerations = spec.pod_set.tolerations + tuple(t for f in spec.flavors for t in f.tolerations)
    for gi, ts in enumerate(table.taint_sets):
        taint = _tolerated(ts, tolerations)
        if taint is not None:
            take(table.taint_group == gi, f"have the untolerated taint {taint}")
    wanted = {k: v for f in spec.flavors for k, v in f.node_labels.items()}
    wanted.update(spec.pod_set.node_selector)
    if wanted or spec.pod_set.node_affinity:
        sel = ", ".join(f"{k}={v}" for k, v in wanted.items()) or "the required node affinity"
        take(~label_mask(table, spec), f"do not match {sel}")
    if spec.gpus:
        take(table.gpu_total == 0, "have no usable GPU")
        take(~model_mask(table, spec), f"have a GPU model other than {'|'.join(spec.pod_set.gpu_models)}")
        take(table.gpu_total < spec.gpus, f"have fewer than {spec.gpus} GPUs in all")
        if spec.gpus > 1:
            take(table.gpu_replicas > 1, "time-slice their GPUs (one replica per pod)")
        if spec.pod_set.gpu_memory:
            take(table.gpu_memory < spec.pod_set.gpu_memory, "have GPUs with less memory than asked")
    for r in spec.missing:
        take(np.ones(n, dtype=bool), f"have no {r}")
    if excluded is not None:
        take(excluded, "already host a pod of this gang (anti-affinity)")
    for c, v in zip(spec.cols.tolist(), spec.vals.tolist(), strict=True):
        res = table.resources[c]
        short = left & (table.free[:, c] < v)
        if short.any():
            largest = int(table.free[short, c].max())
            take(short, f"have too little free {res} (most free {format_units(res, max(largest, 0))})")
    details: dict = {"nodes": n, "fit": 0}
    if spec.gpus:
        details.update(_gpu_facts(table, left))
        take(~dynamic_mask(table, spec), _gpu_words(spec, details))
    details["failures"] = counts
    breakdown = ", ".join(f"{k} {why}" for why, k in counts.items())
    msg = f"0/{n} nodes can host pod {pod_name} ({spec.describe(table)})"
    return (f"{msg}: {breakdown}" if breakdown else msg), details


def _gpu_facts(table: NodeTable, nodes: np.ndarray) -> dict:
    full = table.full_free[nodes]
    return {
        "largestFreeGpuBlock": int(full.max()) if full.size else 0,
        "freeGpus": int(full.sum()),
        "nodesWithFreeGpus": int((full > 0).sum()),
        "largestFreeShareMilli": int(max(int(table.max_free[nodes].max()), 0)) if full.size else 0,
    }


def _gpu_words(spec: PodSpec, facts: dict) -> str:
    if spec.is_share:
        largest = format_units(GPU, facts["largestFreeShareMilli"])
        return f"have no GPU with enough free share (largest free share {largest})"
    return (
        f"have too few free GPUs (largest free block {facts['largestFreeGpuBlock']}; "
        f"{facts['freeGpus']} free GPUs spread over {facts['nodesWithFreeGpus']} nodes)"
    )


def _tolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    """The first blocking taint not tolerated, or None."""
    for taint in taints:
        if taint.effect in _BLOCKING and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None
