"""Reports of a fill-up experiment: JSON, a terminal table, CSV, a PNG plot and Markdown.

Numbers are percentages of the cluster's GPU capacity keyed by arrived load (the pods'
cumulative GPU request, failed ones included, as % of capacity). Where the published
results cover the same pod list on the same nodes, tables show them in brackets and the
difference; the JSON carries them under ``expected``.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from muster.sim.expected import Expected
from muster.sim.fillup import ARRIVED_MAX, REPORT_POINTS, Binned
from muster.sim.fillup_runs import OpenbSetup, RunSummary
from muster.sim.plots import pyplot, save

__all__ = [
    "FRAG_POINTS",
    "summary_json",
    "terminal_table",
    "write_csv",
    "write_markdown",
    "write_plot",
    "write_reports",
]

FRAG_POINTS = (80, 90)  # where the paper reports fragmentation (Fig. 7)


def summary_json(
    runs: Sequence[RunSummary], medians: dict[str, Binned], expected: Expected | None
) -> dict[str, Any]:
    """``{"runs": [...], "median": {policy: {arrived: %}}, ...}`` for ``-o json``."""
    points = sorted({*REPORT_POINTS, *FRAG_POINTS})
    out: dict[str, Any] = {
        "runs": [
            {
                "policy": r.policy,
                "seed": r.seed,
                "allocation": _pick(r.curves.allocation, REPORT_POINTS),
                "fragmentation": _pick(r.curves.fragmentation, points),
                "fragRatio": _pick(r.curves.frag_ratio, points),
                "arrivals": r.arrivals,
                "failed": r.failed,
                "seconds": round(r.seconds, 2),
            }
            for r in runs
        ],
        "median": {p: _pick(m.allocation, REPORT_POINTS) for p, m in medians.items()},
        "medianFragmentation": {p: _pick(m.fragmentation, points) for p, m in medians.items()},
    }
    if expected is not None:
        out["expected"] = {
            measure: {
                p: {
                    str(k): expected.get(measure, p, k)
                    for k in (REPORT_POINTS if measure == "allocation" else points)
                }
                for p in medians
                if p in expected.medians.get(measure, {})
            }
            for measure in ("allocation", "fragmentation")
        }
    return out


def terminal_table(medians: dict[str, Binned], expected: Expected | None, seeds: int) -> Table:
    """Median allocation at the report points (paper's value in brackets) and fragmentation."""
    plural = "s" * (seeds != 1)
    t = Table(
        title=f"GPU allocation and fragmentation (% of capacity) by arrived %, median of {seeds} seed{plural}"
    )
    t.add_column("policy")
    for k in REPORT_POINTS:
        t.add_column(f"{k}%", justify="right")
    for k in FRAG_POINTS:
        t.add_column(f"frag {k}%", justify="right")
    for policy, m in medians.items():
        cells = [
            _cell(m.allocation[k], expected and expected.get("allocation", policy, k)) for k in REPORT_POINTS
        ]
        cells += [
            _cell(m.fragmentation[k], expected and expected.get("fragmentation", policy, k))
            for k in FRAG_POINTS
        ]
        t.add_row(policy, *cells)
    return t


def write_reports(
    out: Path,
    setup: OpenbSetup,
    runs: Sequence[RunSummary],
    medians: dict[str, Binned],
    expected: Expected | None,
) -> Path:
    """``openb-<pods>.csv``, ``.png`` and ``.md`` in ``out``; returns the Markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"openb-{setup.workload_name}"
    seeds = len({r.seed for r in runs})
    write_csv(out / f"{stem}.csv", runs)
    write_plot(
        out / f"{stem}.png", medians, expected, f"{setup.workload_name}, {seeds} seed{'s' * (seeds != 1)}"
    )
    write_markdown(out / f"{stem}.md", setup, runs, medians, expected, f"{stem}.csv", f"{stem}.png")
    return out / f"{stem}.md"


def write_csv(path: Path, runs: Sequence[RunSummary]) -> None:
    """One row per run and arrived percentage: allocation, fragmentation, frag ratio."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["policy", "seed", "arrived_pct", "allocation_pct", "fragmentation_pct", "frag_ratio_pct"])
        for r in runs:
            c = r.curves
            for k in range(ARRIVED_MAX + 1):
                if not math.isnan(c.allocation[k]):
                    w.writerow([r.policy, r.seed, k, c.allocation[k], c.fragmentation[k], c.frag_ratio[k]])


def write_plot(path: Path, medians: dict[str, Binned], expected: Expected | None, title: str) -> None:
    """Allocation (left) and fragmented GPUs (right) against arrived load, a line per
    policy; the paper's medians dotted in the same colour where known."""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    x = list(range(ARRIVED_MAX + 1))
    for i, (policy, m) in enumerate(medians.items()):
        color = f"C{i}"
        ax1.plot(x, m.allocation, color=color, label=policy)
        ax2.plot(x, m.fragmentation, color=color, label=policy)
        for ax, measure in ((ax1, "allocation"), (ax2, "fragmentation")):
            ref = expected.medians.get(measure, {}).get(policy) if expected else None
            if ref:
                ks = sorted(ref)
                ax.plot(ks, [ref[k] for k in ks], color=color, linestyle=":", linewidth=1)
    ax1.plot([0, ARRIVED_MAX], [0, ARRIVED_MAX], color="grey", linewidth=0.5)
    ax1.set_ylim(60, 100)
    ax1.set_xlim(60, ARRIVED_MAX)
    ax1.set_xlabel("arrived GPU request, % of capacity")
    ax1.set_ylabel("GPU allocation, % of capacity")
    ax2.set_xlim(0, ARRIVED_MAX)
    ax2.set_xlabel("arrived GPU request, % of capacity")
    ax2.set_ylabel("fragmented GPUs, % of capacity")
    ax1.legend(title="median over seeds" + ("; dotted: paper" if expected else ""), fontsize=8)
    fig.suptitle(title)
    save(fig, path, ax1, ax2)


def write_markdown(
    path: Path,
    setup: OpenbSetup,
    runs: Sequence[RunSummary],
    medians: dict[str, Binned],
    expected: Expected | None,
    csv_name: str,
    png_name: str,
) -> None:
    seeds = sorted({r.seed for r in runs})
    lines = [
        f"# FGD fill-up: {setup.workload_name} on {Path(setup.nodes).name.removesuffix('.csv')}",
        "",
        f"Inflation to {setup.ratio}x GPU capacity, typical pod set covering {setup.coverage:.0%} of pods, "
        f"seeds {_ranges(seeds)}; medians over seeds. Allocation and fragmentation are % of the cluster's "
        "GPU capacity, at the given arrived GPU request (% of capacity)."
        + (
            " In brackets: the FGD simulator's published median (reference/perf.md §2.1)." if expected else ""
        ),
        "",
        f"![allocation against arrived load]({png_name})",
        "",
        "## GPU allocation",
        "",
        "| policy | " + " | ".join(f"{k}%" for k in REPORT_POINTS) + " |",
        "|:--|" + "--:|" * len(REPORT_POINTS),
    ]
    for policy, m in medians.items():
        lines.append(_md_row(policy, m, expected, [("allocation", k) for k in REPORT_POINTS]))
    lines += [
        "",
        "## Fragmentation",
        "",
        "Fragmented GPUs (% of capacity) and their share of the idle GPUs (%), against the typical pod set.",
        "",
        "| policy | "
        + " | ".join(f"frag@{k}%" for k in FRAG_POINTS)
        + " | "
        + " | ".join(f"share of idle@{k}%" for k in FRAG_POINTS)
        + " |",
        "|:--|" + "--:|" * (2 * len(FRAG_POINTS)),
    ]
    for policy, m in medians.items():
        cols = [("fragmentation", k) for k in FRAG_POINTS] + [("frag_ratio", k) for k in FRAG_POINTS]
        lines.append(_md_row(policy, m, expected, cols))
    lines += [
        "",
        "## Runs",
        "",
        "| policy | runs | arrivals (median) | failed pods (median) | seconds per run (min / median / max) |",
        "|:--|--:|--:|--:|--:|",
    ]
    for policy in medians:
        mine = [r for r in runs if r.policy == policy]
        secs = [r.seconds for r in mine]
        lines.append(
            f"| {policy} | {len(mine)} | {statistics.median(r.arrivals for r in mine):.0f} | "
            f"{statistics.median(r.failed for r in mine):.0f} | "
            f"{min(secs):.1f} / {statistics.median(secs):.1f} / {max(secs):.1f} |"
        )
    lines += ["", f"Every run's curve at each arrived percentage is in [{csv_name}]({csv_name}).", ""]
    path.write_text("\n".join(lines))


def _pick(values: Any, points: Sequence[int]) -> dict[str, float | None]:
    return {str(k): (None if math.isnan(values[k]) else float(values[k])) for k in points}


def _cell(ours: float, paper: float | None) -> str:
    if math.isnan(ours):
        return "-"
    return f"{ours:.2f}" + (f" ({paper:.2f})" if paper is not None else "")


def _md_row(policy: str, m: Binned, expected: Expected | None, cols: list[tuple[str, int]]) -> str:
    """A Markdown table row: each (measure, arrived %) as ours (paper, difference)."""
    cells = [
        _md(getattr(m, measure)[k], expected and expected.get(measure, policy, k)) for measure, k in cols
    ]
    return f"| {policy} | " + " | ".join(cells) + " |"


def _md(ours: float, paper: float | None) -> str:
    if math.isnan(ours):
        return "-"
    if paper is None:
        return f"{ours:.2f}"
    return f"{ours:.2f} ({paper:.2f}, {ours - paper:+.2f})"


def _ranges(values: Sequence[int]) -> str:
    """``42-51`` for a run of consecutive seeds, commas otherwise."""
    if not values:
        return ""
    if list(values) == list(range(values[0], values[-1] + 1)) and len(values) > 2:
        return f"{values[0]}-{values[-1]}"
    return ", ".join(str(v) for v in values)
