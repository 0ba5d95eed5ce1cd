"""Running the fill-up experiment for many (policy, seed) pairs, in parallel if asked.

The trace is loaded and checked once in the calling process (so a bad file fails before any
work starts) and once per worker process (:mod:`muster.sim.pool`). Workers return only what
reports need: the binned curves and the counts, not the per-arrival logs. Each run is
single-threaded, so the per-run seconds are one core's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from muster.scheduler import GPU_MILLI, Node, TypicalPod
from muster.sim import openb
from muster.sim.fillup import ARRIVED_MAX, Binned, arrivals, binned, run_fillup, typical_set
from muster.sim.pool import run_items

__all__ = ["OpenbSetup", "RunSummary", "Workload", "load_workload", "median_curves", "run_all"]


@dataclass(frozen=True, slots=True)
class OpenbSetup:
    """What a fill-up experiment runs on: the trace root, the node and pod lists (names in
    ``alibaba-gpu-v2023/csv`` or paths), the inflation ratio and the typical-set coverage."""

    trace_root: Path
    nodes: str = openb.DEFAULT_NODES
    pods: str = openb.DEFAULT_PODS
    ratio: float = 1.3
    coverage: float = 0.95

    @property
    def workload_name(self) -> str:
        """The pod list's name without folder and ``.csv`` (how expected results key it)."""
        return Path(self.pods).name.removesuffix(".gz").removesuffix(".csv")

    @property
    def default_cluster(self) -> bool:
        """True on the 1213 GPU nodes the published results used."""
        return Path(self.nodes).name.removesuffix(".gz").removesuffix(".csv") == openb.DEFAULT_NODES


@dataclass(slots=True)
class Workload:
    """A loaded trace: nodes, pods sorted by name, their typical set, GPU capacity (milli)."""

    nodes: list[Node]
    pods: list[openb.OpenbPod]
    typical: tuple[TypicalPod, ...]
    capacity: int


@dataclass(slots=True)
class RunSummary:
    """One run's result as reports use it."""

    policy: str
    seed: int
    seconds: float
    schedule_seconds: float
    arrivals: int
    failed: int
    curves: Binned = field(repr=False)


def load_workload(setup: OpenbSetup) -> Workload:
    """Load and check the node and pod lists (raises ``InvalidObject`` / ``TraceNotFound``)."""
    nodes = openb.load_nodes(openb.nodes_path(setup.trace_root, setup.nodes))
    pods = openb.load_pods(openb.pods_path(setup.trace_root, setup.pods))
    capacity = sum(n.gpus for n in nodes) * GPU_MILLI
    if not capacity:
        raise ValueError(f"{setup.nodes}: the node list has no GPUs, so there is nothing to fill")
    return Workload(nodes, pods, typical_set(pods, setup.coverage), capacity)


def run_one(work: Workload, setup: OpenbSetup, policy: str, seed: int) -> RunSummary:
    order = arrivals(work.pods, work.capacity, seed, setup.ratio)
    run = run_fillup(work.nodes, work.pods, order, policy, seed, work.typical)
    return RunSummary(policy, seed, run.seconds, run.schedule_seconds, run.arrivals, run.failed, binned(run))


def run_all(
    setup: OpenbSetup,
    policies: Sequence[str],
    seeds: Sequence[int],
    jobs: int = 1,
    on_done: Callable[[RunSummary], None] | None = None,
    work: Workload | None = None,
) -> list[RunSummary]:
    """Every (policy, seed) pair, sorted by policy (as given) then seed."""
    pairs = [(p, s) for p in policies for s in seeds]
    out: list[RunSummary] = []
    for r in run_items(setup, pairs, load_workload, _run_pair, jobs, inputs=work):
        out.append(r)
        if on_done:
            on_done(r)
    rank = {p: i for i, p in enumerate(policies)}
    out.sort(key=lambda r: (rank[r.policy], r.seed))
    return out


def median_curves(runs: Sequence[RunSummary]) -> dict[str, Binned]:
    """Per policy, the median over its runs at each arrived percentage (NaN where no run
    has data), the statistic the paper plots."""
    by: dict[str, list[Binned]] = {}
    for r in runs:
        by.setdefault(r.policy, []).append(r.curves)
    out = {}
    for policy, curves in by.items():
        out[policy] = Binned(*(_median([getattr(c, m) for c in curves]) for m in Binned.__slots__))
    return out


def _median(rows: list[np.ndarray]) -> np.ndarray:
    stack = np.vstack(rows)
    med = np.full(ARRIVED_MAX + 1, np.nan)
    for k in range(ARRIVED_MAX + 1):
        col = [v for v in stack[:, k] if not np.isnan(v)]
        if col:
            med[k] = round(statistics.median(col), 2)
    return med


def _run_pair(work: Workload, setup: OpenbSetup, pair: tuple[str, int]) -> RunSummary:
    return run_one(work, setup, *pair)
