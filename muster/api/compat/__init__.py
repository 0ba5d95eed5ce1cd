"""Converters from foreign manifests (PyTorchJob, TFJob, MPIJob, Kueue, PriorityClass, batch/v1 Job, Pod,
Namespace, ServiceAccount, ResourceQuota, RBAC, KServe InferenceService, KubeAI Model,
Karpenter NodePool, Katib Experiment, Argo Workflow, KubeRay RayCluster and RayJob, the NVIDIA device
plugin's time-slicing ConfigMap) to Muster's own kinds.

A converter rewrites a foreign document into a native ``muster.dev/v1`` document and says
which native path prefixes stand for which foreign ones, so every error and warning names
the path the user wrote. The registry then validates the native document leniently: a field
the native model does not know is not an error but is kept (in the annotation
``muster.dev/ignored-fields``) with a warning naming its foreign path. Nothing is dropped
silently.
"""

from __future__ import annotations

from muster.api.compat.base import IGNORED_FIELDS_ANNOTATION, Conversion, Converter

__all__ = ["IGNORED_FIELDS_ANNOTATION", "Conversion", "Converter", "converter_for", "foreign_kinds"]


def converter_for(api_version: str, kind: str) -> Converter | None:
    """The converter for a foreign apiVersion and kind, or None."""
    return _converters().get((api_version, kind))


def foreign_kinds() -> list[tuple[str, str]]:
    """Every (apiVersion, kind) a converter accepts."""
    return sorted(_converters())


def _converters() -> dict[tuple[str, str], Converter]:
    # Imported late: the converter modules import the kind models, which import this package.
    from muster.api.compat import (
        argo,
        core,
        deviceplugin,
        jobs,
        karpenter,
        katib,
        kubeflow,
        kuberay,
        kueue,
        rbac,
        serving,
    )

    table: dict[tuple[str, str], Converter] = {}
    for module in (core, deviceplugin, jobs, kubeflow, katib, kueue, rbac, serving, karpenter, argo, kuberay):
        table.update(module.CONVERTERS)
    return table
