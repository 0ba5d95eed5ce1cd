"""What a Trial turns into: its TrainingJob, and what that job's state means for the trial.

The job is named after the trial, owned by the Experiment, labelled with both, and carries the
experiment's queue and priority class (they replace the template's). Every container gets, on
top of the TrainingJob environment (``MUSTER_CHECKPOINT_DIR``, ...):

=============================  ==================================================
``MUSTER_EXPERIMENT_NAME``     the experiment
``MUSTER_TRIAL_NAME``          the trial (and its job)
``MUSTER_TRIAL_PARAMETERS``    the trial's values as a JSON object of strings
``MUSTER_METRICS_FILE``        where the File collector reads ``name=value`` lines
=============================  ==================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.conditions import condition
from muster.api.experiment_template import (
    job_spec_of,
    job_spec_view,
    primary_container,
    substitute,
    trial_values,
)
from muster.api.labels import EXPERIMENT_LABEL, TRIAL_LABEL, pod_name
from muster.api.lifecycle import JobPhase, job_phase
from muster.controllers.experiment.collect import metrics_dir
from muster.controllers.trainingjob.pods import owner_reference

__all__ = ["JobState", "assignments_of", "job_state", "metrics_file", "primary_pod", "trial_job"]

Obj = dict[str, Any]


def assignments_of(trial: Mapping[str, Any]) -> dict[str, str]:
    return {a["name"]: a["value"] for a in trial["spec"].get("parameterAssignments") or []}


def metrics_file(home: Path, trial: Mapping[str, Any]) -> Path:
    meta = trial["metadata"]
    ns = meta.get("namespace") or "default"
    return metrics_dir(home, ns, trial["spec"]["experiment"], meta["name"]) / "metrics.log"


def trial_job(exp: Mapping[str, Any], trial: Mapping[str, Any], home: Path) -> Obj:
    """The validated TrainingJob of ``trial`` (raises InvalidObject when the substituted
    template is not a valid job)."""
    spec = exp["spec"]
    template = spec["trialTemplate"]
    meta = trial["metadata"]
    name, ns = meta["name"], meta.get("namespace") or "default"
    fields = {"Name": name, "Namespace": ns, "Kind": "TrainingJob", "APIVersion": API_VERSION}
    values = trial_values(template, assignments_of(trial), fields)
    job_spec = substitute(job_spec_of(template), values, fields)
    if spec.get("queueName"):
        job_spec["queueName"] = spec["queueName"]
    if spec.get("priorityClassName"):
        job_spec["priorityClassName"] = spec["priorityClassName"]
    run_policy = job_spec.setdefault("runPolicy", {})
    run_policy.pop("ttlSecondsAfterFinished", None)  # the trial reads its job's outcome after it ended
    run_policy.pop("suspend", None)
    labels = {EXPERIMENT_LABEL: exp["metadata"]["name"], TRIAL_LABEL: name}
    metrics = metrics_file(home, trial)
    env = {
        "MUSTER_EXPERIMENT_NAME": exp["metadata"]["name"],
        "MUSTER_TRIAL_NAME": name,
        "MUSTER_TRIAL_PARAMETERS": json.dumps(assignments_of(trial), sort_keys=True),
        "MUSTER_METRICS_FILE": str(metrics),
    }
    for replica in (job_spec.get("replicaSpecs") or {}).values():
        tmpl = replica.setdefault("template", {})
        tmeta = tmpl.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
        for container in (tmpl.get("spec") or {}).get("containers") or []:
            own = [e for e in container.get("env") or [] if e.get("name") not in env]
            container["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
    doc = {
        "apiVersion": API_VERSION,
        "kind": "TrainingJob",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "ownerReferences": [owner_reference(exp)],
        },
        "spec": job_spec,
    }
    validated = registry.validate(doc).obj
    assert validated is not None
    return validated


def primary_pod(exp: Mapping[str, Any], trial_name: str) -> tuple[str, str]:
    """(pod name, container) whose output holds the trial's metrics."""
    template = exp["spec"]["trialTemplate"]
    found = primary_container(job_spec_view(template), template.get("primaryContainerName"))
    rtype, container = found or ("Worker", "main")
    return pod_name(trial_name, rtype, 0), container


@dataclass(frozen=True)
class JobState:
    """What the trial's job is doing, in the trial's words."""

    state: Literal["waiting", "running", "preempted", "suspended", "succeeded", "failed"]
    reason: str
    message: str


def job_state(job: Mapping[str, Any]) -> JobState:
    phase = job_phase(dict(job))
    cond = condition(dict(job), phase.value) if phase is not None else None
    reason = (cond or {}).get("reason") or ""
    message = (cond or {}).get("message") or ""
    if phase in (None, JobPhase.CREATED, JobPhase.QUEUED):
        return JobState("waiting", reason or "Queued", message or "waiting for admission")
    if phase is JobPhase.PREEMPTED:
        return JobState("preempted", "Preempted", message)
    if phase is JobPhase.SUSPENDED:
        return JobState("suspended", reason or "Suspended", message)
    if phase in (JobPhase.RUNNING, JobPhase.RESTARTING):
        return JobState("running", phase.value, message)
    if phase is JobPhase.SUCCEEDED:
        return JobState("succeeded", reason or "Succeeded", message)
    return JobState("failed", reason or "Failed", message)
