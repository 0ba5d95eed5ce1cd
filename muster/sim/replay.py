"""Replay one scenario cycle: run, render as JSON or a table, and check ``expect``."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from muster.scheduler import Decisions, NodeTable, schedule
from muster.scheduler.decisions import as_table
from muster.sim.scenario import Scenario

__all__ = ["ReplayResult", "check", "render_json", "render_table", "run"]


@dataclass(slots=True)
class ReplayResult:
    scenario: Scenario
    decisions: Decisions
    cycle_seconds: float


def run(sc: Scenario) -> ReplayResult:
    """One cycle; ``cycle_seconds`` is the wall time of :func:`schedule` alone."""
    started = time.perf_counter()
    decisions = schedule(sc.snapshot, sc.policy)
    return ReplayResult(sc, decisions, time.perf_counter() - started)


def render_json(r: ReplayResult) -> dict[str, Any]:
    """The JSON form of ``../shared/scenarios/README.md``."""
    d = r.decisions
    return {
        **_growth_json(d),
        "admitted": [
            {
                "name": a.name,
                "namespace": a.namespace,
                "clusterQueue": a.cluster_queue,
                "flavors": a.flavors,
                "podSets": [
                    {
                        "name": ps.name,
                        "count": ps.count,
                        "placements": [
                            {"node": pl.node, "pods": pl.pods, "gpus": [list(g) for g in pl.gpus]}
                            for pl in ps.placements
                        ],
                    }
                    for ps in a.pod_sets
                ],
            }
            for a in d.admitted
        ],
        "preempted": [
            {"name": p.name, "namespace": p.namespace, "reason": p.reason, "preemptor": p.preemptor.name}
            for p in d.preempted
        ],
        "pending": [
            {
                "name": p.name,
                "namespace": p.namespace,
                "reason": p.reason,
                "message": p.message,
                "details": p.details,
            }
            for p in d.pending
        ],
        "stats": {
            "snapshotSeconds": round(r.scenario.snapshot_seconds, 6),
            "cycleSeconds": round(r.cycle_seconds, 6),
            "workloadsConsidered": d.workloads_considered,
            "podsPlaced": d.pods_placed,
        },
    }


def _growth_json(d: Decisions) -> dict[str, Any]:
    """Elastic growth (beyond the shared JSON form): only when the cycle grew or held any."""
    growth = {
        "resized": [
            {
                "name": r.name,
                "namespace": r.namespace,
                "previous": r.previous,
                "podSets": [
                    {
                        "name": ps.name,
                        "count": ps.count,
                        "added": [{"node": pl.node, "pods": pl.pods} for pl in ps.placements],
                    }
                    for ps in r.pod_sets
                ],
            }
            for r in d.resized
        ],
        "held": [
            {"name": h.name, "namespace": h.namespace, "reason": h.reason, "message": h.message}
            for h in d.held
        ],
    }
    return {k: v for k, v in growth.items() if v}


def render_table(r: ReplayResult) -> Table:
    """A rich table: one row per decided workload."""
    d = r.decisions
    t = Table(title=f"{r.scenario.name}", title_justify="left")
    t.add_column("WORKLOAD")
    t.add_column("DECISION")
    t.add_column("QUEUE / REASON")
    t.add_column("DETAILS", overflow="fold")
    for a in d.admitted:
        where = "; ".join(
            f"{ps.name}×{ps.count}"
            + (": " + ", ".join(f"{pl.node}×{pl.pods}" for pl in ps.placements) if ps.placements else "")
            for ps in a.pod_sets
        )
        flavors = ", ".join(f"{k}={v}" for k, v in a.flavors.items())
        t.add_row(a.name, "[green]admitted[/]", a.cluster_queue, f"{where} ({flavors})" if flavors else where)
    for p in d.preempted:
        t.add_row(p.name, "[red]preempted[/]", p.reason, f"for {p.preemptor.name}")
    for p in d.pending:
        t.add_row(p.name, "[yellow]pending[/]", p.reason, p.message)
    for grown in d.resized:
        sizes = ", ".join(f"{ps.name} {grown.previous[ps.name]} -> {ps.count}" for ps in grown.pod_sets)
        t.add_row(grown.name, "[green]grown[/]", "", sizes)
    for h in d.held:
        t.add_row(h.name, "[yellow]not grown[/]", h.reason, h.message)
    stats = render_json(r)["stats"]
    t.caption = (
        f"{stats['workloadsConsidered']} workloads, {stats['podsPlaced']} pods placed; "
        f"snapshot {stats['snapshotSeconds']:.3f}s, cycle {stats['cycleSeconds']:.3f}s"
    )
    return t


def check(r: ReplayResult) -> list[str]:
    """Differences between the decisions and ``expect`` (empty: everything matches)."""
    e = r.scenario.expect or {}
    d = r.decisions
    out: list[str] = []
    got_sets = {
        "admitted": [a.name for a in d.admitted],
        "preempted": [p.name for p in d.preempted],
        "pending": [p.name for p in d.pending],
    }
    for key, got in got_sets.items():
        if key in e and sorted(e[key]) != sorted(got):
            out.append(_set_diff(key, e[key], got))
    pending = {p.name: p for p in d.pending}
    for name, code in (e.get("reasons") or {}).items():
        p = pending.get(name)
        if p is None:
            out.append(f"reasons.{name}: expected {code}, but {name} is not pending")
        elif p.reason != code:
            out.append(f"reasons.{name}: expected {code}, got {p.reason} ({p.message})")
    preempted = {p.name: p.reason for p in d.preempted}
    for name, reason in (e.get("preemptionReasons") or {}).items():
        got_reason = preempted.get(name)
        if got_reason != reason:
            got_text = got_reason or "not preempted"
            out.append(f"preemptionReasons.{name}: expected {reason}, got {got_text}")
    admitted = {a.name: a for a in d.admitted}
    for key, fn in (("counts", _counts), ("nodes", _nodes), ("devices", _devices)):
        for name, want in (e.get(key) or {}).items():
            a = admitted.get(name)
            if a is None:
                out.append(f"{key}.{name}: {name} is not admitted")
                continue
            got = fn(a)
            for ps, w in want.items():
                if _normal(key, got.get(ps)) != _normal(key, w):
                    out.append(f"{key}.{name}.{ps}: expected {w}, got {got.get(ps)}")
    out += _check_growth(e, d)
    nodes = r.scenario.snapshot.nodes
    table = as_table(nodes) if e.get("domains") and nodes is not None else None
    for name, want in (e.get("domains") or {}).items():
        a = admitted.get(name)
        if a is None or table is None:
            out.append(
                f"domains.{name}: {name} is not admitted"
                if a is None
                else "domains: the scenario has no nodes"
            )
            continue
        for ps, by_label in want.items():
            got = _domains(a, ps, table, list(by_label))
            if {k: dict(v) for k, v in by_label.items()} != got:
                out.append(f"domains.{name}.{ps}: expected {by_label}, got {got}")
    return out


def _check_growth(e: dict[str, Any], d: Decisions) -> list[str]:
    """``resized`` (new counts), ``resizedNodes`` (where the added pods went) and ``held``
    (why an elastic workload did not grow); a workload named in none is not resized."""
    out: list[str] = []
    resized = {r.name: r for r in d.resized}
    for key, fn in (("resized", _counts), ("resizedNodes", _nodes)):
        for name, want in (e.get(key) or {}).items():
            r = resized.get(name)
            got = fn(r) if r is not None else None
            if got != want:
                out.append(f"{key}.{name}: expected {want}, got {got if r is not None else 'not resized'}")
    if "resized" in e and sorted(resized) != sorted(e["resized"]):
        out.append(_set_diff("resized", list(e["resized"]), list(resized)))
    held = {h.name: h for h in d.held}
    for name, code in (e.get("held") or {}).items():
        h = held.get(name)
        if h is None or h.reason != code:
            got = f"{h.reason} ({h.message})" if h is not None else "not held"
            out.append(f"held.{name}: expected {code}, got {got}")
    return out


def _set_diff(key: str, want: list[str], got: list[str]) -> str:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected {', '.join(extra)}")
    return f"{key}: expected {sorted(want)}, got {sorted(got)} ({'; '.join(parts) or 'different counts'})"


def _counts(a: Any) -> dict[str, int]:
    return {ps.name: ps.count for ps in a.pod_sets}


def _nodes(a: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for ps in a.pod_sets:
        by = out.setdefault(ps.name, {})
        for pl in ps.placements:
            by[pl.node] = by.get(pl.node, 0) + pl.pods
    return out


def _devices(a: Any) -> dict[str, dict[str, list[list[int]]]]:
    out: dict[str, dict[str, list[list[int]]]] = {}
    for ps in a.pod_sets:
        by = out.setdefault(ps.name, {})
        for pl in ps.placements:
            by.setdefault(pl.node, []).extend(list(g) for g in pl.gpus)
    return out


def _normal(key: str, value: Any) -> Any:
    if key == "devices" and isinstance(value, dict):
        return {n: sorted(Counter(tuple(sorted(g)) for g in devs).items()) for n, devs in value.items()}
    return value


def _domains(a: Any, ps_name: str, table: NodeTable, labels: list[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {k: {} for k in labels}
    for ps in a.pod_sets:
        if ps.name != ps_name:
            continue
        for pl in ps.placements:
            node_labels = table.labels[table.index[pl.node]]
            for k in labels:
                if k in node_labels:
                    out[k][node_labels[k]] = out[k].get(node_labels[k], 0) + pl.pods
    return out
