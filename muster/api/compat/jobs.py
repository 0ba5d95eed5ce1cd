"""Job kinds to TrainingJob: Kubeflow ``kubeflow.org/v1 PyTorchJob``, ``batch/v1 Job`` and a
plain ``v1 Pod``.

PyTorchJob (Kubeflow Training Operator v1) maps field for field: ``pytorchReplicaSpecs`` ->
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
from collections.abc import Callable, Mapping
from typing import Any

from muster.api.compat.base import Conversion, Converter, mapping_at, native_copy
from muster.api.errors import FieldError, InvalidObject, child_path
from muster.api.quantity import Quantity, QuantityError

__all__ = [
    "CONVERTERS",
    "convert_batch_job",
    "convert_pod",
    "convert_pytorchjob",
    "kubeflow_replicas",
    "queue_and_priority",
]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_JOB_BACKOFF_LIMIT = 6  # batch/v1 Job's default
# batch/v1 Job spec fields and where they go in a TrainingJob spec.
_JOB_RUN_POLICY = ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend")


def convert_pytorchjob(doc: Mapping[str, Any]) -> Conversion:
    """A Kubeflow PyTorchJob as a TrainingJob."""
    native = native_copy(doc, "TrainingJob")
    spec = mapping_at(native, "spec", "spec")
    conversion = Conversion(doc=native)
    paths = kubeflow_replicas(doc, spec, "pytorchReplicaSpecs", _replica_type)
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
    paths += queue_and_priority(native, spec, templates)
    conversion.paths = tuple(paths)
    return conversion


def convert_batch_job(doc: Mapping[str, Any]) -> Conversion:
    """A batch/v1 Job as a Worker-only TrainingJob (see the table in the module docstring)."""
    native = native_copy(doc, "TrainingJob")
    job = mapping_at(native, "spec", "spec")
    conversion = Conversion(doc=native)
    template = copy.deepcopy(job.pop("template", None))
    if template is None:
        raise InvalidObject([FieldError("spec.template", "required field is missing")])
    _check_whole_extended_resources(doc, [("spec.template", template)])
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
        *queue_and_priority(native, native["spec"], [template]),
    )
    return conversion


def kubeflow_replicas(
    doc: Mapping[str, Any], spec: dict[str, Any], key: str, type_of: Callable[[str], str]
) -> list[tuple[str, str]]:
    """Move a Kubeflow job's replica specs (``spec.<key>``, e.g. ``tfReplicaSpecs``) to
    ``spec.replicaSpecs``, each replica type named as ``type_of`` says; the path mappings back."""
    paths = [("spec.replicaSpecs", f"spec.{key}")]
    if key not in spec:
        return paths
    replicas = mapping_at(spec, key, f"spec.{key}")
    _check_whole_extended_resources(
        doc,
        [(f"spec.{key}.{k}.template", r.get("template")) for k, r in replicas.items() if isinstance(r, dict)],
    )
    spec["replicaSpecs"] = {type_of(k): v for k, v in replicas.items()}
    paths += [(f"spec.replicaSpecs.{type_of(k)}", f"spec.{key}.{k}") for k in replicas]
    del spec[key]
    return paths


def _check_whole_extended_resources(doc: Mapping[str, Any], templates: list[tuple[str, Any]]) -> None:
    """Kubernetes accepts only whole amounts of an extended resource (``nvidia.com/gpu: 1``,
    never ``0.5``); a Kubernetes manifest asking for a fraction is a mistake there, and Muster
    must not read it as its own GPU share (``500m`` in a muster.dev/v1 TrainingJob)."""
    errors: list[FieldError] = []
    what = f"{doc.get('apiVersion')} {doc.get('kind')}"
    for path, template in templates:
        pod = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(pod, dict):
            continue
        for list_name in ("initContainers", "containers"):
            containers = pod.get(list_name)
            for i, c in enumerate(containers if isinstance(containers, list) else []):
                resources = c.get("resources") if isinstance(c, dict) else None
                for part in ("limits", "requests"):
                    amounts = resources.get(part) if isinstance(resources, dict) else None
                    for name, amount in (amounts if isinstance(amounts, dict) else {}).items():
                        if _extended(str(name)) and not _whole(amount):
                            errors.append(
                                FieldError(
                                    child_path(path, "spec", list_name, i, "resources", part, str(name)),
                                    f"must be a whole number in a {what} (Kubernetes refuses fractions "
                                    "of an extended resource)",
                                    amount,
                                    "to share a GPU, apply a muster.dev/v1 TrainingJob asking for "
                                    "nvidia.com/gpu: 500m (docs/trainingjob.md)",
                                )
                            )
    if errors:
        raise InvalidObject(errors)


def _extended(resource: str) -> bool:
    """An extended resource in Kubernetes' sense: a domain-qualified name outside kubernetes.io."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _whole(amount: Any) -> bool:
    try:
        return Quantity.parse(amount).value.denominator == 1
    except (QuantityError, ValueError, TypeError):
        return True  # not a quantity at all: the TrainingJob's own validation says so


def convert_pod(doc: Mapping[str, Any]) -> Conversion:
    """A v1 Pod as a one-pod TrainingJob (see the table in the module docstring)."""
    native = native_copy(doc, "TrainingJob")
    pod_spec = copy.deepcopy(mapping_at(native, "spec", "spec"))
    _check_whole_extended_resources(doc, [("", doc)])
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
        *queue_and_priority(native, native["spec"], [template]),
    )
    return conversion


def _replica_type(name: str) -> str:
    # The Training Operator accepts any case ("WORKER" -> "Worker").
    return name[:1].upper() + name[1:].lower() if name.lower() in ("master", "worker") else name


def queue_and_priority(
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
