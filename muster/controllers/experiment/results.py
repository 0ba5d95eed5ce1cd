"""What the trials add up to: the experiment's counts, its best trial and whether it is over.

The experiment ends in Katib's order (reference/experiments.md §1.8): the best trial that
succeeded reached the goal (Succeeded, GoalReached); more than ``maxFailedTrialCount``
trials failed or never reported the objective (Failed); ``maxTrialCount`` trials were
created and none waits or runs (Succeeded, MaxTrialsReached); the grid has no point left
and none waits or runs (Succeeded, SuggestionEndReached). With ASHA, a paused trial that
may still be promoted keeps it running.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from muster.api.experiment_plan import SearchPlan
from muster.controllers.experiment.lifecycle import ACTIVE, ExperimentPhase, TrialPhase
from muster.controllers.experiment.observe import TrialWork, rung_entries
from muster.controllers.experiment.stopping import promotable

__all__ = ["best_trial", "conclusion", "counts", "objective_value"]

Obj = dict[str, Any]
_COUNTED = {
    "trialsPending": (TrialPhase.PENDING,),
    "trialsRunning": (TrialPhase.RUNNING, TrialPhase.STOPPING),
    "trialsSucceeded": (TrialPhase.SUCCEEDED,),
    "trialsFailed": (TrialPhase.FAILED,),
    "trialsKilled": (TrialPhase.KILLED,),
    "trialsEarlyStopped": (TrialPhase.EARLY_STOPPED,),
    "trialMetricsUnavailable": (TrialPhase.METRICS_UNAVAILABLE,),
}


def counts(works: Sequence[TrialWork]) -> dict[str, int]:
    out = {"trials": len(works)}
    for key, phases in _COUNTED.items():
        out[key] = sum(1 for w in works if w.phase in phases)
    return out


def objective_value(summary: Sequence[Mapping[str, Any]], objective: Mapping[str, Any]) -> float | None:
    """A trial's objective value: its min, max or latest report (metricStrategies, else by type)."""
    name = objective["objectiveMetricName"]
    strategy = "min" if objective["type"] == "minimize" else "max"
    for s in objective.get("metricStrategies") or []:
        if s.get("name") == name:
            strategy = s["value"]
    entry = next((m for m in summary if m["name"] == name), None)
    return None if entry is None else entry.get(strategy)


def best_trial(objective: Mapping[str, Any], works: Sequence[TrialWork]) -> Obj | None:
    """The trial with the best objective value so far (the earliest among equals)."""
    maximize = objective["type"] == "maximize"
    scored = [w for w in works if w.status.get("objectiveValue") is not None]
    if not scored:
        return None
    best = min(scored, key=lambda w: ((-1 if maximize else 1) * float(w.status["objectiveValue"]), w.index))
    return {
        "bestTrialName": best.name,
        "parameterAssignments": list(best.trial["spec"].get("parameterAssignments") or []),
        "objectiveValue": best.status["objectiveValue"],
        "observation": list(best.status.get("observation") or []),
    }


def conclusion(
    exp: Obj, plan: SearchPlan, works: Sequence[TrialWork]
) -> tuple[ExperimentPhase, str, str] | None:
    """(phase, reason, message) when the experiment is over, else None."""
    spec, status = exp["spec"], exp.get("status") or {}
    objective = spec["objective"]
    best = best_trial(objective, works)
    goal = objective.get("goal")
    # A running trial's value may still move (and it is not done): the goal counts finished ones.
    done = best_trial(objective, [w for w in works if w.phase is TrialPhase.SUCCEEDED])
    if goal is not None and done is not None:
        value = float(done["objectiveValue"])
        if (value >= goal) if objective["type"] == "maximize" else (value <= goal):
            return (
                ExperimentPhase.SUCCEEDED,
                "GoalReached",
                f"{done['bestTrialName']} reached the goal: {objective['objectiveMetricName']}={value:.6g} "
                f"({objective['type']}, goal {goal:g})",
            )
    failed = sum(1 for w in works if w.phase in (TrialPhase.FAILED, TrialPhase.METRICS_UNAVAILABLE))
    limit = spec.get("maxFailedTrialCount")
    if limit is not None and failed > int(limit):
        return (
            ExperimentPhase.FAILED,
            "MaxFailedTrialsReached",
            f"{failed} trials failed or reported no {objective['objectiveMetricName']}; "
            f"maxFailedTrialCount is {limit}",
        )
    idle = not any(w.phase in ACTIVE for w in works) and not _promotable(plan, objective, works)
    most = spec.get("maxTrialCount")
    if most is not None and len(works) >= int(most) and idle:
        return (
            ExperimentPhase.SUCCEEDED,
            "MaxTrialsReached",
            f"all {most} trials ended" + _best(best, objective),
        )
    if (status.get("suggestion") or {}).get("exhausted") and idle:
        return (
            ExperimentPhase.SUCCEEDED,
            "SuggestionEndReached",
            f"the search space is exhausted after {len(works)} trials" + _best(best, objective),
        )
    return None


def _promotable(plan: SearchPlan, objective: Mapping[str, Any], works: Sequence[TrialWork]) -> bool:
    if plan.asha is None:
        return False
    maximize = objective["type"] == "maximize"
    return promotable(rung_entries(works), plan.asha.reduction_factor, maximize) is not None


def _best(best: Obj | None, objective: Mapping[str, Any]) -> str:
    if best is None:
        return f"; no trial reported {objective['objectiveMetricName']}"
    value = float(best["objectiveValue"])
    return f"; best {best['bestTrialName']} with {objective['objectiveMetricName']}={value:.6g}"
