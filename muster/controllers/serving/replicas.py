"""What a replica is made of: its Workload (one pod set of one pod, admitted through the
service's queue like any workload) and, once admitted, its pod bound to the placement, with
the serving environment:

==========================  ====================================================================
``PORT``                    the port to listen on: the predictor's on a runtime whose pods have
                            addresses of their own (Kubernetes), else one free port per replica
``HOST``                    ``0.0.0.0`` where pods have their own address, else ``127.0.0.1``
``MUSTER_MODEL_NAMES``      the served model names, comma-separated
``MUSTER_SERVICE``,         the InferenceService, its revision and the replica's name
``MUSTER_REVISION``,
``MUSTER_REPLICA``
``PYTHONUNBUFFERED``        ``1``
==========================  ====================================================================

By default a replica's Workload is not preemptible (serving replicas are never preempted by
a training job); a service that names a PriorityClass gets preemptible replicas with that
class's priority, and priorities decide as for any workload (docs/serving.md, "Preemption").
"""

from __future__ import annotations

import copy
from typing import Any

from muster.api.base import API_VERSION
from muster.api.labels import (
    ATTEMPT_LABEL,
    SERVING_PORT_ANNOTATION,
    SERVING_REPLICA_LABEL,
    SERVING_REVISION_LABEL,
    SERVING_SERVICE_LABEL,
    WORKLOAD_LABEL,
)
from muster.controllers.trainingjob.pods import bound_pod_spec, owner_reference, pod_set_of

__all__ = [
    "DRAIN_ANNOTATION",
    "PREDICTOR_ONLY_FIELDS",
    "RESTARTED_AT_ANNOTATION",
    "RESTARTS_ANNOTATION",
    "pod_template",
    "replica_index",
    "replica_name",
    "replica_pod",
    "replica_workload",
]

Obj = dict[str, Any]
# When the controller decided to scale a replica down (RFC 3339): it gets no new requests, and
# its pod stops once the gateway reports its last request done.
DRAIN_ANNOTATION = "muster.dev/serving-draining"
# Times the replica's process exited and was started again (on the same admission), and when
# it was last restarted (the back-off counts from there).
RESTARTS_ANNOTATION = "muster.dev/serving-restarts"
RESTARTED_AT_ANNOTATION = "muster.dev/serving-restarted-at"
# PredictorSpec fields that are not PodSpec fields.
PREDICTOR_ONLY_FIELDS = ("port", "readinessPath")


def replica_name(revision: str, index: int) -> str:
    return f"{revision}-{index}"


def replica_index(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def pod_template(predictor: Obj) -> Obj:
    """The predictor as a pod template (without the serving-only fields)."""
    spec = {k: copy.deepcopy(v) for k, v in predictor.items() if k not in PREDICTOR_ONLY_FIELDS}
    return {"spec": spec}


def replica_workload(
    isvc: Obj,
    revision: str,
    predictor: Obj,
    name: str,
    *,
    queue: str | None,
    priority: int,
    priority_class: str | None,
) -> Obj:
    meta = isvc["metadata"]
    spec: Obj = {
        "priority": priority,
        "preemptible": priority_class is not None,
        "podSets": [pod_set_of("main", pod_template(predictor), 1)],
    }
    if queue:
        spec["queueName"] = queue
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace") or "default",
            "labels": {
                SERVING_SERVICE_LABEL: meta["name"],
                SERVING_REVISION_LABEL: revision,
                SERVING_REPLICA_LABEL: name,
            },
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": spec,
    }


def replica_pod(
    isvc: Obj,
    workload: Obj,
    predictor: Obj,
    placement: Obj,
    *,
    port: int,
    host: str,
    restarts: int,
) -> Obj:
    """The replica's pod, bound to ``placement``, listening on ``port``."""
    meta = isvc["metadata"]
    wl_meta = workload["metadata"]
    name = wl_meta["name"]
    revision = wl_meta["labels"][SERVING_REVISION_LABEL]
    models = isvc["spec"].get("modelNames") or [meta["name"]]
    env = {
        "PORT": str(port),
        "HOST": host,
        "MUSTER_MODEL_NAMES": ",".join(models),
        "MUSTER_SERVICE": meta["name"],
        "MUSTER_REVISION": revision,
        "MUSTER_REPLICA": name,
        "PYTHONUNBUFFERED": "1",
    }
    spec = bound_pod_spec(pod_template(predictor), placement, env)
    for container in spec.get("containers") or []:
        # the serving variables first, so the container's own may refer to them: $(PORT)
        ours = [e for e in container["env"] if e["name"] in env]
        container["env"] = ours + [e for e in container["env"] if e["name"] not in env]
    return {
        "apiVersion": API_VERSION,
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": wl_meta.get("namespace") or "default",
            "labels": {
                SERVING_SERVICE_LABEL: meta["name"],
                SERVING_REVISION_LABEL: revision,
                SERVING_REPLICA_LABEL: name,
                WORKLOAD_LABEL: name,
                ATTEMPT_LABEL: str(restarts),
            },
            "annotations": {SERVING_PORT_ANNOTATION: str(port)},
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": spec,
    }
