"""Kueue quota objects (``kueue.x-k8s.io`` v1beta1, v1beta2, and the v1alpha1 Cohort and
Topology) to Muster's ResourceFlavor, Topology, ClusterQueue, Cohort, LocalQueue and
PriorityClass.

Differences between the versions (from Kueue's ``apis/kueue/v1beta1/*_conversion.go``):
ClusterQueue ``cohort`` (v1beta1) became ``cohortName`` (v1beta2); Cohort ``parent``
(v1alpha1, early v1beta1) became ``parentName``; flavorFungibility ``Borrow`` / ``Preempt``
(v1beta1) became ``MayStopSearch`` (v1beta2); v1beta1 ``admissionChecks`` became
``admissionChecksStrategy``. Fields Muster has no use for (admission checks, admission fair
sharing, wall-time policies, resource weights) are kept and reported by the registry.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError

__all__ = ["CONVERTERS"]

_GROUP = "kueue.x-k8s.io"
# v1beta1 fungibility values and the v1beta2 value each became.
_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def _native(doc: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(doc))
    out["apiVersion"] = API_VERSION
    return out


def _spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec")
    return spec if isinstance(spec, dict) else {}


def _rename(spec: dict[str, Any], old: str, new: str) -> bool:
    if old in spec and new not in spec:
        spec[new] = spec.pop(old)
        return True
    return False


def _same(doc: Mapping[str, Any]) -> Conversion:
    """ResourceFlavor, Topology and LocalQueue have Muster's shape in every version."""
    return Conversion(doc=_native(doc))


def _cluster_queue(doc: Mapping[str, Any]) -> Conversion:
    native = _native(doc)
    spec = _spec(native)
    conversion = Conversion(doc=native)
    if _rename(spec, "cohortName", "cohort"):
        conversion.paths = (("spec.cohort", "spec.cohortName"),)
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, dict):
        for key in ("whenCanBorrow", "whenCanPreempt"):
            if fungibility.get(key) in _FUNGIBILITY:
                fungibility[key] = _FUNGIBILITY[fungibility[key]]
    if isinstance(native.get("spec"), dict) and "namespaceSelector" not in spec:
        conversion.warnings.append(
            FieldError(
                "spec.namespaceSelector",
                "absent: Kueue admits no namespace then, Muster admits every namespace",
                hint="set namespaceSelector to restrict which namespaces may submit",
            )
        )
    return conversion


def _cohort(doc: Mapping[str, Any]) -> Conversion:
    native = _native(doc)
    conversion = Conversion(doc=native)
    if _rename(_spec(native), "parent", "parentName"):
        conversion.paths = (("spec.parentName", "spec.parent"),)
    return conversion


def _workload_priority_class(doc: Mapping[str, Any]) -> Conversion:
    # Kueue's WorkloadPriorityClass orders workloads without touching pod priority; Muster has
    # one priority for both, so it becomes a PriorityClass with the same value.
    native = _native(doc)
    native["kind"] = "PriorityClass"
    return Conversion(doc=native)


CONVERTERS: dict[tuple[str, str], Converter] = {}
for _version in ("v1beta1", "v1beta2"):
    CONVERTERS.update(
        {
            (f"{_GROUP}/{_version}", "ResourceFlavor"): _same,
            (f"{_GROUP}/{_version}", "Topology"): _same,
            (f"{_GROUP}/{_version}", "LocalQueue"): _same,
            (f"{_GROUP}/{_version}", "ClusterQueue"): _cluster_queue,
            (f"{_GROUP}/{_version}", "Cohort"): _cohort,
            (f"{_GROUP}/{_version}", "WorkloadPriorityClass"): _workload_priority_class,
        }
    )
CONVERTERS[(f"{_GROUP}/v1alpha1", "Cohort")] = _cohort
CONVERTERS[(f"{_GROUP}/v1alpha1", "Topology")] = _same
