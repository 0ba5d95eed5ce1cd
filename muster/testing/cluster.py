"""Wire dicts of a cluster in motion, for tests of views over objects (``why``, ``top``):
nodes with GPUs, quota queues, Workloads pending or admitted, bound pods in any phase,
jobs with conditions. Each is the smallest valid object of its kind (status included), in
the shape the controllers write (docs/control-plane.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from muster.api.base import API_VERSION
from muster.api.quantity import Quantity

__all__ = [
    "TS",
    "admitted",
    "cluster_queue",
    "condition",
    "ddp_job",
    "event",
    "gpu_node",
    "pod",
    "quota_shortfall",
    "workload",
]

TS = "2025-01-01T00:00:00Z"
_GPU = "nvidia.com/gpu"


def condition(type_: str, status: str = "True", reason: str = "", message: str = "", at: str = TS) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": at}


def gpu_node(
    name: str,
    gpus: int = 4,
    cpu: str = "32",
    memory: str = "128Gi",
    model: str = "A100",
    gpu_memory: str = "80Gi",
    unhealthy: Sequence[int] = (),
) -> dict[str, Any]:
    """A Ready node with ``gpus`` GPUs (``unhealthy`` ones left out of allocatable)."""
    devices = [
        {
            "index": i,
            "uuid": f"GPU-{name}-{i}",
            "model": model,
            "memory": gpu_memory,
            "health": "Unhealthy" if i in unhealthy else "Healthy",
        }
        for i in range(gpus)
    ]
    healthy = gpus - len(set(unhealthy))
    return {
        "apiVersion": API_VERSION,
        "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": TS},
        "spec": {},
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, _GPU: str(gpus)},
            "allocatable": {"cpu": cpu, "memory": memory, _GPU: str(healthy)},
            "gpus": devices,
            "conditions": [condition("Ready")],
            "runtime": "local",
        },
    }


def cluster_queue(
    name: str,
    quota: Mapping[str, Mapping[str, str | tuple[str, str | None] | tuple[str, str | None, str | None]]],
    cohort: str | None = None,
    within: str = "LowerPriority",
    strategy: str = "BestEffortFIFO",
) -> dict[str, Any]:
    """``quota``: flavor -> resource -> nominal, (nominal, borrowingLimit) or (nominal,
    borrowingLimit, lendingLimit)."""
    resources = sorted({r for per in quota.values() for r in per})
    flavors = []
    for flavor, per in quota.items():
        items = []
        for r in resources:
            value = per.get(r, "0")
            nominal, borrow, lend = (*value, None)[:3] if isinstance(value, tuple) else (value, None, None)
            item: dict[str, Any] = {"name": r, "nominalQuota": nominal}
            if borrow is not None:
                item["borrowingLimit"] = borrow
            if lend is not None:
                item["lendingLimit"] = lend
            items.append(item)
        flavors.append({"name": flavor, "resources": items})
    spec: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": resources, "flavors": flavors}],
        "preemption": {"withinClusterQueue": within},
        "queueingStrategy": strategy,
    }
    if cohort:
        spec["cohort"] = cohort
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "creationTimestamp": TS},
        "spec": spec,
    }


def workload(
    name: str,
    namespace: str = "default",
    queue: str = "default",
    priority: int = 0,
    pods: int = 2,
    requests: Mapping[str, str] | None = None,
    created: str = TS,
    pending: tuple[str, str, dict] | None = None,
    conditions: Sequence[dict] = (),
    active: bool = True,
    owner: str | None = None,
) -> dict[str, Any]:
    """A Workload of one pod set of ``pods`` pods; ``pending`` = (reason, message, details)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"kind": "TrainingJob", "name": owner, "apiVersion": API_VERSION}]
    status: dict[str, Any] = {"conditions": list(conditions)}
    if pending is not None:
        status["pending"] = {"reason": pending[0], "message": pending[1], "details": pending[2]}
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": queue,
            "priority": priority,
            "active": active,
            "podSets": [{"name": "worker", "count": pods, "requests": dict(requests or {_GPU: "1"})}],
        },
        "status": status,
    }


def admitted(
    wl: dict[str, Any], cluster_queue: str, node: str, gpus: Sequence[Sequence[int]], flavor: str = "default"
) -> dict[str, Any]:
    """``wl`` admitted by ``cluster_queue``: its pods on ``node``, pod i on GPUs ``gpus[i]``,
    charged the whole pod set's requests in ``flavor``."""
    pod_set = wl["spec"]["podSets"][0]
    usage = {r: str(Quantity.parse(v) * pod_set["count"]) for r, v in pod_set["requests"].items()}
    wl["status"]["admission"] = {
        "clusterQueue": cluster_queue,
        "podSetAssignments": [
            {
                "name": pod_set["name"],
                "count": pod_set["count"],
                "flavors": {r: flavor for r in pod_set["requests"]},
                "resourceUsage": usage,
                "pods": [{"node": node, "gpus": list(g)} for g in gpus],
            }
        ],
    }
    wl["status"]["conditions"] = [condition("QuotaReserved"), condition("Admitted")]
    wl["status"].pop("pending", None)
    return wl


def pod(
    name: str,
    job: str | None = None,
    replica: tuple[str, int] = ("Worker", 0),
    namespace: str = "default",
    node: str | None = "node-a",
    gpus: Sequence[int] = (),
    gpu_milli: int | None = None,
    phase: str = "Running",
    reason: str | None = None,
    exit_code: int | None = None,
    message: str = "",
    requests: Mapping[str, str] | None = None,
    finished: str | None = None,
) -> dict[str, Any]:
    """A bound pod of ``job`` (labels as the TrainingJob controller sets them)."""
    labels = {}
    if job:
        labels = {
            "muster.dev/job-name": job,
            "muster.dev/replica-type": replica[0],
            "muster.dev/replica-index": str(replica[1]),
            "muster.dev/workload": job,
        }
    container: dict[str, Any] = {"name": "main", "command": ["python", "train.py"]}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    spec: dict[str, Any] = {"containers": [container], "gpus": list(gpus)}
    if node:
        spec["nodeName"] = node
    if gpu_milli is not None:
        spec["gpuMilli"] = gpu_milli
    status: dict[str, Any] = {"phase": phase, "message": message, "startTime": TS}
    if reason:
        status["reason"] = reason
    if finished:
        status["finishTime"] = finished
    if exit_code is not None:
        status["containerStatuses"] = [
            {"name": "main", "state": "Terminated", "exitCode": exit_code, "reason": reason}
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "creationTimestamp": TS},
        "spec": spec,
        "status": status,
    }


def ddp_job(
    name: str,
    namespace: str = "default",
    workers: int = 1,
    conditions: Sequence[dict] = (),
    suspend: bool = False,
    backoff_limit: int | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Master + ``workers`` Worker TrainingJob, one GPU per replica."""
    template = {
        "spec": {
            "containers": [
                {"name": "trainer", "command": ["python", "train.py"], "resources": {"limits": {_GPU: "1"}}}
            ]
        }
    }
    run_policy: dict[str, Any] = {"suspend": suspend}
    if backoff_limit is not None:
        run_policy["backoffLimit"] = backoff_limit
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": TS},
        "spec": {
            "replicaSpecs": {
                "Master": {"replicas": 1, "template": template},
                "Worker": {"replicas": workers, "template": template},
            },
            "runPolicy": run_policy,
        },
        "status": {"conditions": list(conditions), "workload": name, **(status or {})},
    }


def event(
    about: Mapping[str, Any], reason: str, message: str, type_: str = "Normal", at: str = TS
) -> dict[str, Any]:
    meta = about["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{reason.lower()}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {"kind": about["kind"], "name": meta["name"], "namespace": meta.get("namespace")},
        "type": type_,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
    }


def quota_shortfall(
    requested: int, available: int, nominal: int, used: int, maximum: int | None, resource: str = _GPU
) -> dict[str, Any]:
    """One entry of a QuotaExhausted/ExceedsMaxQuota ``details.shortfalls``, in the scheduler's
    units (thousandths of a GPU or CPU), flavor ``default``."""
    return {
        "flavor": "default",
        "resource": resource,
        "requested": requested,
        "available": available,
        "nominal": nominal,
        "used": used,
        "maximum": maximum,
    }
