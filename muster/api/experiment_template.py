"""An Experiment's trial template: ``${trialParameters.<name>}`` placeholders, their values for
one trial, and the TrainingJob spec a trial runs.

As in Katib, placeholders are substituted in the template's strings (a whole-string
placeholder in a number field, such as ``replicas``, becomes that number when the job is
validated). ``${trialSpec.Name}``, ``${trialSpec.Namespace}``, ``${trialSpec.Kind}`` and
``${trialSpec.APIVersion}`` name the trial's own job. A placeholder names an entry of
``trialTemplate.trialParameters`` (whose ``reference`` is a search parameter or one of the
``${trialSpec.*}`` names), or directly a search parameter (a Muster convenience).

A pod-template trial runs as a one-pod TrainingJob (a Worker with ``restartPolicy: Never``), so
every trial gets the same queueing, preemption and checkpoint handshake.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from muster.api.base import API_VERSION
from muster.api.checks import check
from muster.api.errors import FieldError, child_path, errors_from_pydantic

__all__ = [
    "TRIAL_SPEC_FIELDS",
    "job_spec_of",
    "job_spec_view",
    "placeholders",
    "primary_container",
    "sample_values",
    "substitute",
    "template_errors",
    "trial_values",
]

Obj = dict[str, Any]
_PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
_META = re.compile(r"\$\{trialSpec\.([A-Za-z]+)\}")
TRIAL_SPEC_FIELDS = ("Name", "Namespace", "Kind", "APIVersion")


def placeholders(value: Any) -> set[str]:
    """The names of every ``${trialParameters.<name>}`` in the strings of ``value``."""
    found: set[str] = set()
    for text in _strings(value):
        found.update(_PLACEHOLDER.findall(text))
    return found


def substitute(value: Any, values: Mapping[str, str], meta: Mapping[str, str]) -> Any:
    """A copy of ``value`` with every placeholder replaced (unknown names are left as written)."""
    if isinstance(value, str):
        text = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), value)
        return _META.sub(lambda m: meta.get(m.group(1), m.group(0)), text)
    if isinstance(value, list):
        return [substitute(v, values, meta) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, values, meta) for k, v in value.items()}
    return value


def trial_values(template: Mapping[str, Any], assignments: Mapping[str, str], meta: Mapping[str, str]) -> Obj:
    """Placeholder name -> text for one trial: each trialParameter's referenced value, and every
    search parameter under its own name."""
    values = dict(assignments)
    for tp in template.get("trialParameters") or []:
        ref = str(tp.get("reference") or "")
        m = _META.fullmatch(ref)
        if m is not None:
            values[tp["name"]] = meta.get(m.group(1), ref)
        elif ref in assignments:
            values[tp["name"]] = assignments[ref]
    return values


def job_spec_of(template: Mapping[str, Any]) -> Obj:
    """The TrainingJob spec a trial of ``template`` runs (placeholders not yet substituted)."""
    return copy.deepcopy(job_spec_view(template))


def job_spec_view(template: Mapping[str, Any]) -> Mapping[str, Any]:
    """:func:`job_spec_of` without the copy, sharing the template's parts: to read, not to edit."""
    if template.get("trainingJob") is not None:
        return template["trainingJob"]
    return {
        "replicaSpecs": {
            "Worker": {"replicas": 1, "restartPolicy": "Never", "template": template["template"]}
        }
    }


def primary_container(job_spec: Mapping[str, Any], name: str | None) -> tuple[str, str] | None:
    """(replica type, container name) whose output is the trial's metrics: rank 0's pod (the
    Master, else Worker 0) and ``name`` or its first container; None when ``name`` is not there."""
    replicas = job_spec.get("replicaSpecs") or {}
    rtype = "Master" if replicas.get("Master") else "Worker"
    containers = (((replicas.get(rtype) or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or []
    names = [str(c.get("name")) for c in containers if isinstance(c, dict)]
    if name is None:
        return (rtype, names[0]) if names else None
    return (rtype, name) if name in names else None


def sample_values(parameters: list[Obj]) -> dict[str, str]:
    """A value per search parameter, to validate a template with (its min, or first item)."""
    out = {}
    for p in parameters:
        space = p.get("feasibleSpace") or {}
        if p.get("parameterType") in ("double", "int"):
            out[p["name"]] = str(space.get("min", "0"))
        else:
            out[p["name"]] = str((space.get("list") or [""])[0])
    return out


def template_errors(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    """What is wrong with ``spec.trialTemplate`` (paths under ``path``): unknown placeholders,
    trialParameters that reference nothing, a primaryContainerName that is not there, and the
    TrainingJob that a trial would run, validated with sample values."""
    template = spec.get("trialTemplate") or {}
    tpath = child_path(path, "trialTemplate")
    params = [p for p in spec.get("parameters") or [] if isinstance(p, dict) and p.get("name")]
    names = {p["name"] for p in params}
    errors: list[FieldError] = []
    declared: set[str] = set()
    for i, tp in enumerate(template.get("trialParameters") or []):
        ref = str(tp.get("reference") or tp.get("name") or "")
        declared.add(str(tp.get("name")))
        meta = _META.fullmatch(ref)
        if meta is not None and meta.group(1) not in TRIAL_SPEC_FIELDS:
            errors.append(
                FieldError(
                    child_path(tpath, "trialParameters", i, "reference"),
                    "unknown trial field; use one of "
                    + ", ".join("${trialSpec." + f + "}" for f in TRIAL_SPEC_FIELDS),
                    ref,
                )
            )
        elif meta is None and ref not in names:
            errors.append(
                FieldError(
                    child_path(tpath, "trialParameters", i, "reference"),
                    "names no parameter",
                    ref,
                    f"parameters: {', '.join(sorted(names)) or 'none'}",
                )
            )
    key = "trainingJob" if template.get("trainingJob") is not None else "template"
    body = template.get(key)
    if body is None:
        return errors
    for name in sorted(placeholders(body) - declared - names):
        errors.append(
            FieldError(
                child_path(tpath, key),
                f"${{trialParameters.{name}}} names no trialParameter and no parameter",
                hint="declare it under trialTemplate.trialParameters, or use one of: "
                + ", ".join(sorted(names)),
            )
        )
    meta_sample = {
        "Name": "experiment-0",
        "Namespace": "default",
        "Kind": "TrainingJob",
        "APIVersion": API_VERSION,
    }
    sample = substitute(
        job_spec_of(template), trial_values(template, sample_values(params), meta_sample), meta_sample
    )
    errors.extend(_job_errors(sample, tpath, key))
    if not errors and primary_container(sample, template.get("primaryContainerName")) is None:
        errors.append(
            FieldError(
                child_path(tpath, "primaryContainerName"),
                "names no container of rank 0's pod (the Master, else the Worker)",
                template.get("primaryContainerName"),
            )
        )
    return errors


def _job_errors(job_spec: Obj, tpath: str, key: str) -> list[FieldError]:
    # Imported here: the TrainingJob model imports the pod spec models, which are heavy and
    # import nothing of the experiment.
    from muster.api.trainingjob import TrainingJob

    doc = {"apiVersion": API_VERSION, "kind": "TrainingJob", "metadata": {"name": "trial"}, "spec": job_spec}
    try:
        model = TrainingJob.model_validate(doc)
    except ValidationError as exc:
        return [_moved(e, tpath, key) for e in errors_from_pydantic(exc)]
    errors, _warnings = check(model)
    return [_moved(e, tpath, key) for e in errors]


def _moved(error: FieldError, tpath: str, key: str) -> FieldError:
    path = error.path
    if key == "trainingJob" and path.startswith("spec."):
        path = child_path(tpath, "trainingJob") + path[len("spec") :]
    elif key == "template":
        inner = "spec.replicaSpecs.Worker.template"
        path = child_path(tpath, "template") + path[len(inner) :] if path.startswith(inner) else tpath
    return FieldError(path, error.rule + " (with sample parameter values)", error.got, error.hint)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []
