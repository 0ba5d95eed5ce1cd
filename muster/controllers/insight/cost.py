"""What GPUs cost, from the cost ledger (UsageRecords): per job, namespace, queue, pool or any
label, idle cost per pool, over a time window (``muster cost``, ``GET /api/v1/cost``, the
dashboard's Cost page). Pure: records and a window in, a report out.

The rules (docs/cost.md; OpenCost's allocation model, with GPUs as the allocated resource):

* a pod is charged its share of its node's price for the time it ran inside the window: on a
  GPU node its GPUs over the node's GPUs (a 250m share counts a quarter GPU), on a node
  without GPUs its CPUs over the node's CPUs;
* a node costs its price for the time it existed inside the window (a pool node from its
  launch: booting is paid for);
* a pool's idle cost is its nodes' cost minus what its pods were charged (capacity paid for
  and not allocated), shown per pool and never spread onto tenants (showback); a chargeback
  that must account for every unit of currency can spread it pro rata (``spread_idle``);
* GPU-hours are the pods' GPUs x hours; work a spot interruption cost is counted apart
  (lost GPU-hours) and is part of the charged time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from muster.api.conditions import epoch

__all__ = ["GROUPINGS", "CostReport", "CostRow", "PoolCost", "cost_report", "group_key"]

Obj = Mapping[str, Any]
GROUPINGS = ("namespace", "queue", "job", "pool", "capacity-type")


@dataclass
class CostRow:
    """One group: its GPU-hours, what it was charged, the jobs and pods in it."""

    key: str
    gpu_hours: float = 0.0
    cost: float = 0.0
    idle_share: float = 0.0  # the pools' idle cost spread onto it (spread_idle only)
    lost_gpu_hours: float = 0.0
    pods: int = 0
    jobs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in _camel(asdict(self)).items()}


@dataclass
class PoolCost:
    """One pool (or ``(no pool)`` for priced nodes no pool made): node-hours, cost, idle."""

    pool: str
    node_hours: float = 0.0
    gpu_hours: float = 0.0  # the nodes' GPUs x hours
    cost: float = 0.0
    allocated_cost: float = 0.0
    idle_cost: float = 0.0
    idle_pct: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in _camel(asdict(self)).items()}


@dataclass
class CostReport:
    start: float
    end: float
    by: str
    rows: list[CostRow] = field(default_factory=list)
    pools: list[PoolCost] = field(default_factory=list)
    total_cost: float = 0.0  # what the nodes cost in the window
    allocated_cost: float = 0.0  # what the pods were charged
    idle_cost: float = 0.0
    gpu_hours: float = 0.0
    series: list[dict[str, Any]] = field(default_factory=list)  # per bucket: start, cost per group

    def to_dict(self) -> dict[str, Any]:
        from muster.api.conditions import iso

        return {
            "start": iso(self.start),
            "end": iso(self.end),
            "by": self.by,
            "totalCost": round(self.total_cost, 6),
            "allocatedCost": round(self.allocated_cost, 6),
            "idleCost": round(self.idle_cost, 6),
            "gpuHours": round(self.gpu_hours, 6),
            "rows": [r.to_dict() for r in self.rows],
            "pools": [p.to_dict() for p in self.pools],
            "series": self.series,
        }


def group_key(record: Obj, by: str) -> str:
    """The group of a pod's record: a namespace, queue, job, pool, capacity type, or the
    value of a label (``label:team``; ``(none)`` when the pod has no such label)."""
    spec = record["spec"]
    if by.startswith("label:"):
        return str((spec.get("labels") or {}).get(by[6:]) or "(none)")
    field_name = {"pool": "nodePool", "capacity-type": "capacityType"}.get(by, by)
    value = spec.get(field_name)
    if by == "job" and value:
        value = f"{spec.get('namespace')}/{value}"
    return str(value or "(none)")


def cost_report(
    records: Iterable[Obj],
    start: float,
    end: float,
    by: str = "namespace",
    bucket: float | None = None,
    spread_idle: bool = False,
) -> CostReport:
    """The report of ``records`` over ``[start, end)`` grouped ``by`` (see :func:`group_key`);
    with ``bucket`` (seconds) also the cost per group per bucket (the dashboard's chart).
    Records still open count up to ``end``."""
    if end <= start:
        raise ValueError("the window must end after it starts")
    if by not in GROUPINGS and not (by.startswith("label:") and len(by) > 6):
        raise ValueError(f"cannot group by {by!r}; use one of {', '.join(GROUPINGS)} or label:KEY")
    report = CostReport(start, end, by)
    rows: dict[str, CostRow] = {}
    jobs: dict[str, set[str]] = {}
    pools: dict[str, PoolCost] = {}
    edges = _edges(start, end, bucket)
    series: dict[str, list[float]] = {}
    for rec in records:
        spec = rec["spec"]
        t0, t1 = _span(spec, start, end)
        if t1 <= t0:
            continue
        hours = (t1 - t0) / 3600.0
        price = float(spec.get("pricePerHour") or 0.0)
        pool = pools.setdefault(
            spec.get("nodePool") or "(no pool)", PoolCost(spec.get("nodePool") or "(no pool)")
        )
        if spec["type"] == "Node":
            cost = price * hours
            pool.node_hours += hours
            pool.gpu_hours += hours * float(spec.get("nodeGpus") or 0)
            pool.cost += cost
            report.total_cost += cost
            continue
        share = _share(spec)
        cost = price * share * hours
        key = group_key(rec, by)
        row = rows.setdefault(key, CostRow(key))
        row.gpu_hours += float(spec.get("gpus") or 0.0) * hours
        row.cost += cost
        row.pods += 1
        lost = float(spec.get("lostGpuSeconds") or 0.0)
        if lost and t0 <= (epoch(spec.get("end")) or end) <= t1:
            row.lost_gpu_hours += lost / 3600.0
        if spec.get("job"):
            jobs.setdefault(key, set()).add(f"{spec.get('namespace')}/{spec['job']}")
        pool.allocated_cost += cost
        report.allocated_cost += cost
        report.gpu_hours += float(spec.get("gpus") or 0.0) * hours
        if edges:
            _spread(series.setdefault(key, [0.0] * (len(edges) - 1)), edges, t0, t1, price * share / 3600.0)
    for pool in pools.values():
        pool.idle_cost = max(0.0, pool.cost - pool.allocated_cost)
        pool.idle_pct = 100.0 * pool.idle_cost / pool.cost if pool.cost else 0.0
    report.idle_cost = sum(p.idle_cost for p in pools.values())
    if spread_idle and report.allocated_cost > 0:
        for row in rows.values():
            row.idle_share = report.idle_cost * row.cost / report.allocated_cost
    for key, row in rows.items():
        row.jobs = len(jobs.get(key, ()))
    report.rows = sorted(rows.values(), key=lambda r: (-r.cost - r.idle_share, r.key))
    report.pools = sorted(
        (p for p in pools.values() if p.cost or p.allocated_cost), key=lambda p: (-p.cost, p.pool)
    )
    if edges:
        from muster.api.conditions import iso

        report.series = [
            {"start": iso(edges[i]), "cost": {k: round(v[i], 6) for k, v in sorted(series.items())}}
            for i in range(len(edges) - 1)
        ]
    return report


def _span(spec: Obj, start: float, end: float) -> tuple[float, float]:
    t0 = epoch(spec.get("start")) or start
    t1 = epoch(spec.get("end")) if spec.get("end") else end
    return max(t0, start), min(t1 if t1 is not None else end, end)


def _share(spec: Obj) -> float:
    """The part of its node a pod is charged for."""
    node_gpus = float(spec.get("nodeGpus") or 0)
    if node_gpus:
        return min(1.0, float(spec.get("gpus") or 0.0) / node_gpus)
    node_cpu = float(spec.get("nodeCpu") or 0.0)
    return min(1.0, float(spec.get("cpu") or 0.0) / node_cpu) if node_cpu else 0.0


def _edges(start: float, end: float, bucket: float | None) -> list[float]:
    if not bucket or bucket <= 0:
        return []
    n = min(max(1, math.ceil((end - start) / bucket)), 1000)
    edges = [start + i * bucket for i in range(n + 1)]
    edges[-1] = max(edges[-1], end)
    return edges


def _spread(values: list[float], edges: list[float], t0: float, t1: float, rate: float) -> None:
    for i in range(len(values)):
        lo, hi = max(t0, edges[i]), min(t1, edges[i + 1])
        if hi > lo:
            values[i] += rate * (hi - lo)


def _camel(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        head, *rest = k.split("_")
        out[head + "".join(p.title() for p in rest)] = v
    return out
