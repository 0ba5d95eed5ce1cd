"""Why is this experiment where it is? How many trials run, wait (and why), were stopped
early (by which rule) or failed, and which is best; a pure function of the objects.

The waiting reason of a trial is its job's: the Workload's pending reason (QuotaExhausted,
InsufficientResources, ...) that the TrainingJob controller mirrors into the job's Queued
condition and the Experiment controller into the trial's status. ``muster why job/<trial>``
explains one of them in full (queue position, quota, nodes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from muster.api.conditions import latest_condition
from muster.api.labels import REPLICA_TYPE_LABEL
from muster.controllers.insight.explain.facts import event_row
from muster.store.events import refers_to

__all__ = ["ExperimentExplanation", "TrialGroup", "explain_experiment"]

Obj = Mapping[str, Any]
_EVENTS = 8
_STOP_WORDS = {
    "PausedAtRung": "paused at an ASHA rung (may be promoted)",
    "MedianStopped": "stopped by the median rule",
}


@dataclass
class TrialGroup:
    """Trials in the same state for the same reason."""

    state: str
    reason: str
    message: str  # the first trial's
    trials: list[str] = field(default_factory=list)


@dataclass
class RunningTrial:
    trial: str
    where: str  # node and GPUs of its pods
    reports: int
    latest: float | None
    parameters: dict[str, str]


@dataclass
class ExperimentExplanation:
    kind: str
    namespace: str | None
    name: str
    state: str
    summary: str
    reason: str = ""
    message: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    running: list[RunningTrial] = field(default_factory=list)
    waiting: list[TrialGroup] = field(default_factory=list)
    stopped: list[TrialGroup] = field(default_factory=list)
    failed: list[TrialGroup] = field(default_factory=list)
    best: dict[str, Any] | None = None
    gpu_seconds: float = 0.0
    unblock: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        # Only this key needs camelCase; parameter names inside stay as the user wrote them.
        out = asdict(self)
        out["gpuSeconds"] = out.pop("gpu_seconds")
        return out


def explain_experiment(
    exp: Obj, trials: Sequence[Obj], pods: Sequence[Obj], events: Sequence[Obj]
) -> ExperimentExplanation:
    """The explanation of ``exp`` from its trials, their pods and the namespace's events."""
    meta, spec, status = exp["metadata"], exp.get("spec") or {}, exp.get("status") or {}
    cond = latest_condition(dict(exp))
    state = cond["type"] if cond else "Created"
    ex = ExperimentExplanation(
        kind="Experiment", namespace=meta.get("namespace"), name=meta["name"], state=state, summary=""
    )
    ex.reason, ex.message = (cond or {}).get("reason") or "", (cond or {}).get("message") or ""
    ex.gpu_seconds = float(status.get("gpuSeconds") or 0.0)
    ordered = sorted(trials, key=lambda t: int((t.get("spec") or {}).get("index") or 0))
    metric = ((spec.get("objective") or {}).get("objectiveMetricName")) or "objective"
    by_phase: dict[str, list[Obj]] = {}
    for t in ordered:
        by_phase.setdefault((t.get("status") or {}).get("phase") or "Pending", []).append(t)
    ex.counts = {phase: len(ts) for phase, ts in by_phase.items()}
    ex.running = [
        _running(t, pods, metric) for t in by_phase.get("Running", []) + by_phase.get("Stopping", [])
    ]
    ex.waiting = _groups(by_phase.get("Pending", []), "Pending")
    ex.stopped = _groups(by_phase.get("EarlyStopped", []), "EarlyStopped")
    ex.failed = _groups(
        by_phase.get("Failed", []) + by_phase.get("MetricsUnavailable", []) + by_phase.get("Killed", []),
        "Failed",
    )
    best = status.get("currentOptimalTrial")
    if best:
        ex.best = {
            "trial": best.get("bestTrialName"),
            "value": best.get("objectiveValue"),
            "metric": metric,
            "parameters": {a["name"]: a["value"] for a in best.get("parameterAssignments") or []},
        }
    ex.summary = _summary(ex, spec, len(ordered))
    ex.unblock = _hints(ex, spec, state)
    names = {t["metadata"]["name"] for t in ordered}
    picked = [
        e
        for e in events
        if refers_to(e, exp)
        or (
            (e.get("involvedObject") or {}).get("kind") == "Trial"
            and e["involvedObject"].get("name") in names
        )
    ]
    picked.sort(key=lambda e: e.get("lastTimestamp") or "")
    ex.events = [event_row(e) for e in picked[-_EVENTS:]]
    return ex


def _running(trial: Obj, pods: Sequence[Obj], metric: str) -> RunningTrial:
    name = trial["metadata"]["name"]
    mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("muster.dev/job-name") == name]
    places = []
    for p in sorted(mine, key=lambda p: p["metadata"]["name"]):
        spec = p.get("spec") or {}
        role = str((p["metadata"].get("labels") or {}).get(REPLICA_TYPE_LABEL) or "")
        gpus = ",".join(str(g) for g in spec.get("gpus") or [])
        places.append(
            f"{role or p['metadata']['name']} on {spec.get('nodeName')}" + (f" GPU {gpus}" if gpus else "")
        )
    observation = next(
        (m for m in (trial.get("status") or {}).get("observation") or [] if m.get("name") == metric), {}
    )
    return RunningTrial(
        trial=name,
        where="; ".join(places) or "no pod placed yet",
        reports=int(observation.get("reports") or 0),
        latest=observation.get("latest"),
        parameters={
            a["name"]: a["value"] for a in (trial.get("spec") or {}).get("parameterAssignments") or []
        },
    )


def _groups(trials: Sequence[Obj], state: str) -> list[TrialGroup]:
    groups: dict[str, TrialGroup] = {}
    for t in trials:
        status = t.get("status") or {}
        reason = status.get("reason") or ("Created" if state == "Pending" else status.get("phase") or state)
        group = groups.setdefault(reason, TrialGroup(state, reason, status.get("message") or ""))
        group.trials.append(t["metadata"]["name"])
    return sorted(groups.values(), key=lambda g: (-len(g.trials), g.reason))


def _summary(ex: ExperimentExplanation, spec: Obj, total: int) -> str:
    ref = f"experiment/{ex.name}"
    parts = [f"{len(ex.running)} running"]
    waiting = sum(len(g.trials) for g in ex.waiting)
    if waiting:
        why = ", ".join(f"{len(g.trials)} {g.reason}" for g in ex.waiting)
        parts.append(f"{waiting} waiting ({why})")
    stopped = sum(len(g.trials) for g in ex.stopped)
    if stopped:
        why = ", ".join(f"{len(g.trials)} {_STOP_WORDS.get(g.reason, g.reason)}" for g in ex.stopped)
        parts.append(f"{stopped} stopped early ({why})")
    done = ex.counts.get("Succeeded", 0)
    if done:
        parts.append(f"{done} succeeded")
    failed = sum(len(g.trials) for g in ex.failed)
    if failed:
        parts.append(f"{failed} failed or killed")
    limit = spec.get("maxTrialCount")
    of = f" of {limit}" if limit else ""
    head = {
        "Succeeded": f"{ref} succeeded ({ex.reason})",
        "Failed": f"{ref} failed ({ex.reason})",
    }.get(ex.state, f"{ref} is {ex.state.lower()}")
    text = f"{head}: {total}{of} trials, " + ", ".join(parts)
    if ex.best:
        params = ", ".join(f"{k}={v}" for k, v in ex.best["parameters"].items())
        text += f"; best {ex.best['trial']} with {ex.best['metric']}={ex.best['value']:.6g} ({params})"
    return text


def _hints(ex: ExperimentExplanation, spec: Obj, state: str) -> list[str]:
    hints = []
    for g in ex.waiting:
        if g.reason not in ("Created", "Queued", "Admitted", "Promoted", "Preempted", "Running"):
            hints.append(
                f"{len(g.trials)} trial(s) wait: {g.reason}: {g.message} (muster why job/{g.trials[0]})"
            )
    if state == "Failed" and ex.failed:
        first = ex.failed[0]
        hints.append(f"{first.trials[0]} {first.reason}: {first.message} (muster why job/{first.trials[0]})")
    if any(g.reason == "MetricsUnavailable" for g in ex.failed):
        metric = (spec.get("objective") or {}).get("objectiveMetricName")
        hints.append(f"trials must print {metric}=<value> lines (or write them to $MUSTER_METRICS_FILE)")
    return hints
