"""The lifecycles of an Experiment and of its Trials, as explicit transition tables.

A trial's phase changes only through :func:`move_trial`, an experiment's through
:func:`move_experiment`; illegal transitions are rejected by
:func:`muster.api.lifecycle.check`, and each returns the Event to record.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from muster.api.conditions import is_true, iso, latest_condition, set_condition
from muster.api.lifecycle import EventSpec, check

__all__ = [
    "ACTIVE",
    "EXPERIMENT_TRANSITIONS",
    "FINAL",
    "TRIAL_TRANSITIONS",
    "ExperimentPhase",
    "TrialPhase",
    "experiment_phase",
    "move_experiment",
    "move_trial",
    "trial_phase",
]

Obj = dict[str, Any]


class TrialPhase(StrEnum):
    PENDING = "Pending"  # its job waits in its queue (first run, after a preemption, or promoted)
    RUNNING = "Running"  # its job runs
    STOPPING = "Stopping"  # stopped early: its pods get the checkpoint handshake; GPUs still held
    EARLY_STOPPED = "EarlyStopped"  # its pods are gone; a trial paused at an ASHA rung may be promoted
    SUCCEEDED = "Succeeded"  # its job succeeded and it reported the objective
    FAILED = "Failed"  # its job failed (or could not be made)
    METRICS_UNAVAILABLE = "MetricsUnavailable"  # its job succeeded without reporting the objective
    KILLED = "Killed"  # the experiment ended while it waited or ran


_T = TrialPhase
ACTIVE = frozenset({_T.PENDING, _T.RUNNING, _T.STOPPING})
FINAL = frozenset({_T.SUCCEEDED, _T.FAILED, _T.METRICS_UNAVAILABLE, _T.KILLED})
TRIAL_TRANSITIONS: dict[tuple[TrialPhase, TrialPhase], str] = {
    # admitted: every pod of its job runs
    (_T.PENDING, _T.RUNNING): "TrialRunning",
    # its job failed before it ran, or its job could not be made from the template
    (_T.PENDING, _T.FAILED): "TrialFailed",
    # its job ran and ended between two looks
    (_T.PENDING, _T.SUCCEEDED): "TrialSucceeded",
    (_T.PENDING, _T.METRICS_UNAVAILABLE): "TrialMetricsUnavailable",
    # the experiment ended (goal reached, too many failures) while it waited
    (_T.PENDING, _T.KILLED): "TrialKilled",
    # its job was preempted: requeued, it resumes from its checkpoint
    (_T.RUNNING, _T.PENDING): "TrialPreempted",
    # the median rule or an ASHA rung stopped it: its job is suspended
    (_T.RUNNING, _T.STOPPING): "TrialStopping",
    (_T.RUNNING, _T.SUCCEEDED): "TrialSucceeded",
    (_T.RUNNING, _T.METRICS_UNAVAILABLE): "TrialMetricsUnavailable",
    (_T.RUNNING, _T.FAILED): "TrialFailed",
    (_T.RUNNING, _T.KILLED): "TrialKilled",
    # its pods are gone (checkpointed on SIGTERM): its GPUs are back in the queue
    (_T.STOPPING, _T.EARLY_STOPPED): "TrialEarlyStopped",
    # it finished on its own before the stop reached it
    (_T.STOPPING, _T.SUCCEEDED): "TrialSucceeded",
    (_T.STOPPING, _T.METRICS_UNAVAILABLE): "TrialMetricsUnavailable",
    (_T.STOPPING, _T.FAILED): "TrialFailed",
    # an ASHA promotion: its job is resumed and queues; it resumes from its checkpoint
    (_T.EARLY_STOPPED, _T.PENDING): "TrialPromoted",
}
_WARNING = (_T.FAILED, _T.METRICS_UNAVAILABLE, _T.KILLED)


def trial_phase(trial: Obj) -> TrialPhase:
    return TrialPhase((trial.get("status") or {}).get("phase") or "Pending")


def move_trial(trial: Obj, to: TrialPhase, reason: str, message: str, now: float) -> EventSpec:
    """Move ``trial`` (in place) to ``to``; the Event to record (on the Experiment)."""
    frm = trial_phase(trial)
    name = trial["metadata"]["name"]
    event = check(TRIAL_TRANSITIONS, frm, to, f"Trial {trial['metadata'].get('namespace')}/{name}")
    status = trial.setdefault("status", {})
    status.update(phase=to.value, reason=reason, message=message)
    if to is TrialPhase.RUNNING:
        status.setdefault("startTime", iso(now))
    if to in FINAL or to is TrialPhase.EARLY_STOPPED:
        status["completionTime"] = iso(now)
    elif to is TrialPhase.PENDING:
        status.pop("completionTime", None)
    kind = "Warning" if to in _WARNING else "Normal"
    return EventSpec(kind, event, f"{name}: {message}" if message else name)


class ExperimentPhase(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


_E = ExperimentPhase
EXPERIMENT_TRANSITIONS: dict[tuple[ExperimentPhase | None, ExperimentPhase], str] = {
    # the controller saw it and stored its sampler's seed
    (None, _E.CREATED): "created",
    # it creates trials
    (_E.CREATED, _E.RUNNING): "running",
    # the goal was reached, maxTrialCount trials ended, or the space is exhausted
    (_E.RUNNING, _E.SUCCEEDED): "succeeded",
    # more than maxFailedTrialCount trials failed
    (_E.RUNNING, _E.FAILED): "failed",
    # it ended at maxTrialCount and maxTrialCount was raised: it runs on
    (_E.SUCCEEDED, _E.RUNNING): "restarted",
}


def experiment_phase(exp: Obj) -> ExperimentPhase | None:
    """Succeeded or Failed when one holds, else the phase condition that turned True last."""
    for terminal in (_E.SUCCEEDED, _E.FAILED):
        if is_true(exp, terminal):
            return terminal
    cond = latest_condition(exp)
    if cond is None:
        return None
    try:
        return ExperimentPhase(cond["type"])
    except ValueError:
        return None


def move_experiment(exp: Obj, to: ExperimentPhase, reason: str, message: str, now: float) -> EventSpec:
    """Move ``exp`` (in place) to ``to``: its condition True, the previous phase's False
    (Created stays True)."""
    frm = experiment_phase(exp)
    meta = exp["metadata"]
    check(EXPERIMENT_TRANSITIONS, frm, to, f"Experiment {meta.get('namespace')}/{meta['name']}")
    if frm is not None and frm not in (to, ExperimentPhase.CREATED):
        set_condition(exp, frm.value, "False", reason, message, now)
    set_condition(exp, to.value, "True", reason, message, now)
    status = exp.setdefault("status", {})
    if to in (_E.SUCCEEDED, _E.FAILED):
        status["completionTime"] = iso(now)
    elif to is _E.RUNNING:
        status.pop("completionTime", None)
    return EventSpec("Warning" if to is _E.FAILED else "Normal", reason, message)
