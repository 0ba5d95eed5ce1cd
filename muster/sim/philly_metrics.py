"""What a timed replay measured: completion times, queueing delays, utilization, queue
shares against quotas, preemptions.

* Job completion time (JCT): completion minus submission, for jobs that finished.
* Queueing delay: first admission minus submission (time spent waiting after a preemption
  shows in the JCT, not here), for jobs that started.
* GPU utilization: allocated GPUs / cluster GPUs, time-weighted; over the whole replay (from
  the first submission to the last completion) and per ``bucket`` seconds (hourly).
* Per queue: its nominal quota as a share of the cluster, its share of the GPU-time the jobs
  asked for, the share of the GPU-time it got, its average GPUs in use against its quota,
  and the GPU-hours it borrowed above nominal.
* Preemptions: count by reason, jobs preempted, GPU-hours of work lost (run since the last
  checkpoint).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from muster.sim.timed import ReplayResult

__all__ = ["QueueShare", "ReplayMetrics", "Stats", "compute_metrics", "utilization_series"]


@dataclass(slots=True)
class Stats:
    """Mean and percentiles of a sample, in seconds (NaN when empty)."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Stats:
        if not len(values):
            return cls(0, *(float("nan"),) * 4)
        p50, p95, p99 = np.percentile(values, [50, 95, 99])
        return cls(len(values), float(values.mean()), float(p50), float(p95), float(p99))

    def to_dict(self) -> dict[str, float | int | None]:
        """Seconds, None where there was nothing to measure (JSON has no NaN)."""
        values = {"mean": self.mean, "p50": self.p50, "p95": self.p95, "p99": self.p99}
        return {"count": self.count} | {k: None if np.isnan(v) else round(v, 3) for k, v in values.items()}


@dataclass(slots=True)
class QueueShare:
    """One queue (virtual cluster): quota and what it asked for and got."""

    name: str
    jobs: int
    nominal_gpus: int
    quota_pct: float  # nominal / cluster GPUs
    demand_pct: float  # share of the GPU-time the replayed jobs asked for
    used_pct: float  # share of the GPU-time allocated during the replay
    avg_gpus: float  # time-weighted GPUs in use
    vs_quota: float  # avg_gpus / nominal (inf without quota)
    borrowed_gpu_hours: float
    jct_mean: float
    wait_p95: float


@dataclass(slots=True)
class ReplayMetrics:
    name: str
    jobs: int
    finished: int
    never_started: int
    dropped: int
    jct: Stats
    wait: Stats
    utilization_pct: float
    span_seconds: float
    preemptions: int
    preempted_jobs: int
    lost_gpu_hours: float
    preemption_reasons: dict[str, int]
    queues: list[QueueShare] = field(default_factory=list)
    seconds: float = 0.0
    cycles: int = 0
    skipped: int = 0


def compute_metrics(r: ReplayResult) -> ReplayMetrics:
    jobs = r.jobs
    finished = ~np.isnan(r.finish)
    started = ~np.isnan(r.start)
    jct = (r.finish - jobs.submit)[finished]
    wait = (r.start - jobs.submit)[started]
    span = max(r.end_time, 1e-9)
    gpus = r.cluster.gpus
    used_total = float(r.queue_gpu_seconds.sum())
    demand = jobs.gpu_seconds_by_queue()
    demand_total = float(demand.sum()) or 1.0
    queues = []
    for q, cfg in enumerate(r.queues):
        mine = jobs.queue == q
        avg = float(r.queue_gpu_seconds[q]) / span
        queues.append(
            QueueShare(
                name=cfg.name,
                jobs=int(mine.sum()),
                nominal_gpus=cfg.nominal_gpus,
                quota_pct=100.0 * cfg.nominal_gpus / gpus,
                demand_pct=100.0 * float(demand[q]) / demand_total,
                used_pct=100.0 * float(r.queue_gpu_seconds[q]) / used_total if used_total else 0.0,
                avg_gpus=avg,
                vs_quota=avg / cfg.nominal_gpus if cfg.nominal_gpus else float("inf"),
                borrowed_gpu_hours=float(r.queue_borrowed_seconds[q]) / 3600.0,
                jct_mean=float(np.mean((r.finish - jobs.submit)[mine & finished]))
                if (mine & finished).any()
                else float("nan"),
                wait_p95=float(np.percentile((r.start - jobs.submit)[mine & started], 95))
                if (mine & started).any()
                else float("nan"),
            )
        )
    return ReplayMetrics(
        name=r.spec.name,
        jobs=len(jobs),
        finished=int(finished.sum()),
        never_started=int((~started & ~r.dropped).sum()),
        dropped=int(r.dropped.sum()),
        jct=Stats.of(jct),
        wait=Stats.of(wait),
        utilization_pct=100.0 * used_total / (gpus * span),
        span_seconds=span,
        preemptions=int(r.preemptions.sum()),
        preempted_jobs=int((r.preemptions > 0).sum()),
        lost_gpu_hours=float(r.lost_gpu_seconds.sum()) / 3600.0,
        preemption_reasons=dict(r.preemption_reasons),
        queues=queues,
        seconds=r.seconds,
        cycles=r.cycles,
        skipped=r.skipped,
    )


def utilization_series(r: ReplayResult, bucket: float = 3600.0) -> tuple[np.ndarray, np.ndarray]:
    """Bucket start times (s) and the time-weighted utilization (%) in each bucket."""
    t, g = r.util_t, r.util_gpus.astype(np.float64)
    end = max(r.end_time, float(t[-1]))
    edges = np.arange(0.0, end + bucket, bucket)
    # integral of allocated GPUs from 0 to each change point, then to each edge
    cum = np.concatenate([[0.0], np.cumsum(g[:-1] * np.diff(t))])
    i = np.clip(np.searchsorted(t, edges, side="right") - 1, 0, len(t) - 1)
    at_edges = cum[i] + g[i] * (edges - t[i])
    per = np.diff(at_edges) / (bucket * r.cluster.gpus) * 100.0
    return edges[:-1], per
