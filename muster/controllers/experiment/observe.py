"""One trial during a pass: its metrics read, its phase following its job, the early-stopping
rules applied, and the GPU-seconds its pods held.

Everything here edits a copy of the Trial (:class:`TrialWork`); the controller stores the
changed trials first and only then acts on their jobs (create, suspend, resume), so a decision
is in the store before anything acts on it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.api.conditions import epoch, iso
from muster.api.experiment_plan import SearchPlan
from muster.api.lifecycle import EventSpec, is_final, phase
from muster.controllers.experiment.collect import TrialRecord, grew, read_file, read_stream
from muster.controllers.experiment.lifecycle import ACTIVE, TrialPhase, move_trial, trial_phase
from muster.controllers.experiment.metrics import LineParser
from muster.controllers.experiment.stopping import RungEntry, asha_decision, median_stop, next_milestone
from muster.controllers.experiment.trials import job_state, metrics_file, primary_pod
from muster.runtime.base import PodRef, SupportsLogs
from muster.runtime.local.logs import container_log

__all__ = [
    "PAUSED_AT_RUNG",
    "TrialWork",
    "account_gpus",
    "collect",
    "decide",
    "follow_job",
    "metrics_source",
    "rung_entries",
]

Obj = dict[str, Any]
PAUSED_AT_RUNG = "PausedAtRung"
MEDIAN_STOPPED = "MedianStopped"


@dataclass
class TrialWork:
    """A trial being reconciled: an editable copy, its job and pods, its events."""

    original: Obj
    job: Obj | None
    pods: list[Obj]
    record: TrialRecord
    trial: Obj = field(init=False)
    events: list[EventSpec] = field(default_factory=list)
    metrics_changed: bool = False

    def __post_init__(self) -> None:
        # Only the status is edited (spec and metadata are read): copy just that.
        self.trial = {**self.original, "status": copy.deepcopy(self.original.get("status") or {})}
        self.trial["status"].setdefault("phase", "Pending")

    @property
    def name(self) -> str:
        return self.trial["metadata"]["name"]

    @property
    def index(self) -> int:
        return int(self.trial["spec"]["index"])

    @property
    def status(self) -> Obj:
        return self.trial["status"]

    @property
    def phase(self) -> TrialPhase:
        return trial_phase(self.trial)

    def move(self, to: TrialPhase, reason: str, message: str, now: float) -> None:
        self.events.append(move_trial(self.trial, to, reason, message, now))

    def note(self, reason: str, message: str) -> None:
        """Reword the current phase (no event)."""
        self.status["reason"], self.status["message"] = reason, message

    @property
    def changed(self) -> bool:
        return self.trial.get("status") != (self.original.get("status") or {"phase": "Pending"})


def collect(
    work: TrialWork, exp: Obj, home: Path, logs: SupportsLogs | None, parser: LineParser, now: float
) -> None:
    """Read what the trial's primary container and metrics file gained since last time."""
    ns = work.trial["metadata"].get("namespace") or "default"
    pod, container = primary_pod(exp, work.name)
    live = next((p for p in work.pods if p["metadata"]["name"] == pod), None)
    final = live is None or is_final(live)
    record = work.record
    lines: list[str] = []
    kind = (exp["spec"].get("metricsCollectorSpec") or {}).get("collector", {}).get("kind", "StdOut")
    if kind == "StdOut":
        path = container_log(home, ns, pod, container)
        cursor = record.cursors.get("stdout")
        rotated = path.with_name(path.name + ".1")
        # Read before (it has an inode), or there: the runtime keeps its logs as files here.
        here = logs is None or "inode" in (cursor or {}) or path.exists() or rotated.exists()
        if here and (final or grew(path, cursor)):  # running: one stat when nothing was printed
            got, record.cursors["stdout"] = read_file(path, cursor, final)
            lines += got
        elif not here and live is not None:
            ref = PodRef(ns, pod, live["metadata"].get("uid") or "")
            got, record.cursors["stdout"] = read_stream(logs, ref, container, cursor)
            lines += got
    elif kind == "File":
        # The file outlives the trial's pods; it is complete once the trial ended.
        got, record.cursors["file"] = read_file(
            metrics_file(home, work.trial), record.cursors.get("file"), final
        )
        lines += got
    if lines:
        record.take(lines, parser, now)
    if record.news:  # read now, or by the metrics watch since the last pass (.watch)
        record.news = False
        work.metrics_changed = True


def metrics_source(exp: Obj, trial: Obj, home: Path) -> tuple[Path, str] | None:
    """The file on this machine that holds the trial's metrics, and its cursor's name: the
    local runtime's log of the primary container (StdOut), or the metrics file (File)."""
    kind = (exp["spec"].get("metricsCollectorSpec") or {}).get("collector", {}).get("kind", "StdOut")
    if kind == "File":
        return metrics_file(home, trial), "file"
    if kind != "StdOut":
        return None
    pod, container = primary_pod(exp, trial["metadata"]["name"])
    return container_log(home, trial["metadata"].get("namespace") or "default", pod, container), "stdout"


def follow_job(work: TrialWork, exp: Obj, now: float) -> None:
    """Move the trial as its job moved; a job that ended decides the trial's outcome."""
    job = work.job
    current = work.phase
    if job is None or current not in ACTIVE:
        return
    state = job_state(job)
    if state.state == "running":
        if current is TrialPhase.PENDING:
            work.move(TrialPhase.RUNNING, "Running", state.message or "its job runs", now)
    elif state.state == "succeeded":
        _finish(work, exp, now)
    elif state.state == "failed":
        work.move(TrialPhase.FAILED, state.reason, state.message or "its job failed", now)
    elif state.state == "preempted" or (state.state == "waiting" and current is TrialPhase.RUNNING):
        if current is TrialPhase.RUNNING:
            work.move(
                TrialPhase.PENDING, "Preempted", f"{state.message}; it resumes from its checkpoint", now
            )
    elif state.state == "suspended":
        live = [p for p in work.pods if not is_final(p)]
        if current is TrialPhase.STOPPING and not live:
            work.move(
                TrialPhase.EARLY_STOPPED,
                work.status.get("reason") or "EarlyStopped",
                work.status.get("message") or "",
                now,
            )
    if work.phase is TrialPhase.PENDING and state.state == "waiting":
        work.note(state.reason, state.message)


def decide(
    work: TrialWork,
    exp: Obj,
    plan: SearchPlan,
    entries: list[RungEntry],
    completed: Sequence[Mapping[int, float]],
    now: float,
) -> None:
    """Apply the stopping rule to a running trial: record the ASHA rungs it reached and has not
    been judged at (continue or pause there), or stop it by the median rule. Both look at what
    is stored and counted, not at what arrived this pass, so a report read while the trial was
    still starting is judged once it runs."""
    if work.phase is not TrialPhase.RUNNING:
        return
    objective = exp["spec"]["objective"]
    maximize = objective["type"] == "maximize"
    curve = work.record.series.curve(objective["objectiveMetricName"])
    reports = work.record.series.reports.get(objective["objectiveMetricName"], 0)
    if plan.asha is not None:
        bracket = int(work.trial["spec"].get("bracket") or 0)
        rungs = work.status.setdefault("rungs", [])
        while True:
            nxt = next_milestone(plan.asha, bracket, len(rungs))
            if nxt is None or reports < nxt[1]:
                return
            rung, step = nxt
            value = curve.get(step)
            if value is None:  # thinned out (only past thousands of reports): the nearest before
                value = curve[max(s for s in curve if s <= step)]
            goes_on = asha_decision(
                entries, work.index, bracket, rung, value, plan.asha.reduction_factor, maximize
            )
            rungs.append(
                {
                    "rung": rung,
                    "step": step,
                    "value": value,
                    "decision": "Continued" if goes_on else "Paused",
                    "time": iso(now),
                }
            )
            entries.append(RungEntry(work.name, work.index, bracket, rung, value, paused=not goes_on))
            if not goes_on:
                here = sum(1 for e in entries if (e.bracket, e.rung) == (bracket, rung))
                work.move(
                    TrialPhase.STOPPING,
                    PAUSED_AT_RUNG,
                    f"paused at rung {rung} (step {step}): "
                    f"{objective['objectiveMetricName']}={value:.6g} is not in "
                    f"the top 1/{plan.asha.reduction_factor} of the {here} trial(s) there; "
                    "it resumes from its checkpoint if promoted",
                    now,
                )
                return
    if plan.median is not None:
        why = median_stop(curve, completed, plan.median, maximize)
        if why is not None:
            work.move(TrialPhase.STOPPING, MEDIAN_STOPPED, f"stopped by the median rule: {why}", now)


def rung_entries(works: Sequence[TrialWork]) -> list[RungEntry]:
    """Every rung record of the trials; the last one of a trial paused there is promotable."""
    out = []
    for w in works:
        rungs = w.status.get("rungs") or []
        paused_here = w.phase is TrialPhase.EARLY_STOPPED and w.status.get("reason") == PAUSED_AT_RUNG
        bracket = int(w.trial["spec"].get("bracket") or 0)
        for i, r in enumerate(rungs):
            last = i == len(rungs) - 1
            out.append(
                RungEntry(
                    w.name,
                    w.index,
                    bracket,
                    int(r["rung"]),
                    float(r["value"]),
                    paused=paused_here and last and r["decision"] == "Paused",
                )
            )
    return out


def account_gpus(work: TrialWork, now: float) -> None:
    """Add the GPU-seconds of the trial's pods that ended; keep the running ones open."""
    runs: dict[str, dict[str, float]] = work.status.setdefault("openRuns", {})
    by_uid = {p["metadata"].get("uid"): p for p in work.pods}
    for pod in work.pods:
        uid = pod["metadata"].get("uid")
        start = epoch((pod.get("status") or {}).get("startTime"))
        gpus = _gpus(pod)
        if uid and start is not None and gpus and uid not in runs and not is_final(pod):
            runs[uid] = {"start": start, "gpus": gpus}
    for uid in list(runs):
        pod = by_uid.get(uid)
        if pod is not None and not is_final(pod):
            continue
        end = epoch((pod.get("status") or {}).get("finishTime")) if pod is not None else None
        run = runs.pop(uid)
        used = max(0.0, (end if end is not None else now) - run["start"]) * run["gpus"]
        work.status["gpuSeconds"] = round(float(work.status.get("gpuSeconds") or 0.0) + used, 3)


def gpu_seconds(trial: Obj, now: float) -> float:
    """GPU-seconds the trial's pods held: finished runs and the open ones up to ``now``."""
    status = trial.get("status") or {}
    total = float(status.get("gpuSeconds") or 0.0)
    for run in (status.get("openRuns") or {}).values():
        total += max(0.0, now - run["start"]) * run["gpus"]
    return total


def _finish(work: TrialWork, exp: Obj, now: float) -> None:
    objective = exp["spec"]["objective"]["objectiveMetricName"]
    if work.record.series.reports.get(objective):
        work.move(TrialPhase.SUCCEEDED, "Completed", "its job succeeded", now)
    else:
        work.move(
            TrialPhase.METRICS_UNAVAILABLE,
            "MetricsUnavailable",
            f"its job succeeded but never reported {objective} "
            f"(print {objective}=<value> lines, or write them "
            "to $MUSTER_METRICS_FILE with the File collector)",
            now,
        )


def _gpus(pod: Obj) -> float:
    spec = pod.get("spec") or {}
    if spec.get("gpuMilli"):
        return float(spec["gpuMilli"]) / 1000.0
    return float(len(spec.get("gpus") or []))


def pod_phase(pod: Obj) -> str:
    return phase(pod)
