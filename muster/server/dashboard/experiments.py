"""The dashboard's experiment views: every Experiment with its best trial, and one experiment
with its explanation (``muster why experiment/NAME``), its trials, and each trial's objective
curve read from its TrialMetrics segments (thinned to at most :data:`CURVE_POINTS` points per
trial, the last one always kept, so a long run still draws quickly).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from muster.api.conditions import latest_condition
from muster.api.labels import EXPERIMENT_LABEL
from muster.controllers.insight.explain.experiment import explain_experiment
from muster.server.access.guard import AUTHENTICATED, Requirement, access_of, requires
from muster.server.dashboard.views import UI_API, recent_events
from muster.server.encoding import json_response
from muster.server.errors import ApiError
from muster.store import Store
from muster.store.base import NotFound
from muster.store.events import refers_to
from muster.store.selector import parse_selector

__all__ = ["CURVE_POINTS", "router"]

CURVE_POINTS = 300

router = APIRouter(prefix=UI_API, tags=["dashboard"], include_in_schema=False)

Obj = Mapping[str, Any]


@router.get("/experiments")
@requires(AUTHENTICATED)  # the rows are those the identity may list
def experiments_view(request: Request) -> Response:
    """One row per Experiment: state, algorithm, trial counts, the best trial."""
    store: Store = request.app.state.store
    revision = store.revision()
    rows = [_row(e) for e in access_of(request).filter("Experiment", store.list("Experiment").items)]
    rows.sort(key=lambda r: r["created"] or "", reverse=True)
    return json_response({"revision": revision, "experiments": rows})


@router.get("/experiments/{namespace}/{name}")
@requires(Requirement(verb="get", resource="experiments", namespace_param="namespace", name_param="name"))
def experiment_view(request: Request, namespace: str, name: str) -> Response:
    """An experiment: its explanation, its trials and their objective curves."""
    store: Store = request.app.state.store
    revision = store.revision()
    try:
        exp = store.get("Experiment", name, namespace)
    except NotFound:
        raise ApiError(404, f"Experiment {namespace}/{name} not found") from None
    selector = parse_selector(f"{EXPERIMENT_LABEL}={name}")
    trials = sorted(
        store.list("Trial", namespace, selector).items, key=lambda t: int(t["spec"].get("index") or 0)
    )
    pods = store.list("Pod", namespace, selector).items
    events = store.list("Event", namespace).items
    metric = exp["spec"]["objective"]["objectiveMetricName"]
    names = {t["metadata"]["name"] for t in trials}
    mine = [
        e
        for e in events
        if refers_to(e, exp)
        or (
            (e.get("involvedObject") or {}).get("kind") == "Trial"
            and e["involvedObject"].get("name") in names
        )
    ]
    return json_response(
        {
            "revision": revision,
            "experiment": exp,
            "row": _row(exp),
            "why": explain_experiment(exp, trials, pods, events).to_dict(),
            "trials": [_trial_row(t) for t in trials],
            "curves": _curves(store.list("TrialMetrics", namespace, selector).items, metric),
            "events": recent_events(mine, 40),
            "now": time.time(),
        }
    )


def _row(exp: Obj) -> dict[str, Any]:
    meta, spec, status = exp["metadata"], exp.get("spec") or {}, exp.get("status") or {}
    cond = latest_condition(dict(exp))
    best = status.get("currentOptimalTrial") or {}
    objective = spec.get("objective") or {}
    return {
        "namespace": meta.get("namespace") or "default",
        "name": meta["name"],
        "state": cond["type"] if cond else "Created",
        "reason": (cond or {}).get("reason") or "",
        "message": (cond or {}).get("message") or "",
        "algorithm": (spec.get("algorithm") or {}).get("algorithmName"),
        "earlyStopping": (spec.get("earlyStopping") or {}).get("algorithmName"),
        "metric": objective.get("objectiveMetricName"),
        "direction": objective.get("type"),
        "goal": objective.get("goal"),
        "maxTrials": spec.get("maxTrialCount"),
        "parallel": spec.get("parallelTrialCount"),
        "queue": spec.get("queueName") or "default",
        "counts": {k: v for k, v in status.items() if isinstance(v, int) and k.startswith("trial")},
        "best": best.get("bestTrialName"),
        "bestValue": best.get("objectiveValue"),
        "bestParameters": {a["name"]: a["value"] for a in best.get("parameterAssignments") or []},
        "gpuSeconds": status.get("gpuSeconds") or 0,
        "created": meta.get("creationTimestamp"),
        "completed": status.get("completionTime"),
    }


def _trial_row(trial: Obj) -> dict[str, Any]:
    status = trial.get("status") or {}
    return {
        "name": trial["metadata"]["name"],
        "index": int(trial["spec"].get("index") or 0),
        "phase": status.get("phase") or "Pending",
        "reason": status.get("reason") or "",
        "message": status.get("message") or "",
        "value": status.get("objectiveValue"),
        "parameters": {a["name"]: a["value"] for a in trial["spec"].get("parameterAssignments") or []},
        "rungs": status.get("rungs") or [],
        "gpuSeconds": status.get("gpuSeconds") or 0,
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
    }


def _curves(segments: Sequence[Obj], metric: str) -> dict[str, list[list[float]]]:
    """Per trial, ``[[step, value], ...]`` of the objective, in step order, thinned."""
    points: dict[str, list[tuple[int, float]]] = {}
    for seg in sorted(segments, key=lambda s: (s["spec"]["trial"], s["spec"]["segment"])):
        series = (seg["spec"].get("series") or {}).get(metric) or {}
        points.setdefault(seg["spec"]["trial"], []).extend(
            zip(series.get("steps") or [], series.get("values") or [], strict=False)
        )
    return {trial: [[s, v] for s, v in _thin(sorted(ps))] for trial, ps in points.items()}


def _thin(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if len(points) <= CURVE_POINTS:
        return points
    stride = len(points) / (CURVE_POINTS - 1)
    kept = [points[int(i * stride)] for i in range(CURVE_POINTS - 1)]
    return [*kept, points[-1]]
