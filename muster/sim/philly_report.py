"""Reports of Philly replays: JSON, a terminal table, CSV files, PNG plots and Markdown.

Files written (``<stem>`` is ``philly`` or the chosen name):

* ``<stem>-jobs.csv``: per replay and job, submit, duration, GPUs, queue, first start,
  completion, JCT, queueing delay, preemptions, lost GPU-seconds;
* ``<stem>-utilization.csv``: per replay and hour, allocated GPUs in % of the cluster;
* ``<stem>-queues.csv``: per replay and queue, quota, demand, usage, borrowing;
* ``<stem>-utilization.png`` (daily average utilization per replay), ``<stem>-jct.png``
  (JCT and queueing-delay distributions), ``<stem>-queues.png`` (each queue's share of GPU
  time against its quota share);
* ``<stem>.md``: the tables and the plots.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from muster.sim.philly_metrics import ReplayMetrics, compute_metrics, utilization_series
from muster.sim.plots import pyplot, save
from muster.sim.timed import ReplayResult

__all__ = ["Report", "summary_json", "terminal_table", "write_reports"]


class Report:
    """Replays with their metrics, computed once."""

    def __init__(self, results: Sequence[ReplayResult]) -> None:
        self.results = list(results)
        self.metrics = [compute_metrics(r) for r in self.results]


def summary_json(report: Report, setup: dict[str, Any]) -> dict[str, Any]:
    """One object: the setup, then per replay its metrics (seconds; utilization in %)."""
    return {"setup": setup, "runs": [_metrics_json(m) for m in report.metrics]}


def terminal_table(report: Report) -> Table:
    """The headline numbers; the Markdown report and the JSON carry the rest."""
    t = Table(title="Philly replay (hours)")
    for col in ("replay", "JCT mean", "JCT p95", "delay mean", "delay p95", "util %", "preempted"):
        t.add_column(col, justify="left" if col == "replay" else "right")
    for m in report.metrics:
        t.add_row(
            m.name,
            _h(m.jct.mean),
            _h(m.jct.p95),
            _h(m.wait.mean),
            _h(m.wait.p95),
            f"{m.utilization_pct:.1f}",
            str(m.preemptions),
        )
    return t


def write_reports(out: Path, stem: str, report: Report, setup: dict[str, Any]) -> list[Path]:
    """Write every file; returns their paths (the Markdown first)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}{suffix}" for suffix in (".md", "-jobs.csv", "-utilization.csv", "-queues.csv")]
    pngs = [out / f"{stem}-{name}.png" for name in ("utilization", "jct", "queues")]
    _jobs_csv(paths[1], report)
    _utilization_csv(paths[2], report)
    _queues_csv(paths[3], report)
    _plot_utilization(pngs[0], report)
    _plot_jct(pngs[1], report)
    _plot_queues(pngs[2], report)
    _markdown(paths[0], report, setup, [p.name for p in paths[1:]], [p.name for p in pngs])
    return paths + pngs


# -- CSV ------------------------------------------------------------------------------------


JOB_COLUMNS = (
    "replay", "job", "queue", "gpus", "submit_s", "duration_s", "start_s", "finish_s", "jct_s", "wait_s",
    "preemptions", "lost_gpu_s",
)  # fmt: skip
QUEUE_COLUMNS = (
    "replay", "queue", "jobs", "nominal_gpus", "quota_pct", "demand_pct", "used_pct", "avg_gpus",
    "avg_vs_quota", "borrowed_gpu_hours", "jct_mean_s", "wait_p95_s",
)  # fmt: skip


def _jobs_csv(path: Path, report: Report) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(JOB_COLUMNS)
        for r in report.results:
            j = r.jobs
            jct = r.finish - j.submit
            wait = r.start - j.submit
            for i in range(len(j)):
                times = (j.submit[i], j.duration[i], r.start[i], r.finish[i], jct[i], wait[i])
                w.writerow(
                    (
                        r.spec.name,
                        i,
                        j.queues[j.queue[i]],
                        int(j.gpus[i]),
                        *(_n(v) for v in times),
                        int(r.preemptions[i]),
                        _n(r.lost_gpu_seconds[i]),
                    )
                )


def _utilization_csv(path: Path, report: Report) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["replay", "hour", "utilization_pct"])
        for r in report.results:
            starts, pct = utilization_series(r)
            for s, v in zip(starts, pct, strict=True):
                w.writerow([r.spec.name, int(s // 3600), round(float(v), 3)])


def _queues_csv(path: Path, report: Report) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(QUEUE_COLUMNS)
        for m in report.metrics:
            for q in m.queues:
                values = (q.quota_pct, q.demand_pct, q.used_pct, q.avg_gpus, q.vs_quota, q.borrowed_gpu_hours)
                w.writerow(
                    (
                        m.name,
                        q.name,
                        q.jobs,
                        q.nominal_gpus,
                        *(_r(v) for v in values),
                        _r(q.jct_mean),
                        _r(q.wait_p95),
                    )
                )


# -- plots ----------------------------------------------------------------------------------


def _plot_utilization(path: Path, report: Report) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(11, 4))
    for r in report.results:
        starts, pct = utilization_series(r, bucket=86400.0)
        ax.plot(starts / 86400.0, pct, label=r.spec.name, linewidth=1)
    ax.set_xlabel("day of the replay")
    ax.set_ylabel("allocated GPUs, % of cluster (daily mean)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8)
    save(fig, path, ax)


def _plot_jct(path: Path, report: Report) -> None:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    for r in report.results:
        for ax, values in ((a1, r.finish - r.jobs.submit), (a2, r.start - r.jobs.submit)):
            v = np.sort(values[~np.isnan(values)])
            if len(v):
                ax.plot(np.maximum(v, 1.0) / 3600.0, np.arange(1, len(v) + 1) / len(v), label=r.spec.name)
    for ax, what in ((a1, "job completion time"), (a2, "queueing delay (1 s floor)")):
        ax.set_xscale("log")
        ax.set_xlabel(f"{what}, hours")
        ax.set_ylabel("share of jobs")
    a1.legend(fontsize=8)
    save(fig, path, a1, a2)


def _plot_queues(path: Path, report: Report) -> None:
    plt = pyplot()
    first = report.metrics[0]
    names = [q.name for q in first.queues]
    x = np.arange(len(names))
    width = 0.8 / (len(report.metrics) + 1)
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.bar(
        x - 0.4 + width / 2, [q.quota_pct for q in first.queues], width, label="nominal quota", color="grey"
    )
    for i, m in enumerate(report.metrics, start=1):
        ax.bar(
            x - 0.4 + width / 2 + i * width, [q.used_pct for q in m.queues], width, label=f"used: {m.name}"
        )
    ax.set_xticks(x, names, rotation=45, fontsize=8)
    ax.set_ylabel("% of cluster GPU time")
    ax.legend(fontsize=8)
    save(fig, path, ax)


# -- Markdown ---------------------------------------------------------------------------------


def _markdown(path: Path, report: Report, setup: dict[str, Any], csvs: list[str], pngs: list[str]) -> None:
    m0 = report.metrics[0]
    lines = [
        "# Philly replay",
        "",
        ", ".join(f"{k}: {v}" for k, v in setup.items()) + ".",
        "",
        f"{m0.jobs} jobs ({m0.dropped} larger than the cluster left out). Times in hours; JCT is completion "
        "minus submission, queueing delay is first admission minus submission; utilization is allocated GPUs "
        "over the replay, time-weighted.",
        "",
        "| replay | finished | JCT mean | p50 | p95 | p99 | delay mean | p50 | p95 | p99 | util % "
        "| preemptions | lost GPU-h | run s |",
        "|:--|" + "--:|" * 13,
    ]
    for m in report.metrics:
        cells = [m.name, str(m.finished)]
        cells += [_h(v) for v in (m.jct.mean, m.jct.p50, m.jct.p95, m.jct.p99)]
        cells += [_h(v) for v in (m.wait.mean, m.wait.p50, m.wait.p95, m.wait.p99)]
        cells += [
            f"{m.utilization_pct:.1f}",
            str(m.preemptions),
            f"{m.lost_gpu_hours:.0f}",
            f"{m.seconds:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    reasons = {k for m in report.metrics for k in m.preemption_reasons}
    if reasons:
        lines += ["", "Preemptions by reason:", ""]
        lines += [
            f"- {m.name}: " + ", ".join(f"{k} {v}" for k, v in sorted(m.preemption_reasons.items()))
            for m in report.metrics
            if m.preemption_reasons
        ]
    lines += ["", f"![utilization]({pngs[0]})", "", f"![JCT and queueing delay]({pngs[1]})", ""]
    lines += [
        "## Queues: share against quota",
        "",
        "Quota: nominal GPUs as % of the cluster; demand: % of the GPU-time the jobs asked for; "
        "used: % of the GPU-time allocated; avg/quota: average GPUs in use over nominal; "
        "borrowed: GPU-hours above nominal.",
        "",
        f"![queues]({pngs[2]})",
        "",
    ]
    for m in report.metrics:
        lines += [
            f"### {m.name}",
            "",
            "| queue | jobs | quota GPUs | quota % | demand % | used % | avg/quota | borrowed GPU-h "
            "| JCT mean h | delay p95 h |",
            "|:--|" + "--:|" * 9,
        ]
        for q in m.queues:
            if not q.jobs and not q.nominal_gpus:
                continue  # a virtual cluster with neither jobs nor quota here
            lines.append(
                f"| {q.name} | {q.jobs} | {q.nominal_gpus} | {q.quota_pct:.1f} | {q.demand_pct:.1f} | "
                f"{q.used_pct:.1f} | {_ratio(q.vs_quota)} | {q.borrowed_gpu_hours:.0f} | {_h(q.jct_mean)} | "
                f"{_h(q.wait_p95)} |"
            )
        lines.append("")
    lines += [
        "## Runs",
        "",
        "| replay | seconds | scheduling cycles | cycles skipped |",
        "|:--|--:|--:|--:|",
    ]
    lines += [f"| {m.name} | {m.seconds:.1f} | {m.cycles} | {m.skipped} |" for m in report.metrics]
    lines += ["", "Data: " + ", ".join(f"[{c}]({c})" for c in csvs) + ".", ""]
    path.write_text("\n".join(lines))


def _metrics_json(m: ReplayMetrics) -> dict[str, Any]:
    return {
        "replay": m.name,
        "jobs": m.jobs,
        "finished": m.finished,
        "neverStarted": m.never_started,
        "dropped": m.dropped,
        "jct": m.jct.to_dict(),
        "queueingDelay": m.wait.to_dict(),
        "utilization": round(m.utilization_pct, 3),
        "preemptions": {
            "count": m.preemptions,
            "jobs": m.preempted_jobs,
            "lostGpuHours": round(m.lost_gpu_hours, 3),
            "byReason": m.preemption_reasons,
        },
        "queues": [
            {
                "name": q.name,
                "jobs": q.jobs,
                "nominalGpus": q.nominal_gpus,
                "quotaPct": round(q.quota_pct, 3),
                "demandPct": round(q.demand_pct, 3),
                "usedPct": round(q.used_pct, 3),
                "avgGpus": round(q.avg_gpus, 3),
                "borrowedGpuHours": round(q.borrowed_gpu_hours, 3),
            }
            for q in m.queues
        ],
        "seconds": round(m.seconds, 2),
        "cycles": m.cycles,
    }


def _h(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds / 3600.0:.2f}"


def _n(v: float) -> str:
    return "" if math.isnan(v) else f"{v:.0f}"


def _r(v: float) -> float | str:
    return "" if math.isnan(v) or math.isinf(v) else round(v, 3)


def _ratio(v: float) -> str:
    return "-" if math.isinf(v) or math.isnan(v) else f"{v:.2f}"
