"""The FGD fill-up experiment (Weng et al., ATC'23; recipe in reference/perf.md §2.1).

Pods arrive one at a time into an empty cluster and never leave; a pod that finds no node is
dropped. After every arrival the run logs the cumulative GPU request of the pods arrived so
far (failed ones included), the milli-GPU allocated, and the cluster's fragmentation against
the typical pod set. The arrival sequence, per seed: the trace's pods sorted by name and
shuffled, then pods drawn uniformly with replacement from the trace and appended until the
next draw would pass ``ratio`` x the cluster's GPU capacity (the simulator's quirk: the stop
test adds the draw's per-GPU milli, the running total its whole request).

Placement is :func:`muster.scheduler.schedule` itself, unchanged: one cycle over one
BestEffortFIFO ClusterQueue whose quota is the cluster's capacity, with the arrivals
pending in arrival order. A cycle decides its pending workloads one at a time in queue
order, each against the state the earlier ones left, and a workload it cannot place stays
pending, which is exactly "one pod at a time, failures dropped". The log is then rebuilt by
applying the admissions in order to a node table, so fragmentation after each arrival uses
the core's own measure (:class:`~muster.scheduler.placement.fragmentation.FragModel`).

:func:`binned` turns a log into the published form: for each whole arrived percentage 0..130
the mean over the log lines that round to it (the neighbours within 1 when none do), as the
simulator's ``merge_*_discrete.py`` scripts compute it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from muster.scheduler import (
    CPU,
    GPU,
    GPU_MILLI,
    MEMORY,
    ClusterQueue,
    Flavor,
    FlavorQuotas,
    Node,
    NodeTable,
    PendingWorkload,
    Policy,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    TypicalPod,
    schedule,
)
from muster.scheduler.decisions import bind_pod
from muster.scheduler.placement.fragmentation import FragModel, typical_pods
from muster.sim.openb import MIB, OpenbPod

__all__ = [
    "ARRIVED_MAX",
    "REPORT_POINTS",
    "Binned",
    "FillupRun",
    "arrivals",
    "binned",
    "run_fillup",
    "typical_set",
]

REPORT_POINTS = (90, 95, 100, 110, 130)  # arrived % shown in tables
ARRIVED_MAX = 130


@dataclass(slots=True)
class FillupRun:
    """One (policy, seed) run. The arrays hold one entry per log line: the empty cluster,
    then one per arrival, in milli-GPU: cumulative requested (``arrived``), allocated
    (``used``), fragmented (``frag``, Σ over nodes of F(n)) and idle (``idle``)."""

    policy: str
    seed: int
    capacity: int  # milli-GPU of the cluster
    seconds: float  # wall time of the run (the cycle and the log)
    schedule_seconds: float  # of which in schedule()
    arrivals: int
    failed: int
    arrived: np.ndarray
    used: np.ndarray
    frag: np.ndarray
    idle: np.ndarray


@dataclass(slots=True)
class Binned:
    """Per whole arrived percentage 0..130 (index = percent; NaN where the run has no
    data): allocation, fragmented GPUs and fragmented share of idle GPUs, all in %."""

    allocation: np.ndarray
    fragmentation: np.ndarray
    frag_ratio: np.ndarray = field(default_factory=lambda: np.full(ARRIVED_MAX + 1, np.nan))


def typical_set(pods: Sequence[OpenbPod], coverage: float = 0.95) -> tuple[TypicalPod, ...]:
    """The trace's typical pod set (all pods, CPU-only ones included, before inflation)."""
    return typical_pods((p.shape() for p in pods), coverage)


def arrivals(pods: Sequence[OpenbPod], capacity: int, seed: int, ratio: float = 1.3) -> list[int]:
    """Indices into ``pods`` (sorted by name) in arrival order for ``seed``."""
    if not any(p.gpu_request for p in pods):
        raise ValueError("the pod list requests no GPUs, so it cannot be scaled to a share of GPU capacity")
    rng = random.Random(seed)
    order = list(range(len(pods)))
    rng.shuffle(order)
    total = sum(p.gpu_request for p in pods)
    target = ratio * capacity
    if total > target:  # tune down: drop random arrivals until under the target
        while total > target:
            total -= pods[order.pop(rng.randrange(len(order)))].gpu_request
        return order
    while True:
        i = rng.randrange(len(pods))
        if total + pods[i].gpu_milli > target:
            return order
        total += pods[i].gpu_request
        order.append(i)


def run_fillup(
    nodes: Sequence[Node],
    pods: Sequence[OpenbPod],
    order: Sequence[int],
    policy: str,
    seed: int,
    typical: Sequence[TypicalPod],
) -> FillupRun:
    """Run the arrivals ``order`` (see :func:`arrivals`) under placement ``policy``."""
    started = time.perf_counter()
    table = NodeTable.from_nodes(nodes)
    capacity = int(table.gpu_total.sum()) * GPU_MILLI
    pending = [
        PendingWorkload(f"{k:06d}-{pods[i].name}", "fill-up", [pods[i].pod_set()], creation_time=float(k))
        for k, i in enumerate(order)
    ]
    snapshot = Snapshot(
        cluster_queues=[_capacity_queue(table)],
        pending=pending,
        nodes=table,
        flavors=[Flavor("default")],
    )
    t0 = time.perf_counter()
    decisions = schedule(snapshot, Policy(placement=policy, seed=seed, typical_pods=tuple(typical)))
    schedule_seconds = time.perf_counter() - t0
    placed = {id(a.workload): a.pod_sets[0].placements[0] for a in decisions.admitted}
    arrived, used, frag, idle = _log(table, pods, order, pending, placed, typical)
    return FillupRun(
        policy=policy,
        seed=seed,
        capacity=capacity,
        seconds=time.perf_counter() - started,
        schedule_seconds=schedule_seconds,
        arrivals=len(order),
        failed=len(order) - len(placed),
        arrived=arrived,
        used=used,
        frag=frag,
        idle=idle,
    )


def binned(run: FillupRun) -> Binned:
    """The run's log per whole arrived percentage, as the published results are computed."""
    total_gpus = run.capacity / GPU_MILLI
    arrive = np.round(run.arrived / total_gpus / 10)  # half to even, as pandas rounds
    alloc = np.round(run.used / total_gpus / 10, 2)
    frag_pct = run.frag / GPU_MILLI / total_gpus * 100
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(run.idle > 0, run.frag / run.idle * 100, 0.0)
    out = Binned(*(np.full(ARRIVED_MAX + 1, np.nan) for _ in range(3)))
    for k in range(ARRIVED_MAX + 1):
        sel = arrive == k
        if not sel.any():
            sel = (arrive >= k - 1) & (arrive <= k + 1)
            if not sel.any():
                continue
        out.allocation[k] = round(float(alloc[sel].mean()), 2)
        out.fragmentation[k] = round(float(frag_pct[sel].mean()), 2)
        out.frag_ratio[k] = round(float(ratio[sel].mean()), 2)
    return out


def _capacity_queue(table: NodeTable) -> ClusterQueue:
    """One queue whose quota is the cluster's capacity, as Muster's default queue has: it
    never refuses what the nodes could take."""
    quota = {r: ResourceQuota(int(table.alloc[:, c].sum())) for r, c in table.res_index.items()}
    quota[GPU] = ResourceQuota(int(table.gpu_total.sum()) * GPU_MILLI)
    group = ResourceGroup(tuple(quota), [FlavorQuotas("default", quota)])
    return ClusterQueue("fill-up", [group])


def _log(
    table: NodeTable,
    pods: Sequence[OpenbPod],
    order: Sequence[int],
    pending: Sequence[PendingWorkload],
    placed: dict,
    typical: Sequence[TypicalPod],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Apply the admissions in arrival order to a copy of the empty table, logging after
    each arrival; fragmentation is updated on the one node that changed."""
    table = table.copy()
    model = FragModel(table, typical)
    per_node = model.frag(table, np.arange(len(table)))
    frag_total = math.fsum(per_node)
    idle_total = int(table.free_milli.sum())
    n = len(order) + 1
    arrived = np.zeros(n, dtype=np.int64)
    used = np.zeros(n, dtype=np.int64)
    frag = np.zeros(n)
    idle = np.zeros(n, dtype=np.int64)
    frag[0], idle[0] = frag_total, idle_total
    a = u = 0
    for k, (i, w) in enumerate(zip(order, pending, strict=True), start=1):
        pod = pods[i]
        a += pod.gpu_request
        pl = placed.get(id(w))
        if pl is not None:
            node = table.index[pl.node]
            requests = {CPU: pod.cpu_milli, MEMORY: pod.memory_mib * MIB}
            bind_pod(table, node, requests, pl.gpus[0], pl.gpu_milli)
            u += pod.gpu_request
            idle_total -= pod.gpu_request
            new = float(model.frag(table, np.array([node]))[0])
            frag_total += new - per_node[node]
            per_node[node] = new
        arrived[k], used[k], frag[k], idle[k] = a, u, frag_total, idle_total
    return arrived, used, frag, idle
