"""KubeRay's ``ray.io/v1`` and ``ray.io/v1alpha1`` RayCluster and RayJob as Muster's own
(:mod:`muster.api.ray`; docs/ray.md, "KubeRay manifests").

The spec maps field for field; what changes:

=============================================  ================================================
KubeRay                                        Muster
=============================================  ================================================
``metadata.labels[kueue.x-k8s.io/queue-name]``  ``spec.queueName`` (as Kueue's RayCluster and
``metadata.labels[kueue.x-k8s.io/priority-      RayJob integrations read them), and
class]``                                       ``spec.priorityClassName``
``enableInTreeAutoscaling``,                   warned: ``replicas`` pods are admitted, the
``autoscalerOptions``                          Ray autoscaler does not resize the gang
``workerGroupSpecs[].scaleStrategy``,          kept and warned
``idleTimeoutSeconds``, ``numOfHosts`` > 1
``headGroupSpec.rayStartParams``               as they are; ``block`` is always on and
                                               ``dashboard-host`` defaults to 127.0.0.1
RayJob ``submissionMode``                      K8sJobMode and HTTPMode both run the entrypoint
                                               from a submitter pod; others are refused
RayJob ``entrypointNumCpus`` / ``Gpus`` /      warned: the driver runs in the
``Resources``                                  submitter pod, outside Ray's resources
=============================================  ================================================

Every other field Muster does not model (``headService``, ``enableIngress``,
``gcsFaultToleranceOptions``, ``managedBy``, ``deletionStrategy``, ...) is kept in the
ignored-fields annotation with a warning naming its path, as for every converted kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from muster.api.compat.base import Conversion, Converter, mapping_at, native_copy
from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.errors import FieldError, InvalidObject

__all__ = ["CONVERTERS", "convert_raycluster", "convert_rayjob"]

VERSIONS = ("ray.io/v1", "ray.io/v1alpha1")
_AUTOSCALER = "not honoured: the cluster runs the replicas it was admitted with (no Ray autoscaler)"
_SUBMISSION_MODES = ("K8sJobMode", "HTTPMode")


def convert_raycluster(doc: Mapping[str, Any]) -> Conversion:
    """A KubeRay RayCluster as Muster's (see the module docstring)."""
    native = native_copy(doc, "RayCluster")
    spec = mapping_at(native, "spec", "spec")
    conversion = Conversion(doc=native)
    _cluster_spec(spec, "spec", conversion)
    conversion.paths = tuple(_queue_and_priority(native, spec, "spec"))
    return conversion


def convert_rayjob(doc: Mapping[str, Any]) -> Conversion:
    """A KubeRay RayJob as Muster's (see the module docstring)."""
    native = native_copy(doc, "RayJob")
    spec = mapping_at(native, "spec", "spec")
    conversion = Conversion(doc=native)
    mode = spec.pop("submissionMode", None)
    if mode is not None and mode not in _SUBMISSION_MODES:
        raise InvalidObject(
            [
                FieldError(
                    "spec.submissionMode",
                    f"must be one of {', '.join(_SUBMISSION_MODES)} (Muster runs the entrypoint "
                    "from a submitter pod)",
                    mode,
                )
            ]
        )
    for key in ("entrypointNumCpus", "entrypointNumGpus", "entrypointResources"):
        if key in spec:
            spec.pop(key)
            conversion.warnings.append(
                FieldError(f"spec.{key}", "not honoured: the driver runs in the submitter pod")
            )
    submitter = spec.pop("submitterConfig", None)
    if isinstance(submitter, dict) and "backoffLimit" in submitter:
        conversion.warnings.append(
            FieldError(
                "spec.submitterConfig.backoffLimit",
                "not honoured: a submitter that fails fails the run (spec.backoffLimit retries it)",
            )
        )
    if isinstance(spec.get("rayClusterSpec"), dict):
        _cluster_spec(spec["rayClusterSpec"], "spec.rayClusterSpec", conversion)
    conversion.paths = tuple(_queue_and_priority(native, spec, "spec"))
    return conversion


def _cluster_spec(spec: dict[str, Any], path: str, conversion: Conversion) -> None:
    """Warn for and keep the autoscaling fields of a cluster spec at ``path``."""
    for key in ("enableInTreeAutoscaling", "autoscalerOptions"):
        if key in spec:
            value = spec.pop(key)
            if value not in (False, None):
                conversion.warnings.append(FieldError(f"{path}.{key}", _AUTOSCALER))
    groups = spec.get("workerGroupSpecs")
    for i, group in enumerate(groups if isinstance(groups, list) else []):
        if not isinstance(group, dict):
            continue
        where = f"{path}.workerGroupSpecs[{i}]"
        if group.get("numOfHosts", 1) not in (1, None):
            raise InvalidObject(
                [
                    FieldError(
                        f"{where}.numOfHosts",
                        "must be 1: multi-host replicas (TPU slices) are not offered by Muster",
                        group["numOfHosts"],
                    )
                ]
            )
        group.pop("numOfHosts", None)
        for key in ("scaleStrategy", "idleTimeoutSeconds", "suspend"):
            if key in group:
                conversion.keep(f"{where}.{key}", group.pop(key))


def _queue_and_priority(native: dict[str, Any], spec: dict[str, Any], path: str) -> list[tuple[str, str]]:
    labels = (native.get("metadata") or {}).get("labels") or {}
    paths: list[tuple[str, str]] = []
    for label, field in ((QUEUE_LABEL, "queueName"), (PRIORITY_LABEL, "priorityClassName")):
        if isinstance(labels, dict) and labels.get(label) and field not in spec:
            spec[field] = labels[label]
            paths.append((f"{path}.{field}", f"metadata.labels[{label}]"))
    return paths


CONVERTERS: dict[tuple[str, str], Converter] = {
    **{(version, "RayCluster"): convert_raycluster for version in VERSIONS},
    **{(version, "RayJob"): convert_rayjob for version in VERSIONS},
}
