"""Job kinds to TrainingJob: Kubeflow ``kubeflow.org/v1 PyTorchJob``, ``batch/v1 Job`` and a
plain ``v1 Pod``.

PyTorchJob (reference/workloads.md §1.1) maps field for field: ``pytorchReplicaSpecs`` ->
``replicaSpecs`` (replica types case-normalised, as the Training Operator does),
``nprocPerNode`` (string or number; the deprecated ``elasticPolicy.nProcPerNode`` when it is
the only one), ``elasticPolicy``, ``runPolicy`` with ``schedulingPolicy``. The queue comes
from the Kueue label ``kueue.x-k8s.io/queue-name`` (else ``schedulingPolicy.queue``); the
priority class from the label ``kueue.x-k8s.io/priority-class``, else
``schedulingPolicy.priorityClass``, else the pod templates' ``priorityClassName``.

batch/v1 Job becomes a Worker-only TrainingJob, one gang of ``parallelism`` pods:

=====================================  ===============================================
batch/v1 Job                           TrainingJob
=====================================  ===============================================
spec.template                          spec.replicaSpecs.Worker.template
spec.parallelism (default 1)           spec.replicaSpecs.Worker.replicas
spec.completions                       must be unset or equal parallelism (one gang)
spec.template.spec.restartPolicy       Worker.restartPolicy OnFailure (a Job replaces
(Never or OnFailure)                   failed pods either way, up to backoffLimit)
spec.backoffLimit (default 6)          spec.runPolicy.backoffLimit
spec.activeDeadlineSeconds             spec.runPolicy.activeDeadlineSeconds
spec.ttlSecondsAfterFinished           spec.runPolicy.ttlSecondsAfterFinished
spec.suspend                           spec.runPolicy.suspend
other fields (podFailurePolicy, ...)   kept in the ignored-fields annotation, warned
=====================================  ===============================================

v1 Pod becomes a one-pod Worker TrainingJob through the namespace's default queue (or the
Kueue queue label), as Kueue's plain-pod integration admits it. A Pod runs to completion:

=====================================  ===============================================
v1 Pod                                 TrainingJob
=====================================  ===============================================
metadata.labels, metadata.annotations  the job's and its pod template's
spec (less the fields below)           spec.replicaSpecs.Worker.template.spec
spec.restartPolicy Never               runPolicy.backoffLimit 0 (no second try)
spec.restartPolicy OnFailure, Always   restarted after a failure, up to backoffLimit 6;
or unset                               Always is warned: nothing restarts after success
spec.activeDeadlineSeconds             spec.runPolicy.activeDeadlineSeconds
=====================================  ===============================================
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError, InvalidObject, child_path

__all__ = ["CONVERTERS", "convert_batch_job", "convert_pod", "convert_pytorchjob"]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_JOB_BACKOFF_LIMIT = 6  # batch/v1 Job's default
# batch/v1 Job spec fields and where they go in a TrainingJob spec.
_JOB_RUN_POLICY = ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend")


def convert_pytorchjob(doc: Mapping[str, Any]) -> Conversion:
    """A Kubeflow PyTorchJob as a TrainingJob."""
    native = _start(doc)
    spec = _mapping(native, "spec", "spec")
    conversion = Conversion(doc=native)
    paths: list[tuple[str, str]] = [("spec.replicaSpecs", "spec.pytorchReplicaSpecs")]
    if "pytorchReplicaSpecs" in spec:
        replicas = _mapping(spec, "pytorchReplicaSpecs", "spec.pytorchReplicaSpecs")
        spec["replicaSpecs"] = {_replica_type(k): v for k, v in replicas.items()}
        paths += [
            (f"spec.replicaSpecs.{_replica_type(k)}", f"spec.pytorchReplicaSpecs.{k}") for k in replicas
        ]
        del spec["pytorchReplicaSpecs"]
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict) and "nProcPerNode" in elastic:
        where = "spec.elasticPolicy.nProcPerNode"
        if "nprocPerNode" in spec:
            raise InvalidObject(
                [
                    FieldError(
                        where,
                        "may not be set together with spec.nprocPerNode",
                        hint="nProcPerNode is deprecated: keep only spec.nprocPerNode",
                    )
                ]
            )
        spec["nprocPerNode"] = elastic.pop("nProcPerNode")
        paths.append(("spec.nprocPerNode", where))
        conversion.warnings.append(FieldError(where, "deprecated: used as spec.nprocPerNode"))
    templates = [r.get("template") for r in spec.get("replicaSpecs", {}).values() if isinstance(r, dict)]
    paths += _queue_and_priority(native, spec, templates)
    conversion.paths = tuple(paths)
    return conversion


def convert_batch_job(doc: Mapping[str, Any]) -> Conversion:
    """A batch/v1 Job as a Worker-only TrainingJob (see the table in the module docstring)."""
    native = _start(doc)
    job = _mapping(native, "spec", "spec")
    conversion = Conversion(doc=native)
    template = copy.deepcopy(job.pop("template", None))
    if template is None:
        raise InvalidObject([FieldError("spec.template", "required field is missing")])
    parallelism = job.pop("parallelism", 1)
    completions = job.pop("completions", None)
    if completions is not None and completions != parallelism:
        raise InvalidObject(
            [
                FieldError(
                    "spec.completions",
                    f"must be unset or equal parallelism ({parallelism})",
                    completions,
                    "Muster runs a Job as one gang of parallelism pods",
                )
            ]
        )
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(pod_spec, dict):
        pod_spec.pop("restartPolicy", None)
    run_policy: dict[str, Any] = {"backoffLimit": _JOB_BACKOFF_LIMIT}
    run_policy.update({key: job.pop(key) for key in _JOB_RUN_POLICY if key in job})
    for key in sorted(job):
        conversion.keep(child_path("spec", key), job[key])
    native["spec"] = {
        "replicaSpecs": {
            "Worker": {"replicas": parallelism, "restartPolicy": "OnFailure", "template": template}
        },
        "runPolicy": run_policy,
    }
    worker = "spec.replicaSpecs.Worker"
    conversion.paths = (
        (f"{worker}.template", "spec.template"),
        (f"{worker}.replicas", "spec.parallelism"),
        *((f"spec.runPolicy.{key}", f"spec.{key}") for key in _JOB_RUN_POLICY),
        *_queue_and_priority(native, native["spec"], [template]),
    )
    return conversion


def convert_pod(doc: Mapping[str, Any]) -> Conversion:
    """A v1 Pod as a one-pod TrainingJob (see the table in the module docstring)."""
    native = _start(doc)
    pod_spec = copy.deepcopy(_mapping(native, "spec", "spec"))
    conversion = Conversion(doc=native)
    restart = pod_spec.pop("restartPolicy", None)
    if restart not in (None, "Never", "OnFailure", "Always"):
        raise InvalidObject(
            [FieldError("spec.restartPolicy", "must be one of Never, OnFailure, Always", restart)]
        )
    if restart == "Always":
        conversion.warnings.append(
            FieldError(
                "spec.restartPolicy",
                "Always is not honoured: the pod runs to completion and is restarted only after "
                f"a failure (at most {_JOB_BACKOFF_LIMIT} times)",
                hint="use OnFailure or Never to say so",
            )
        )
    run_policy: dict[str, Any] = {"backoffLimit": 0 if restart == "Never" else _JOB_BACKOFF_LIMIT}
    if "activeDeadlineSeconds" in pod_spec:
        run_policy["activeDeadlineSeconds"] = pod_spec.pop("activeDeadlineSeconds")
    meta = native.get("metadata") if isinstance(native.get("metadata"), dict) else {}
    template_meta = {key: copy.deepcopy(meta[key]) for key in ("labels", "annotations") if meta.get(key)}
    template: dict[str, Any] = {"spec": pod_spec, **({"metadata": template_meta} if template_meta else {})}
    native["spec"] = {
        "replicaSpecs": {"Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}},
        "runPolicy": run_policy,
    }
    conversion.paths = (
        ("spec.replicaSpecs.Worker.template.spec", "spec"),
        ("spec.runPolicy.activeDeadlineSeconds", "spec.activeDeadlineSeconds"),
        *_queue_and_priority(native, native["spec"], [template]),
    )
    return conversion


def _start(doc: Mapping[str, Any]) -> dict[str, Any]:
    native = copy.deepcopy(dict(doc))
    native["apiVersion"] = API_VERSION
    native["kind"] = "TrainingJob"
    native.pop("status", None)
    return native


def _mapping(parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        rule = "required field is missing" if value is None else "must be a mapping (key: value pairs)"
        raise InvalidObject([FieldError(path, rule)])
    return value


def _replica_type(name: str) -> str:
    # The Training Operator accepts any case ("WORKER" -> "Worker").
    return name[:1].upper() + name[1:].lower() if name.lower() in ("master", "worker") else name


def _queue_and_priority(
    native: dict[str, Any], spec: dict[str, Any], templates: list[Any]
) -> list[tuple[str, str]]:
    """Set queueName and priorityClassName from Kueue labels, the scheduling policy or the pod
    templates; return the path mappings for the values that came from labels."""
    meta = native.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    labels = labels if isinstance(labels, dict) else {}
    policy = (
        spec.get("runPolicy", {}).get("schedulingPolicy") if isinstance(spec.get("runPolicy"), dict) else None
    )
    policy = policy if isinstance(policy, dict) else {}
    paths: list[tuple[str, str]] = []
    if labels.get(QUEUE_LABEL) and "queueName" not in spec:
        spec["queueName"] = labels[QUEUE_LABEL]
        paths.append(("spec.queueName", f"metadata.labels[{QUEUE_LABEL}]"))
    if "priorityClassName" not in spec:
        template_classes = [
            t["spec"]["priorityClassName"]
            for t in templates
            if isinstance(t, dict) and isinstance(t.get("spec"), dict) and t["spec"].get("priorityClassName")
        ]
        if labels.get(PRIORITY_LABEL):
            spec["priorityClassName"] = labels[PRIORITY_LABEL]
            paths.append(("spec.priorityClassName", f"metadata.labels[{PRIORITY_LABEL}]"))
        elif not policy.get("priorityClass") and template_classes:
            spec["priorityClassName"] = template_classes[0]
    return paths


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("kubeflow.org/v1", "PyTorchJob"): convert_pytorchjob,
    ("batch/v1", "Job"): convert_batch_job,
    ("v1", "Pod"): convert_pod,
}
