"""Loader of Microsoft's Philly trace as processed by the Pollux artifact (``philly/philly.csv``).

Columns ``timestamp,duration,num_gpus,gpu_time,cluster``: submit time (``YYYY-MM-DD HH:MM:SS``),
run time in seconds, GPUs, their product, and the virtual cluster (VC) that submitted the
job. The VC is the job's queue. :class:`PhillyJobs` holds the jobs as NumPy arrays sorted by
submit time (ties keep file order), times in seconds from the first submission.

:func:`pollux_sample` draws a workload the way Pollux's ``workload.py`` does (jobs of at least
60 s and under 1000 GPU-hours, submitted at a time of day inside an 8-hour window starting
at hour 2 of any day, sampled without replacement, arriving at that time of day); unlike
Pollux it keeps each job's own GPU count and duration, since the applications' throughput
models that Pollux uses to derive durations are not part of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from muster.api.errors import FieldError, InvalidObject
from muster.sim.traces import column, read_csv, resolve

__all__ = ["DEFAULT_FILE", "FOLDER", "PhillyJobs", "load_philly", "philly_path", "pollux_sample"]

FOLDER = "philly"
DEFAULT_FILE = "philly"


@dataclass(slots=True)
class PhillyJobs:
    """Jobs as parallel arrays: ``submit`` (s from ``origin``), ``duration`` (s), ``gpus``,
    ``queue`` (index into ``queues``, the VC names sorted)."""

    origin: datetime
    submit: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    queue: np.ndarray
    queues: list[str]

    def __len__(self) -> int:
        return len(self.submit)

    def take(self, idx: np.ndarray) -> PhillyJobs:
        """The jobs at ``idx`` (a mask or indices), re-sorted by submit time."""
        sel = np.flatnonzero(idx) if idx.dtype == bool else np.asarray(idx)
        order = sel[np.argsort(self.submit[sel], kind="stable")]
        return PhillyJobs(
            self.origin,
            self.submit[order],
            self.duration[order],
            self.gpus[order],
            self.queue[order],
            self.queues,
        )

    def gpu_seconds_by_queue(self) -> np.ndarray:
        """GPU-seconds requested per queue (what derived quotas are proportional to)."""
        return np.bincount(self.queue, weights=self.gpus * self.duration, minlength=len(self.queues))

    def window(self, start_day: float, days: float | None) -> PhillyJobs:
        """Jobs submitted in ``[start_day, start_day + days)`` days after the origin, with
        times re-based to the window start."""
        lo = start_day * 86400.0
        hi = np.inf if days is None else lo + days * 86400.0
        out = self.take((self.submit >= lo) & (self.submit < hi))
        out.submit = out.submit - lo
        return out


def philly_path(root: Path, name: str = DEFAULT_FILE) -> Path:
    return resolve(root, FOLDER, name)


def load_philly(path: Path) -> PhillyJobs:
    """Read and check the CSV; raises :class:`InvalidObject` naming each bad cell."""
    table = read_csv(path, ("timestamp", "duration", "num_gpus", "cluster"))
    errors: list[FieldError] = []
    stamps = column(table, "timestamp", _parse_time, "must be a time like 2017-10-09 07:01:55", None, errors)
    duration = column(table, "duration", float, "must be seconds >= 0", _finite_nonneg, errors)
    gpus = column(table, "num_gpus", int, "must be a GPU count >= 1", lambda g: g >= 1, errors)
    vcs = column(table, "cluster", str, "must name the virtual cluster", bool, errors)
    if errors:
        raise InvalidObject(errors, kind="trace", name=path.name)
    if not stamps:
        raise InvalidObject(
            [FieldError(path.name, "must hold at least one job")], kind="trace", name=path.name
        )
    origin = min(stamps)
    submit = np.array([(s - origin).total_seconds() for s in stamps])
    queues = sorted(set(vcs))
    index = {v: i for i, v in enumerate(queues)}
    order = np.argsort(submit, kind="stable")
    return PhillyJobs(
        origin,
        submit[order],
        np.array(duration)[order],
        np.array(gpus, dtype=np.int64)[order],
        np.array([index[v] for v in vcs], dtype=np.int32)[order],
        queues,
    )


def pollux_sample(
    jobs: PhillyJobs, count: int = 160, start_hour: int = 2, hours: int = 8, seed: int = 0
) -> PhillyJobs:
    """``count`` jobs drawn as Pollux's workload generator draws them (see module doc),
    arriving at their time of day after ``start_hour``; raises ValueError when fewer
    jobs qualify."""
    day_seconds = (jobs.submit + _seconds_into_day(jobs.origin) - start_hour * 3600.0) % 86400.0
    ok = (jobs.duration >= 60) & (jobs.gpus * jobs.duration < 1000 * 3600) & (day_seconds < hours * 3600.0)
    pool = np.flatnonzero(ok)
    if len(pool) < count:
        raise ValueError(f"only {len(pool)} jobs fit the sampling window; ask for at most that many")
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(pool, size=count, replace=False))
    arrive = np.floor(day_seconds[picked])
    o = np.argsort(arrive, kind="stable")
    sel = picked[o]
    return PhillyJobs(
        jobs.origin, arrive[o], jobs.duration[sel], jobs.gpus[sel], jobs.queue[sel], jobs.queues
    )


def _seconds_into_day(t: datetime) -> float:
    return t.hour * 3600.0 + t.minute * 60.0 + t.second


def _parse_time(text: str) -> datetime:
    # fromisoformat is ten times faster than strptime on 82k rows; the length check keeps
    # the accepted form to the trace's own
    if len(text) != 19:
        raise ValueError(text)
    return datetime.fromisoformat(text)


def _finite_nonneg(v: float) -> bool:
    return bool(np.isfinite(v)) and v >= 0
