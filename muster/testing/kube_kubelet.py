"""Play the kubelet (and the node lifecycle controller) against a real kube-apiserver.

A test control plane has no kubelets: a test registers Nodes through the API, patches their
status as a kubelet would, and moves Pods through their phases by writing pod status. Every
object written here parses with the official python client's typed models (their required
fields, e.g. all of ``nodeInfo`` and each container status's ``image``, are always filled in).

Taints follow what a real cluster shows: a NotReady node carries ``node.kubernetes.io/not-ready``
with effects NoSchedule and NoExecute (the node lifecycle controller's job, which nothing else
does here), and a Ready node carries only the taints it was registered with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = ["NOT_READY_TAINT_KEY", "POD_PHASES", "KubeletRole", "stable_ip"]

NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed")
# Optimistic-concurrency retries: a Muster runtime under test may write the same object.
_CONFLICT_RETRIES = 10
_KUBELET_VERSION = "v1.20.2"


class KubeletRole:
    """Mixin with the kubelet's writes; a subclass provides :meth:`core_api`."""

    def core_api(self) -> Any:
        """The ``kubernetes.client.CoreV1Api`` (with admin rights) the writes go through."""
        raise NotImplementedError

    def register_node(
        self,
        name: str,
        capacity: Mapping[str, str | int],
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] | None = None,
        ready: bool = True,
    ) -> dict[str, Any]:
        """Create Node ``name`` and write its status as its kubelet would; returns the Node as a dict.

        ``capacity`` (also used as allocatable) maps resource names to quantities, e.g.
        ``{"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8}``; ``pods: 110`` is added unless
        given. ``labels`` come on top of the kubelet's own (hostname, os, arch). ``taints`` are
        dicts with ``key``, optional ``value`` and ``effect``.
        """
        core = self.core_api()
        node_capacity = {key: str(value) for key, value in capacity.items()}
        node_capacity.setdefault("pods", "110")
        node_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **(labels or {}),
        }
        core.create_node(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}}
        )
        core.patch_node_status(name, {"status": _node_status(name, node_capacity, ready)})
        # Admission (TaintNodesByCondition) taints every new node not-ready; replace that with the
        # taints matching the node's readiness, as the node lifecycle controller would.
        return _write_taints(core, name, [dict(t) for t in taints or ()], ready)

    def set_node_ready(self, name: str, ready: bool) -> dict[str, Any]:
        """Set the Ready condition of Node ``name`` and its not-ready taints; returns the Node."""
        core = self.core_api()

        def update(node: dict[str, Any]) -> dict[str, Any]:
            conditions = node.get("status", {}).get("conditions") or []
            previous = next((c for c in conditions if c.get("type") == "Ready"), None)
            others = [c for c in conditions if c.get("type") != "Ready"]
            node["status"]["conditions"] = [*others, _ready_condition(ready, _now(), previous)]
            return node

        node = _update_with_retry(
            core, core.read_node, lambda body: core.replace_node_status(name, body), update, name
        )
        own = [t for t in node["spec"].get("taints") or () if t.get("key") != NOT_READY_TAINT_KEY]
        return _write_taints(core, name, own, ready)

    def set_pod_status(
        self,
        namespace: str,
        name: str,
        phase: str,
        exit_code: int | None = None,
        reason: str | None = None,
        *,
        pod_reason: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Write the status a kubelet reports for Pod ``namespace/name`` in ``phase``; returns the Pod.

        Every container gets the same state: waiting (Pending on a node), running, or terminated
        with ``exit_code`` (default 0 for Succeeded, 1 for Failed). ``reason`` is the containers'
        waiting/terminated reason (default ContainerCreating, Completed or Error; e.g. OOMKilled);
        ``pod_reason`` and ``message`` go to the pod's own status (e.g. Evicted, DeadlineExceeded).
        Refuses impossible combinations (ValueError) before touching the API.
        """
        _check_phase(phase, exit_code)
        if phase == "Failed" and exit_code is None:
            exit_code = 1
        if phase == "Succeeded":
            exit_code = 0
        core = self.core_api()

        def update(pod: dict[str, Any]) -> dict[str, Any]:
            pod["status"] = _pod_status(pod, phase, exit_code, reason, pod_reason, message)
            return pod

        return _update_with_retry(
            core,
            core.read_namespaced_pod,
            lambda body: core.replace_namespaced_pod_status(name, namespace, body),
            update,
            name,
            namespace,
        )


def stable_ip(prefix: str, key: str) -> str:
    """An IPv4 address in ``prefix``.0.0/16 derived from ``key`` (same key, same address)."""
    value = int(_digest(key, 8), 16)
    return f"{prefix}.{(value >> 8) % 256}.{value % 254 + 1}"


def _node_status(name: str, capacity: dict[str, str], ready: bool) -> dict[str, Any]:
    now = _now()
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [*_pressure_conditions(now), _ready_condition(ready, now, None)],
        "addresses": [
            {"type": "InternalIP", "address": stable_ip("10.200", name)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": _digest(name, 32),
            "systemUUID": _digest("uuid" + name, 32),
            "bootID": _digest("boot" + name, 32),
            "kernelVersion": "6.1.0-muster-test",
            "osImage": "Muster test node",
            "containerRuntimeVersion": "fake://1.0.0",
            "kubeletVersion": _KUBELET_VERSION,
            "kubeProxyVersion": _KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def _check_phase(phase: str, exit_code: int | None) -> None:
    if phase not in POD_PHASES:
        raise ValueError(f"phase: must be one of {', '.join(POD_PHASES)}, got {phase!r}")
    if exit_code is None:
        return
    if phase in ("Pending", "Running"):
        raise ValueError(f"exit_code: only a Succeeded or Failed pod has one, got {exit_code} for {phase}")
    if phase == "Succeeded" and exit_code != 0:
        raise ValueError(f"exit_code: a Succeeded pod exits with 0, got {exit_code}; use phase='Failed'")
    if phase == "Failed" and exit_code == 0:
        raise ValueError("exit_code: a Failed pod exits non-zero, got 0; use phase='Succeeded'")


def _pod_status(
    pod: dict[str, Any],
    phase: str,
    exit_code: int | None,
    reason: str | None,
    pod_reason: str | None,
    message: str | None,
) -> dict[str, Any]:
    now = _now()
    old = pod.get("status") or {}
    node_name = pod["spec"].get("nodeName")
    old_states = {c["name"]: c for c in old.get("containerStatuses") or ()}
    containers = []
    # A pod not yet on a node has no containers to report.
    for container in pod["spec"]["containers"] if node_name is not None else ():
        previous = old_states.get(container["name"], {})
        state = _container_state(phase, exit_code, reason, previous.get("state") or {}, now)
        containers.append(
            {
                "name": container["name"],
                "image": container.get("image") or "",
                "imageID": "",
                "containerID": f"fake://{pod['metadata']['uid']}/{container['name']}",
                "ready": phase == "Running",
                "started": phase == "Running",
                "restartCount": previous.get("restartCount", 0),
                "state": state,
            }
        )
    scheduled = node_name is not None
    running = phase == "Running"
    conditions = _merge_conditions(
        old.get("conditions") or [],
        {
            "PodScheduled": scheduled,
            "Initialized": scheduled,
            "ContainersReady": running,
            "Ready": running,
        },
        now,
        "PodCompleted" if phase in ("Succeeded", "Failed") else None,
    )
    status: dict[str, Any] = {"phase": phase, "conditions": conditions, "qosClass": old.get("qosClass")}
    if node_name is not None:
        status["hostIP"] = stable_ip("10.200", node_name)
        status["podIP"] = old.get("podIP") or stable_ip("10.244", pod["metadata"]["uid"])
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["startTime"] = old.get("startTime") or now
    if containers:
        status["containerStatuses"] = containers
    if pod_reason is not None:
        status["reason"] = pod_reason
    if message is not None:
        status["message"] = message
    return {key: value for key, value in status.items() if value is not None}


def _container_state(
    phase: str, exit_code: int | None, reason: str | None, previous: dict[str, Any], now: str
) -> dict[str, Any]:
    started = (previous.get("running") or previous.get("terminated") or {}).get("startedAt") or now
    if phase == "Pending":
        return {"waiting": {"reason": reason or "ContainerCreating"}}
    if phase == "Running":
        return {"running": {"startedAt": started}}
    default_reason = "Completed" if exit_code == 0 else "Error"
    terminated = {
        "exitCode": exit_code,
        "reason": reason or default_reason,
        "startedAt": started,
        "finishedAt": now,
    }
    return {"terminated": terminated}


def _merge_conditions(
    old: list[dict[str, Any]], wanted: Mapping[str, bool], now: str, false_reason: str | None
) -> list[dict[str, Any]]:
    """Pod conditions with lastTransitionTime moved only where the status changed."""
    by_type = {c["type"]: c for c in old}
    merged = []
    for kind, value in wanted.items():
        status = "True" if value else "False"
        previous = by_type.get(kind)
        condition: dict[str, Any] = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": previous["lastTransitionTime"]
            if previous and previous.get("status") == status and previous.get("lastTransitionTime")
            else now,
        }
        if not value and false_reason and kind in ("Ready", "ContainersReady"):
            condition["reason"] = false_reason
        merged.append(condition)
    return merged


def _ready_condition(ready: bool, now: str, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    status = "True" if ready else "False"
    unchanged = previous is not None and previous.get("status") == status
    return {
        "type": "Ready",
        "status": status,
        "reason": "KubeletReady" if ready else "KubeletNotReady",
        "message": "kubelet is posting ready status" if ready else "kubelet stopped posting ready status",
        "lastHeartbeatTime": now,
        "lastTransitionTime": previous["lastTransitionTime"] if unchanged and previous else now,
    }


def _pressure_conditions(now: str) -> list[dict[str, Any]]:
    return [
        {
            "type": kind,
            "status": "False",
            "reason": f"KubeletHasSufficient{kind.removesuffix('Pressure')}",
            "message": f"kubelet has no {kind}",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]


def _write_taints(core: Any, name: str, own: list[dict[str, Any]], ready: bool) -> dict[str, Any]:
    def update(node: dict[str, Any]) -> dict[str, Any]:
        taints = list(own)
        if not ready:
            previous = {
                t["effect"]: t
                for t in node["spec"].get("taints") or ()
                if t.get("key") == NOT_READY_TAINT_KEY
            }
            for effect in ("NoSchedule", "NoExecute"):
                taint = previous.get(effect) or {"key": NOT_READY_TAINT_KEY, "effect": effect}
                if effect == "NoExecute":
                    taint.setdefault("timeAdded", _now())
                taints.append(taint)
        node["spec"]["taints"] = taints or None
        return node

    return _update_with_retry(core, core.read_node, lambda body: core.replace_node(name, body), update, name)


def _update_with_retry(
    core: Any,
    read: Callable[..., Any],
    write: Callable[[dict[str, Any]], Any],
    update: Callable[[dict[str, Any]], dict[str, Any]],
    *read_args: str,
) -> dict[str, Any]:
    """Read, change and replace an object (the read's resourceVersion guards the write), again
    on a 409 Conflict; returns the stored object as a dict."""
    from kubernetes.client.exceptions import ApiException

    to_dict = core.api_client.sanitize_for_serialization
    for _ in range(_CONFLICT_RETRIES):
        current = to_dict(read(*read_args))
        try:
            return to_dict(write(update(current)))
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise RuntimeError(f"{'/'.join(read_args)}: still conflicting after {_CONFLICT_RETRIES} attempts")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]
