"""Muster pods as Kubernetes Pods, and Kubernetes Pod status as Muster's.

A Muster pod becomes a Pod of the same name in its namespace:

* labels: the Muster pod's (``muster.dev/job-name``, ``muster.dev/replica-type``,
  ``muster.dev/replica-index``, ``muster.dev/workload``, ...) plus
  ``app.kubernetes.io/managed-by: muster``; the annotation ``muster.dev/pod-uid`` names the
  Muster pod it materialises;
* spec: the Muster pod's spec as stored (containers, init containers, env with ``valueFrom``,
  volumes, probes, security context, ``priorityClassName``, ``terminationGracePeriodSeconds``
  ...), with ``schedulerName: muster``, ``restartPolicy: Never`` (Muster's controllers decide
  what a failure means) and, for a gang, ``hostname``/``subdomain`` so that
  ``<pod>.<workload>`` resolves through the gang's headless Service. It is created unbound:
  the runtime binds it to the node the scheduler chose through the Binding subresource;
* resources: whole GPUs as ``nvidia.com/gpu`` in limits (an extended resource's request must
  equal its limit), so the node's device plugin binds the devices. A GPU share (``500m``, or
  ``muster.dev/gpu-memory``) cannot be asked of a device plugin: it is a launch error.

Status: the phase as is; a final phase gets Muster's classified reason: the pod's own reason
first (Evicted, DeadlineExceeded, a lost node), then a container's (OOMKilled), then Error with
the exit code, or Completed. A pod the kubelet refused to admit (``OutOfnvidia.com/gpu``,
``UnexpectedAdmissionError``: the node could not take it after all) is reported as a failed
gang start: it never ran, and the gang is placed again.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from muster.api.quantity import Quantity, QuantityError
from muster.runtime.base import (
    GPU_RESOURCE,
    ContainerStatus,
    GangMember,
    LaunchError,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
)
from muster.runtime.kubernetes.config import (
    GANG_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    SCHEDULER_NAME,
    UID_ANNOTATION,
)

__all__ = [
    "binding",
    "gang_service",
    "hostname_of",
    "muster_uid",
    "observed_status",
    "pod_manifest",
    "service_name",
]

Obj = dict[str, Any]
GPU_MEMORY_RESOURCE = "muster.dev/gpu-memory"
# Fields of a Muster pod's spec that are Muster's bookkeeping, not Kubernetes'.
_MUSTER_FIELDS = ("gpus", "gpuMilli", "gpuMemory", "nodeName", "priority")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_MAX = 63
# Pod-level reasons: what the kubelet or a controller says ended the pod.
_POD_REASONS = {
    "Evicted": PodReason.EVICTED,
    "DeadlineExceeded": PodReason.DEADLINE_EXCEEDED,
    "NodeLost": PodReason.NODE_LOST,
    "Shutdown": PodReason.NODE_LOST,
    "NodeShutdown": PodReason.NODE_LOST,
    "Terminated": PodReason.NODE_LOST,  # graceful node shutdown
}
# The kubelet's admission refusals: the pod never ran on the node Muster bound it to.
_ADMISSION = re.compile(r"^(OutOf.+|UnexpectedAdmissionError|NodeAffinity|NodeName|NodePorts|Taint.*)$")
_REASON_ORDER = (PodReason.OOM_KILLED, PodReason.ERROR, PodReason.COMPLETED)


def service_name(workload: str) -> str | None:
    """The gang's headless Service name (the workload's), or None when it cannot be one."""
    return workload if len(workload) <= _LABEL_MAX and _DNS_1035.match(workload) else None


def hostname_of(pod: str) -> str | None:
    return pod if len(pod) <= _LABEL_MAX and _DNS_1123.match(pod) else None


def muster_uid(pod: Obj) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(UID_ANNOTATION)


def pod_manifest(member: GangMember, workload: str) -> Obj:
    """The unbound Pod of ``member``; LaunchError for what a cluster cannot run."""
    launch = member.pod
    ref = launch.ref
    spec: Obj = copy.deepcopy(dict(launch.spec))
    for key in _MUSTER_FIELDS:
        spec.pop(key, None)
    spec["schedulerName"] = SCHEDULER_NAME
    spec["restartPolicy"] = "Never"
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or ()):
            _gpu_resources(container, f"spec.{group}[{i}]")
    _dns(spec, ref.name, workload)
    labels = {**launch.labels, MANAGED_BY_LABEL: MANAGED_BY_VALUE, GANG_LABEL: workload}
    annotations = {**launch.annotations, UID_ANNOTATION: ref.uid}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": ref.name,
            "namespace": ref.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    }


def gang_service(namespace: str, workload: str, owners: Sequence[Obj]) -> Obj:
    """The headless Service through which ``<pod>.<workload>`` resolves to each pod of the gang.

    It is owned by the gang's Pods, so the cluster's garbage collector removes it with them.
    ``publishNotReadyAddresses``: ranks resolve each other while they start, before any is ready.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": workload,
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE, GANG_LABEL: workload},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": o["metadata"]["name"],
                    "uid": o["metadata"]["uid"],
                }
                for o in owners
            ],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {GANG_LABEL: workload, MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            "publishNotReadyAddresses": True,
        },
    }


def _owner(pod: Obj) -> Obj:
    meta = pod["metadata"]
    return {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}


def binding(pod: Obj, node: str) -> Obj:
    """The Binding of ``pod`` (that incarnation: its uid) to ``node``, as kube-scheduler writes it."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def observed_status(ref: PodRef, pod: Obj) -> PodStatusChange:
    """Muster's status of a Kubernetes Pod as last observed."""
    status = pod.get("status") or {}
    phase = PodPhase(status.get("phase") or "Pending")
    containers = tuple(_container(c) for c in status.get("containerStatuses") or ())
    started = status.get("startTime") if phase is not PodPhase.PENDING else None
    if phase in (PodPhase.PENDING, PodPhase.RUNNING):
        return PodStatusChange(
            ref, phase, containers=containers, started_at=started, pod_ip=status.get("podIP") or None
        )
    finished = max((c.finished_at for c in containers if c.finished_at), default=None)
    own = status.get("reason") or ""
    reason, message, code = _classify(phase, own, status.get("message") or "", containers)
    return PodStatusChange(
        ref,
        phase,
        reason=reason,
        message=message,
        exit_code=code,
        containers=containers,
        started_at=status.get("startTime"),
        finished_at=finished,
    )


# -- helpers ------------------------------------------------------------------------------------


def _gpu_resources(container: Obj, path: str) -> None:
    resources = container.setdefault("resources", {})
    requests = resources.get("requests") or {}
    limits = resources.setdefault("limits", {})
    if GPU_MEMORY_RESOURCE in requests or GPU_MEMORY_RESOURCE in limits:
        raise _share_error(f"{path}.resources.requests[{GPU_MEMORY_RESOURCE}]", "a GPU share by memory")
    amount = requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE))
    if amount is None:
        return
    try:
        gpus = Quantity.parse(amount)
    except QuantityError as exc:
        raise LaunchError(f"{path}.resources.requests[{GPU_RESOURCE}]", str(exc)) from None
    if gpus.value.denominator != 1:
        raise _share_error(f"{path}.resources.requests[{GPU_RESOURCE}]", f"a GPU share ({amount})")
    # An extended resource is requested through its limit, and a request must equal it.
    limits[GPU_RESOURCE] = str(gpus.as_int())
    if GPU_RESOURCE in requests:
        requests[GPU_RESOURCE] = str(gpus.as_int())


def _share_error(path: str, what: str) -> LaunchError:
    return LaunchError(
        path,
        f"{what} cannot be asked of the Kubernetes device plugin",
        f"ask for whole GPUs ({GPU_RESOURCE}: 1), or enable the device plugin's time-slicing, whose "
        f"replicas are whole {GPU_RESOURCE}",
    )


def _dns(spec: Obj, pod: str, workload: str) -> None:
    """``hostname``/``subdomain`` so the gang resolves ``<pod>.<workload>``; a pod whose
    environment names a master (``MASTER_ADDR``) needs both to be valid names."""
    service, hostname = service_name(workload), hostname_of(pod)
    if service and hostname:
        spec.setdefault("hostname", hostname)
        spec.setdefault("subdomain", service)
        return
    needs = any(
        e.get("name") == "MASTER_ADDR" for c in spec.get("containers") or () for e in c.get("env") or ()
    )
    if not needs:
        return
    if service is None:
        raise LaunchError(
            "metadata.name",
            f"the job name {workload!r} must be a DNS-1035 label (at most 63 lower-case letters, digits "
            "and '-', starting with a letter) for MASTER_ADDR to resolve through its headless Service",
            "rename the job",
        )
    raise LaunchError(
        "metadata.name",
        f"the pod name {pod!r} must be a DNS-1123 label (at most 63 characters) to be a hostname",
        "shorten the job's name",
    )


def _container(c: Obj) -> ContainerStatus:
    state = c.get("state") or {}
    name = c.get("name") or ""
    if "terminated" in state:
        t = state["terminated"] or {}
        code = t.get("exitCode")
        signal = t.get("signal") or (code - 128 if isinstance(code, int) and code > 128 else None)
        return ContainerStatus(
            name=name,
            state="terminated",
            exit_code=code,
            signal=signal,
            reason=_container_reason(t.get("reason") or "", code),
            message=t.get("message") or "",
            started_at=t.get("startedAt"),
            finished_at=t.get("finishedAt"),
        )
    if "running" in state:
        return ContainerStatus(
            name=name, state="running", started_at=(state["running"] or {}).get("startedAt")
        )
    waiting = state.get("waiting") or {}
    return ContainerStatus(name=name, state="waiting", message=waiting.get("reason") or "")


def _container_reason(reason: str, code: int | None) -> PodReason:
    if reason == "OOMKilled":
        return PodReason.OOM_KILLED
    if code == 0:
        return PodReason.COMPLETED
    return PodReason.ERROR


def _classify(
    phase: PodPhase, own: str, message: str, containers: tuple[ContainerStatus, ...]
) -> tuple[PodReason, str, int | None]:
    """Reason, message and exit code of a final pod."""
    if own in _POD_REASONS:
        return _POD_REASONS[own], message or own, _first_failure_code(containers)
    if phase is PodPhase.FAILED and _ADMISSION.match(own):
        return PodReason.GANG_START_FAILED, f"the kubelet refused the pod ({own}): {message}", None
    if phase is PodPhase.SUCCEEDED:
        return PodReason.COMPLETED, "", 0
    for reason in _REASON_ORDER:
        culprit = next((c for c in containers if c.reason is reason), None)
        if culprit is None or reason is PodReason.COMPLETED:
            continue
        detail = f"exit code {culprit.exit_code}" + (f": {culprit.message}" if culprit.message else "")
        return reason, f"container {culprit.name!r}: {detail}", culprit.exit_code
    return PodReason.ERROR, message or own or "the pod failed", _first_failure_code(containers)


def _first_failure_code(containers: tuple[ContainerStatus, ...]) -> int | None:
    return next((c.exit_code for c in containers if c.exit_code), None)


def labels_of(pod: Obj) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}
