"""Topology-aware placement of a pod set (Kueue TAS, BestFit).

Levels are node label keys from the top (e.g. ``block``) to the bottom (``rack``); below
the last level come the nodes themselves. Phase 1 counts how many pods of the pod set fit
on each node and sums the counts per domain. Phase 2, at the requested level: domains are
sorted by that capacity (largest first, then by name); if the largest can hold every pod,
the *smallest* domain that can is chosen. Otherwise a ``required`` level fails, and a
``preferred`` one moves up a level; at the top level the pods are split greedily over the
largest domains and the last part goes to the smallest domain that holds it. The chosen
domains are then filled level by level the same way down to nodes, so as few domains as
possible are used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from muster.scheduler.nodes import NodeTable
from muster.scheduler.placement.filters import PodSpec

__all__ = ["TopologyFailure", "node_capacity", "plan_topology"]


@dataclass(slots=True)
class TopologyFailure:
    """The largest number of pods one domain of ``level`` can hold, out of ``count``."""

    level: str
    fit: int
    count: int
    largest: str


def node_capacity(table: NodeTable, spec: PodSpec, mask: np.ndarray, one_per_node: bool) -> np.ndarray:
    """How many pods of ``spec`` each node could take now (0 outside ``mask``)."""
    n = len(table)
    cap = np.full(n, np.iinfo(np.int64).max // 4, dtype=np.int64)
    for c, v in zip(spec.cols.tolist(), spec.vals.tolist(), strict=True):
        cap = np.minimum(cap, np.maximum(table.free[:, c], 0) // v)
    if spec.gpus:
        if spec.is_share:
            milli = np.asarray(spec.node_milli(table)).reshape(-1, 1) if spec.per_node else spec.milli
            per_dev = np.where(table.gpu_free > 0, table.gpu_free, 0) // milli
            cap = np.minimum(cap, per_dev.sum(axis=1))
        else:
            cap = np.minimum(cap, table.full_free // spec.gpus)
    if one_per_node:
        cap = np.minimum(cap, 1)
    return np.where(mask, cap, 0)


def plan_topology(
    table: NodeTable,
    capacity: np.ndarray,
    levels: tuple[str, ...],
    level: str,
    required: bool,
    count: int,
) -> list[int] | TopologyFailure:
    """Nodes for ``count`` pods (a node repeats once per pod on it), or why it fails."""
    keys = [_domain_keys(table, levels[: i + 1]) for i in range(len(levels))]
    in_topology = np.all(np.stack([table.label_codes(k)[0] >= 0 for k in levels]), axis=0)
    capacity = np.where(in_topology, capacity, 0)
    li = levels.index(level)
    chosen: list[tuple[int, int]] | None = None  # (domain index at level li, pods)
    while True:
        caps = _domain_capacity(keys[li], capacity)
        best = _best_fit_single(keys[li], caps, count)
        if best is not None:
            chosen = [(best, count)]
            break
        if required or li == 0:
            break
        li -= 1
    if chosen is None:
        caps = _domain_capacity(keys[li], capacity)
        if required:
            top = int(np.argmax(caps)) if len(caps) else -1
            largest = keys[li][1][top] if top >= 0 else ""
            return TopologyFailure(levels[li], int(caps.max()) if len(caps) else 0, count, largest)
        chosen = _greedy_split(keys[li], caps, count)
        if chosen is None:
            return TopologyFailure(levels[li], int(caps.sum()), count, "")
    # descend: split each chosen domain's pods over its children, then over nodes
    parts = chosen
    for lj in range(li + 1, len(levels) + 1):
        child_ids = keys[lj][0] if lj < len(levels) else np.arange(len(table))
        child_names = keys[lj][1] if lj < len(levels) else table.names
        parent_ids = keys[lj - 1][0]
        child_caps = _domain_capacity((child_ids, child_names), capacity)
        nxt: list[tuple[int, int]] = []
        for domain, pods in parts:
            members = np.unique(child_ids[(parent_ids == domain) & (capacity > 0)])
            split = _greedy_split((child_ids, child_names), child_caps, pods, members)
            if split is None:
                return TopologyFailure(levels[min(lj, len(levels) - 1)], 0, count, "")
            nxt.extend(split)
        parts = nxt
    return [node for node, pods in parts for _ in range(pods)]


def _domain_keys(table: NodeTable, levels: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Per-node domain id for the path of labels ``levels`` (-1 without all labels), and
    each domain's name (its last label value). Labels never change, so it is cached."""
    cache_key = ("topology", levels)
    hit = table._label_cache.get(cache_key)
    if hit is not None:
        return hit
    codes = np.stack([table.label_codes(k)[0] for k in levels], axis=1)
    valid = (codes >= 0).all(axis=1)
    uniq, inverse = np.unique(codes, axis=0, return_inverse=True)
    ids = np.where(valid, inverse.reshape(-1), -1)
    last_vocab = {v: k for k, v in table.label_codes(levels[-1])[1].items()}
    names = [last_vocab.get(int(row[-1]), "") for row in uniq]
    table._label_cache[cache_key] = (ids, names)
    return ids, names


def _domain_capacity(keys: tuple[np.ndarray, list[str]], capacity: np.ndarray) -> np.ndarray:
    ids, names = keys
    valid = ids >= 0
    return np.bincount(ids[valid], weights=capacity[valid], minlength=len(names)).astype(np.int64)


def _best_fit_single(keys: tuple[np.ndarray, list[str]], caps: np.ndarray, count: int) -> int | None:
    """The smallest domain that holds ``count`` pods (ties by name), if any does."""
    names = keys[1]
    fitting = [d for d in range(len(caps)) if caps[d] >= count]
    if not fitting:
        return None
    return min(fitting, key=lambda d: (int(caps[d]), names[d]))


def _greedy_split(
    keys: tuple[np.ndarray, list[str]],
    caps: np.ndarray,
    count: int,
    members: np.ndarray | None = None,
) -> list[tuple[int, int]] | None:
    """Largest domains first; the last part goes to the smallest domain that holds it."""
    names = keys[1]
    pool = [int(d) for d in (members if members is not None else range(len(caps))) if caps[d] > 0]
    pool.sort(key=lambda d: (-int(caps[d]), names[d]))
    out: list[tuple[int, int]] = []
    remaining = count
    i = 0
    while remaining > 0 and i < len(pool):
        d = pool[i]
        if caps[d] >= remaining:
            last = min((e for e in pool[i:] if caps[e] >= remaining), key=lambda e: (int(caps[e]), names[e]))
            out.append((last, remaining))
            remaining = 0
            break
        out.append((d, int(caps[d])))
        remaining -= int(caps[d])
        i += 1
    return out if remaining == 0 else None
