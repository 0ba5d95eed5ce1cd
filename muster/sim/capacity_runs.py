"""Philly replays against NodePools: the pools file, the runs, the numbers and the reports.

``muster sim philly --pools pools.yaml`` replays the jobs on the static cluster (``--nodes``,
none by default then) plus the pools of the file (NodePool manifests: ``muster.dev/v1``, or
Karpenter's ``karpenter.sh/v1`` converted as ``muster apply`` converts it; the provider is
ignored, the simulator makes the nodes). ``benchmarks/sim_capacity.py`` compares a fixed
cluster sized for the peak with on-demand and spot pools (docs/capacity.md, "Measured").
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from rich.table import Table

from muster.api import registry
from muster.api.errors import FieldError, InvalidObject
from muster.sim.elastic import ElasticReplay, ElasticResult, ElasticSpec, SimPool, pools_from
from muster.sim.philly import PhillyJobs
from muster.sim.philly_config import ClusterConfig, QueueConfig, derive_quotas
from muster.sim.philly_metrics import Stats
from muster.sim.timed import ReplaySpec

__all__ = ["CapacityRow", "capacity_table", "load_pools", "run_capacity", "write_capacity_reports"]


@dataclass(slots=True)
class CapacityRow:
    """What one replay cost and how its jobs fared (times in seconds)."""

    name: str
    cost: float
    node_hours: float
    jct: Stats
    wait: Stats
    utilization_pct: float  # allocated GPU-seconds over the GPU-seconds of the nodes up
    interruptions: int
    lost_gpu_hours: float
    nodes_launched: int
    peak_nodes: int
    finished: int
    dropped: int
    plans: int
    plan_ms: float  # mean time of one autoscaler decision
    seconds: float

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "cost": round(self.cost, 2),
            "nodeHours": round(self.node_hours, 2),
            "jct": self.jct.to_dict(),
            "wait": self.wait.to_dict(),
            "utilizationPct": round(self.utilization_pct, 2),
            "interruptions": self.interruptions,
            "lostGpuHours": round(self.lost_gpu_hours, 2),
            "nodesLaunched": self.nodes_launched,
            "peakNodes": self.peak_nodes,
            "finished": self.finished,
            "dropped": self.dropped,
            "plans": self.plans,
            "planMs": round(self.plan_ms, 3),
            "seconds": round(self.seconds, 1),
        }


def load_pools(path: Path) -> list[SimPool]:
    """The NodePools of a YAML file (one or more documents); InvalidObject naming the file,
    document and field of whatever is wrong."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidObject([FieldError(path.name, f"cannot read NodePools: {exc}")]) from None
    pools: list[dict] = []
    errors: list[FieldError] = []
    for i, doc in enumerate(docs):
        try:
            obj = registry.validate(doc).obj
        except InvalidObject as exc:
            errors += [FieldError(f"{path.name}[{i}] {e.path}", e.rule, e.got, e.hint) for e in exc.errors]
            continue
        if obj is None or obj["kind"] != "NodePool":
            errors.append(FieldError(f"{path.name}[{i}]", "must be a NodePool", (obj or {}).get("kind")))
            continue
        if not int((obj["spec"].get("template") or {}).get("gpus") or 0):
            errors.append(
                FieldError(f"{path.name}[{i}] spec.template.gpus", "must be > 0 in a GPU trace replay")
            )
            continue
        pools.append(obj)
    if not pools and not errors:
        errors.append(FieldError(path.name, "holds no NodePool"))
    if errors:
        raise InvalidObject(errors)
    return pools_from(pools)


def run_capacity(
    jobs: PhillyJobs,
    cluster: ClusterConfig,
    runs: list[tuple[str, ReplaySpec, ElasticSpec]],
) -> list[CapacityRow]:
    """One elastic replay per run, on ``cluster`` (its static nodes, maybe none) plus the run's
    pools; the queues' quotas are derived from the most GPUs the cluster can ever have."""
    rows = []
    for name, spec, elastic in runs:
        total = cluster.gpus + sum(p.gpus * p.max_nodes for p in elastic.pools)
        quotas = derive_quotas(jobs.gpu_seconds_by_queue(), total)
        queues = [QueueConfig(name=n, nominal_gpus=q) for n, q in zip(jobs.queues, quotas, strict=True)]
        started = time.perf_counter()
        result = ElasticReplay(jobs, cluster, queues, spec, elastic).run_elastic()
        rows.append(_row(name, jobs, result, time.perf_counter() - started))
    return rows


def capacity_table(rows: list[CapacityRow], baseline: str | None = None) -> Table:
    """The rows for a terminal; with ``baseline`` also the cost and p99 JCT as ratios to that
    row's."""
    base = next((r for r in rows if r.name == baseline), None)
    table = Table(title="Philly replay on NodePools (times in hours)")
    cols = ["replay", "cost", "node-h", "JCT mean", "p99", "wait p99", "util %", "interrupts", "lost GPU-h"]
    if base is not None:
        cols[2:2] = ["cost/base", "p99/base"]
    for col in cols:
        table.add_column(col, justify="left" if col == "replay" else "right")
    for r in rows:
        cells = _cells(r)
        if base is not None:
            cells[2:2] = [
                f"{r.cost / base.cost:.3f}" if base.cost else "-",
                f"{r.jct.p99 / base.jct.p99:.3f}" if base.jct.p99 else "-",
            ]
        table.add_row(*cells)
    return table


def write_capacity_reports(
    out: Path, stem: str, rows: list[CapacityRow], described: dict[str, object]
) -> list[Path]:
    """``<stem>-capacity.csv`` and ``.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{stem}-capacity.csv", out / f"{stem}-capacity.md"
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "replay",
                "cost",
                "node_hours",
                "jct_mean_s",
                "jct_p50_s",
                "jct_p99_s",
                "wait_p99_s",
                "utilization_pct",
                "interruptions",
                "lost_gpu_hours",
                "nodes_launched",
                "peak_nodes",
                "finished",
                "dropped",
                "plans",
                "plan_ms",
                "run_s",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.name,
                    f"{r.cost:.2f}",
                    f"{r.node_hours:.2f}",
                    f"{r.jct.mean:.1f}",
                    f"{r.jct.p50:.1f}",
                    f"{r.jct.p99:.1f}",
                    f"{r.wait.p99:.1f}",
                    f"{r.utilization_pct:.2f}",
                    r.interruptions,
                    f"{r.lost_gpu_hours:.2f}",
                    r.nodes_launched,
                    r.peak_nodes,
                    r.finished,
                    r.dropped,
                    r.plans,
                    f"{r.plan_ms:.3f}",
                    f"{r.seconds:.1f}",
                ]
            )
    lines = ["# Philly replay on NodePools", ""]
    lines += [f"- {k}: {v}" for k, v in described.items()]
    heads = [
        "replay",
        "cost",
        "node-h",
        "JCT mean h",
        "p99 h",
        "wait p99 h",
        "util %",
        "interrupts",
        "lost GPU-h",
    ]
    lines += ["", "| " + " | ".join(heads) + " |", "|:--" + "|--:" * (len(heads) - 1) + "|"]
    for r in rows:
        cells = _cells(r)
        lines.append("| " + " | ".join(cells) + " |")
    md_path.write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]


def _cells(r: CapacityRow) -> list[str]:
    """A row's cells as the table and the Markdown report show them (hours, rounded)."""
    return [
        r.name,
        f"{r.cost:,.0f}",
        f"{r.node_hours:,.0f}",
        f"{r.jct.mean / 3600:.2f}",
        f"{r.jct.p99 / 3600:.2f}",
        f"{r.wait.p99 / 3600:.2f}",
        f"{r.utilization_pct:.1f}",
        str(r.interruptions),
        f"{r.lost_gpu_hours:.1f}",
    ]


def _row(name: str, jobs: PhillyJobs, r: ElasticResult, seconds: float) -> CapacityRow:
    res = r.replay
    finished = ~np.isnan(res.finish)
    started = ~np.isnan(res.start)
    return CapacityRow(
        name=name,
        cost=r.cost,
        node_hours=sum(r.node_hours.values()),
        jct=Stats.of((res.finish - jobs.submit)[finished]),
        wait=Stats.of((res.start - jobs.submit)[started]),
        utilization_pct=r.utilization_pct,
        interruptions=r.interruptions,
        lost_gpu_hours=r.interrupted_lost_gpu_seconds / 3600.0,
        nodes_launched=sum(r.launched.values()),
        peak_nodes=r.peak_nodes,
        finished=int(finished.sum()),
        dropped=int(res.dropped.sum()),
        plans=r.plans,
        plan_ms=1000.0 * r.plan_seconds / r.plans if r.plans else 0.0,
        seconds=seconds,
    )
