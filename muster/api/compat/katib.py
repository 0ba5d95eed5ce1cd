"""Katib's ``kubeflow.org/v1beta1 Experiment`` as a Muster Experiment.

The spec maps field for field; what changes:

==========================================  ==============================================
Katib                                       Muster
==========================================  ==============================================
``trialTemplate.trialSpec`` (a batch/v1     ``trialTemplate.trainingJob``: converted as
Job, a kubeflow.org/v1 PyTorchJob or a      ``muster apply`` converts those kinds (a Job
muster.dev/v1 TrainingJob)                  becomes a Worker-only TrainingJob)
``trialTemplate.configMap``                 rejected: inline the template as ``trialSpec``
``metadata.labels[kueue.x-k8s.io/...]``     ``spec.queueName`` / ``spec.priorityClassName``
``nasConfig``                               rejected: neural architecture search
``primaryPodLabels``, ``successCondition``,  kept and warned: rank 0's pod is the primary one
``failureCondition``, ``retain``            and the job's own outcome decides
==========================================  ==============================================

Every other field Muster does not model is kept in the ignored-fields annotation with a
warning naming its path, as for every converted kind.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL, convert_batch_job, convert_pytorchjob
from muster.api.errors import FieldError, InvalidObject

__all__ = ["CONVERTERS", "convert_katib_experiment"]

_TEMPLATE = "spec.trialTemplate"
_JOB_KINDS = {
    ("batch/v1", "Job"): convert_batch_job,
    ("kubeflow.org/v1", "PyTorchJob"): convert_pytorchjob,
}


def convert_katib_experiment(doc: Mapping[str, Any]) -> Conversion:
    """A Katib Experiment as a Muster Experiment (see the module docstring)."""
    native = copy.deepcopy(dict(doc))
    native["apiVersion"] = API_VERSION
    native.pop("status", None)
    spec = native.get("spec")
    if not isinstance(spec, dict):
        raise InvalidObject([FieldError("spec", "required field is missing")])
    if spec.get("nasConfig") is not None:
        raise InvalidObject(
            [FieldError("spec.nasConfig", "neural architecture search is not offered by Muster")]
        )
    conversion = Conversion(doc=native)
    paths: list[tuple[str, str]] = []
    template = spec.get("trialTemplate")
    if isinstance(template, dict):
        paths += _trial_spec(template, conversion)
    labels = (native.get("metadata") or {}).get("labels") or {}
    if isinstance(labels, dict):
        for label, key in ((QUEUE_LABEL, "queueName"), (PRIORITY_LABEL, "priorityClassName")):
            if labels.get(label) and key not in spec:
                spec[key] = labels[label]
                paths.append((f"spec.{key}", f"metadata.labels[{label}]"))
    conversion.paths = tuple(paths)
    return conversion


def _trial_spec(template: dict[str, Any], conversion: Conversion) -> list[tuple[str, str]]:
    if template.get("configMap") is not None:
        raise InvalidObject(
            [
                FieldError(
                    f"{_TEMPLATE}.configMap",
                    "not supported: Muster does not read ConfigMaps",
                    hint="inline the template as trialTemplate.trialSpec",
                )
            ]
        )
    trial_spec = template.pop("trialSpec", None)
    if trial_spec is None:
        return []
    where = f"{_TEMPLATE}.trialSpec"
    if not isinstance(trial_spec, dict):
        raise InvalidObject([FieldError(where, "must be a mapping (an object with apiVersion and kind)")])
    key = (trial_spec.get("apiVersion"), trial_spec.get("kind"))
    if key == (API_VERSION, "TrainingJob"):
        template["trainingJob"] = copy.deepcopy(trial_spec.get("spec"))
        return [(f"{_TEMPLATE}.trainingJob", f"{where}.spec")]
    convert = _JOB_KINDS.get(key)  # type: ignore[arg-type]
    if convert is None:
        raise InvalidObject(
            [
                FieldError(
                    f"{where}.kind",
                    f"{key[0]} {key[1]} is not supported as a trial",
                    hint="use a batch/v1 Job, a kubeflow.org/v1 PyTorchJob or a muster.dev/v1 TrainingJob",
                )
            ]
        )
    meta = trial_spec.get("metadata") or {}
    for field in ("labels", "annotations"):
        if isinstance(meta, dict) and meta.get(field):
            conversion.keep(f"{where}.metadata.{field}", meta[field])
    try:
        job = convert({**trial_spec, "metadata": {"name": "trial"}})
    except InvalidObject as exc:
        raise InvalidObject([_moved(e) for e in exc.errors], exc.kind, exc.name) from None
    assert job.doc is not None
    template["trainingJob"] = job.doc["spec"]
    job_paths = tuple((n[len("spec") :], f) for n, f in job.paths if n.startswith("spec"))
    for warning in job.warnings:
        conversion.warnings.append(_moved(warning))
    for path, value in job.kept.items():
        conversion.keep(f"{where}.{path}", value)
    return [(f"{_TEMPLATE}.trainingJob{native}", f"{where}.{foreign}") for native, foreign in job_paths] + [
        (f"{_TEMPLATE}.trainingJob", f"{where}.spec")
    ]


def _moved(error: FieldError) -> FieldError:
    # The job converters name the paths of the job as written: under trialSpec here.
    return FieldError(f"{_TEMPLATE}.trialSpec.{error.path}", error.rule, error.got, error.hint)


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("kubeflow.org/v1beta1", "Experiment"): convert_katib_experiment,
}
