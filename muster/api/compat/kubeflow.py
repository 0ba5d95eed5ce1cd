"""Kubeflow's TensorFlow and MPI jobs (``kubeflow.org/v1 TFJob`` and ``MPIJob``, Training
Operator v1) to TrainingJob, with ``framework: TensorFlow`` or ``MPI`` deciding the replicas'
environment (docs/trainingjob.md, "TensorFlow and MPI jobs").

=====================================  ===============================================
TFJob                                  TrainingJob
=====================================  ===============================================
spec.tfReplicaSpecs.{Chief, Master,    spec.replicaSpecs.{Chief, Master, Worker, PS,
Worker, PS, Evaluator} (any case)      Evaluator}; framework TensorFlow
a replica's restartPolicy unset        Never (the TFJob default)
spec.successPolicy                     spec.successPolicy ("" or AllWorkers)
spec.runPolicy                         spec.runPolicy (queue and priority as PyTorchJob)
spec.enableDynamicWorker               kept in the ignored-fields annotation, warned
=====================================  ===============================================

=====================================  ===============================================
MPIJob                                 TrainingJob
=====================================  ===============================================
spec.mpiReplicaSpecs.{Launcher,        spec.replicaSpecs.{Launcher, Worker};
Worker} (any case)                     framework MPI
a replica's restartPolicy unset        Never (the MPIJob default)
spec.slotsPerWorker (default 1)        spec.slotsPerWorker (the hostfile's slots);
                                       warned when above the GPUs a Worker asks for
spec.cleanPodPolicy (deprecated)       spec.runPolicy.cleanPodPolicy, warned
spec.mainContainer                     dropped, warned: every container of the Launcher
                                       gets the MPI variables
spec.runPolicy                         spec.runPolicy (queue and priority as PyTorchJob)
=====================================  ===============================================

Fields of ``runPolicy`` Muster has no equivalent for (``schedulingPolicy.minResources``,
``scheduleTimeoutSeconds``, ...) are kept and warned, as for a PyTorchJob.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from muster.api.compat.base import Conversion, Converter, mapping_at, native_copy
from muster.api.compat.jobs import kubeflow_replicas, queue_and_priority
from muster.api.errors import FieldError
from muster.api.quantity import Quantity, QuantityError

__all__ = ["CONVERTERS", "convert_mpijob", "convert_tfjob"]

_TF_TYPES = {t.lower(): t for t in ("Chief", "Master", "Worker", "PS", "Evaluator")}
_MPI_TYPES = {t.lower(): t for t in ("Launcher", "Worker")}
_GPU = "nvidia.com/gpu"


def convert_tfjob(doc: Mapping[str, Any]) -> Conversion:
    """A Kubeflow TFJob as a TensorFlow TrainingJob (see the table in the module docstring)."""
    return _convert(doc, "tfReplicaSpecs", "TensorFlow", _TF_TYPES)


def convert_mpijob(doc: Mapping[str, Any]) -> Conversion:
    """A Kubeflow MPIJob as an MPI TrainingJob (see the table in the module docstring)."""
    conversion = _convert(doc, "mpiReplicaSpecs", "MPI", _MPI_TYPES)
    assert conversion.doc is not None
    spec = conversion.doc["spec"]
    paths = list(conversion.paths)
    if "mainContainer" in spec:
        conversion.warnings.append(
            FieldError(
                "spec.mainContainer",
                "not needed: every container of the Launcher gets the hostfile and MPI variables",
                spec.pop("mainContainer"),
            )
        )
    if "cleanPodPolicy" in spec:
        policy = spec.pop("cleanPodPolicy")
        run_policy = spec.setdefault("runPolicy", {})
        if isinstance(run_policy, dict) and "cleanPodPolicy" not in run_policy:
            run_policy["cleanPodPolicy"] = policy
            paths.append(("spec.runPolicy.cleanPodPolicy", "spec.cleanPodPolicy"))
            conversion.warnings.append(
                FieldError("spec.cleanPodPolicy", "deprecated: used as spec.runPolicy.cleanPodPolicy")
            )
        else:
            conversion.warnings.append(
                FieldError("spec.cleanPodPolicy", "ignored: spec.runPolicy.cleanPodPolicy is set", policy)
            )
    conversion.warnings.extend(_slots_beyond_gpus(spec))
    conversion.paths = tuple(paths)
    return conversion


def _convert(doc: Mapping[str, Any], key: str, framework: str, types: Mapping[str, str]) -> Conversion:
    """What TFJob and MPIJob share: replica specs moved and named, the framework set, the
    Kubeflow default restartPolicy (Never), queue and priority as a PyTorchJob's."""
    native = native_copy(doc, "TrainingJob")
    spec = mapping_at(native, "spec", "spec")
    conversion = Conversion(doc=native)
    paths = kubeflow_replicas(doc, spec, key, lambda name: types.get(name.lower(), name))
    spec["framework"] = framework
    templates = []
    for replica in (spec.get("replicaSpecs") or {}).values():
        if isinstance(replica, dict):
            replica.setdefault("restartPolicy", "Never")
            templates.append(replica.get("template"))
    paths += queue_and_priority(native, spec, templates)
    conversion.paths = tuple(paths)
    return conversion


def _slots_beyond_gpus(spec: dict[str, Any]) -> list[FieldError]:
    """slotsPerWorker above the GPUs a Worker asks for: the extra ranks share its GPUs, since
    Muster binds GPUs to pods, not to ranks."""
    slots = spec.get("slotsPerWorker")
    worker = (spec.get("replicaSpecs") or {}).get("Worker")
    if not isinstance(slots, int) or isinstance(slots, bool) or not isinstance(worker, dict):
        return []
    gpus = _template_gpus(worker.get("template"))
    if not gpus or slots <= gpus:
        return []
    return [
        FieldError(
            "spec.slotsPerWorker",
            f"is more than the {gpus:g} GPU(s) each Worker asks for: the hostfile lists {slots} slots per "
            "Worker, and the ranks beyond its GPUs share them (Muster binds GPUs to pods, not to ranks)",
            slots,
            f"set slotsPerWorker to the GPUs per Worker ({gpus:g}) for one rank per GPU",
        )
    ]


def _template_gpus(template: Any) -> float:
    """GPUs a pod of ``template`` asks for (limits, else requests, summed over containers);
    0 when it asks none or says it in a way validation will report."""
    pod = template.get("spec") if isinstance(template, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    total = 0.0
    for c in containers if isinstance(containers, list) else []:
        resources = c.get("resources") if isinstance(c, dict) else None
        if not isinstance(resources, dict):
            continue
        for part in ("limits", "requests"):
            amounts = resources.get(part)
            if isinstance(amounts, dict) and _GPU in amounts:
                try:
                    total += float(Quantity.parse(amounts[_GPU]).value)
                except (QuantityError, ValueError, TypeError):
                    pass
                break
    return total


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("kubeflow.org/v1", "TFJob"): convert_tfjob,
    ("kubeflow.org/v1", "MPIJob"): convert_mpijob,
}
