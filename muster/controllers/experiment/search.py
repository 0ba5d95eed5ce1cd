"""Filling the experiment's free slots: ASHA promotions first, then new trials.

A slot is a trial waiting or running (``parallelTrialCount`` of them at most); a trial being
stopped early no longer takes one. A new trial is
a Trial object holding the sampler's values, created in the store before its job (so the
sampler's decision survives a crash and is never taken twice: the trial's name is derived
from its index).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from muster.api.base import API_VERSION
from muster.api.conditions import iso
from muster.api.experiment_plan import SearchPlan
from muster.api.labels import EXPERIMENT_LABEL
from muster.controllers.experiment.lifecycle import ACTIVE, TrialPhase
from muster.controllers.experiment.observe import TrialWork, rung_entries
from muster.controllers.experiment.space import parameters_of
from muster.controllers.experiment.stopping import promotable
from muster.controllers.experiment.suggest import Observed, suggest
from muster.controllers.trainingjob.pods import checkpoint_dir, latest_checkpoint, owner_reference

__all__ = ["Slots", "fill_slots", "observed"]

Obj = dict[str, Any]


@dataclass
class Slots:
    """The pass's view for filling slots; ``created`` and ``exhausted`` are its results."""

    ctl: Any  # the ExperimentController (its context and trial records)
    exp: Obj
    plan: SearchPlan
    works: list[TrialWork]
    now: float
    created: list[TrialWork] = field(default_factory=list)
    exhausted: bool = False


def fill_slots(s: Slots) -> None:
    spec = s.exp["spec"]
    maximize = spec["objective"]["type"] == "maximize"
    # A trial being stopped holds its GPUs only until its pods are gone: the next one may queue
    # for them already, so they go to it (or to whoever the queue prefers) the moment they free.
    busy = (TrialPhase.PENDING, TrialPhase.RUNNING)
    free = int(spec.get("parallelTrialCount") or 3) - sum(1 for w in s.works if w.phase in busy)
    while free > 0:
        everyone = [*s.works, *s.created]
        if s.plan.asha is not None:
            entry = promotable(rung_entries(everyone), s.plan.asha.reduction_factor, maximize)
            if entry is not None:
                _promote(s, next(w for w in everyone if w.name == entry.trial))
                free -= 1
                continue
        most = spec.get("maxTrialCount")
        if most is not None and len(everyone) >= int(most):
            return
        if (s.exp.get("status") or {}).get("suggestion", {}).get("exhausted"):
            s.exhausted = True
            return
        work = _new_trial(s, everyone)
        if work is None:
            return
        s.created.append(work)
        free -= 1


def observed(works: list[TrialWork], objective: str) -> list[Observed]:
    """The trials as a sampler sees them (``objective``: the metric whose curve they report)."""
    out = []
    for w in works:
        phase = w.phase
        params = {a["name"]: a["value"] for a in w.trial["spec"].get("parameterAssignments") or []}
        curve = w.record.series.curve(objective)
        if phase is TrialPhase.SUCCEEDED:
            out.append(Observed(params, "complete", w.status.get("objectiveValue"), curve, w.index))
        elif phase is TrialPhase.EARLY_STOPPED:
            out.append(Observed(params, "pruned", None, curve, w.index))
        elif phase in ACTIVE:
            out.append(Observed(params, "running", None, curve, w.index))
        else:
            out.append(Observed(params, "failed", index=w.index))
    return out


def _promote(s: Slots, work: TrialWork) -> None:
    rungs = work.status.get("rungs") or []
    last = rungs[-1]
    job = {"metadata": {"name": work.name, "namespace": work.trial["metadata"].get("namespace") or "default"}}
    found = latest_checkpoint(checkpoint_dir(s.ctl.ctx.home, job))
    last.update(decision="Promoted", time=iso(s.now))
    if found is not None:
        last["checkpoint"] = found
    resume = f"resumes from checkpoint {found}" if found else "no checkpoint was found: it starts over"
    work.move(
        TrialPhase.PENDING,
        "Promoted",
        f"promoted from rung {last['rung']} (value {float(last['value']):.6g} is now in the top "
        f"1/{s.plan.asha.reduction_factor if s.plan.asha else 3}); {resume}",
        s.now,
    )


def _new_trial(s: Slots, everyone: list[TrialWork]) -> TrialWork | None:
    spec, meta, status = s.exp["spec"], s.exp["metadata"], s.exp.get("status") or {}
    index = max((w.index for w in everyone), default=-1) + 1
    values = suggest(
        s.plan,
        parameters_of(spec),
        int((status.get("suggestion") or {}).get("seed") or 0),
        index,
        observed(everyone, spec["objective"]["objectiveMetricName"]),
        spec["objective"]["type"],
        s.ctl.tpe_memory(s.exp),
    )
    if values is None:
        s.exhausted = True
        return None
    trial_spec: Obj = {
        "experiment": meta["name"],
        "index": index,
        "parameterAssignments": [{"name": p["name"], "value": values[p["name"]]} for p in spec["parameters"]],
    }
    if s.plan.asha is not None:
        trial_spec["bracket"] = index % s.plan.asha.brackets
        if s.plan.asha.resource_name:
            for a in trial_spec["parameterAssignments"]:
                if a["name"] == s.plan.asha.resource_name:
                    a["value"] = str(s.plan.asha.max_resource)
    ns = meta.get("namespace") or "default"
    doc = {
        "apiVersion": API_VERSION,
        "kind": "Trial",
        "metadata": {
            "name": f"{meta['name']}-{index}",
            "namespace": ns,
            "labels": {EXPERIMENT_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(s.exp)],
        },
        "spec": trial_spec,
    }
    created = s.ctl.ctx.create(doc)
    if created is None:
        return None  # a trial of that name exists that the cache has not shown yet: next pass
    work = TrialWork(created, None, [], s.ctl.record(created, new=True))
    work.note("Created", "its job is being created")
    return work
