"""The test control plane is a real Kubernetes API: what Muster's Kubernetes runtime will rely on.

Pods are created for the ``muster`` scheduler, bound through the Binding subresource and driven
through their phases by a test playing the kubelet; RBAC really denies the ``muster`` user until
a ClusterRole is bound; Leases give leader election its compare-and-swap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from muster.testing import wait_for
from muster.testing.kubernetes import MUSTER, ControlPlane

try:
    from kubernetes import client, watch
    from kubernetes.client.exceptions import ApiException
except ImportError:  # the k8s_control_plane fixture reports it: a skip, or a failure under CI
    client = watch = ApiException = None  # type: ignore[assignment]

pytestmark = [pytest.mark.slow, pytest.mark.kubernetes]

GPU_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
}


@pytest.fixture
def admin(k8s_control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    with k8s_control_plane.admin_client() as api:
        yield api


@pytest.fixture
def node_name(k8s_control_plane: ControlPlane, k8s_namespace: str, admin: client.ApiClient) -> Iterator[str]:
    """A name for a Node of this test; the Node is deleted afterwards (nodes are cluster-wide)."""
    name = f"node-{k8s_namespace}"
    yield name
    try:
        client.CoreV1Api(admin).delete_node(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_pod_is_bound_and_driven_through_its_phases(
    k8s_control_plane: ControlPlane, k8s_namespace: str, node_name: str, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    registered = k8s_control_plane.register_node(
        node_name, {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": 8}, labels=GPU_LABELS
    )
    assert registered["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    node = core.read_node(node_name)
    assert node.status.capacity["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert _condition(node.status.conditions, "Ready") == "True"
    assert not node.spec.taints  # admission's not-ready taint was lifted

    created = core.create_namespaced_pod(k8s_namespace, _gpu_pod("trainer-0", gpus=8))
    assert created.spec.scheduler_name == "muster"
    assert created.status.phase == "Pending"

    # The typed client cannot parse the Status that 1.20 answers to a Binding: read it raw.
    response = core.create_namespaced_binding(
        k8s_namespace,
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "trainer-0"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        },
        _preload_content=False,
    )
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    assert core.read_namespaced_pod("trainer-0", k8s_namespace).spec.node_name == node_name

    k8s_control_plane.set_pod_status(k8s_namespace, "trainer-0", "Running")
    done = k8s_control_plane.set_pod_status(k8s_namespace, "trainer-0", "Succeeded", exit_code=0)
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"

    # Replaying the watch from the creation's resourceVersion sees every change, in order.
    seen: list[tuple[str, str | None, str]] = []
    stream = watch.Watch().stream(
        core.list_namespaced_pod,
        k8s_namespace,
        resource_version=created.metadata.resource_version,
        timeout_seconds=30,
    )
    for event in stream:
        pod = event["object"]
        seen.append((event["type"], pod.spec.node_name, pod.status.phase))
        if pod.status.phase == "Succeeded":
            break
    assert seen == [
        ("MODIFIED", node_name, "Pending"),
        ("MODIFIED", node_name, "Running"),
        ("MODIFIED", node_name, "Succeeded"),
    ]
    finished = core.read_namespaced_pod("trainer-0", k8s_namespace)
    assert finished.status.container_statuses[0].state.terminated.exit_code == 0
    assert _condition(finished.status.conditions, "Ready") == "False"


def test_failed_pod_carries_exit_code_and_reasons(
    k8s_control_plane: ControlPlane, k8s_namespace: str, node_name: str, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    k8s_control_plane.register_node(node_name, {"cpu": "8", "nvidia.com/gpu": 1}, labels=GPU_LABELS)
    core.create_namespaced_pod(k8s_namespace, _gpu_pod("worker-1", gpus=1, node=node_name))
    k8s_control_plane.set_pod_status(k8s_namespace, "worker-1", "Running")
    k8s_control_plane.set_pod_status(
        k8s_namespace, "worker-1", "Failed", exit_code=137, reason="OOMKilled", message="out of memory"
    )

    pod = core.read_namespaced_pod("worker-1", k8s_namespace)
    terminated = pod.status.container_statuses[0].state.terminated
    assert (pod.status.phase, terminated.exit_code, terminated.reason) == ("Failed", 137, "OOMKilled")
    assert pod.status.message == "out of memory"
    assert terminated.started_at <= terminated.finished_at


def test_node_readiness_toggles_condition_and_taints(
    k8s_control_plane: ControlPlane, node_name: str, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    gpu_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    k8s_control_plane.register_node(node_name, {"cpu": "8"}, taints=[gpu_taint], ready=False)

    def taints() -> set[tuple[str, str]]:
        return {(t.key, t.effect) for t in core.read_node(node_name).spec.taints or ()}

    not_ready = {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    }
    assert taints() == {("nvidia.com/gpu", "NoSchedule")} | not_ready
    assert _condition(core.read_node(node_name).status.conditions, "Ready") == "False"

    k8s_control_plane.set_node_ready(node_name, True)
    assert taints() == {("nvidia.com/gpu", "NoSchedule")}
    assert _condition(core.read_node(node_name).status.conditions, "Ready") == "True"

    k8s_control_plane.set_node_ready(node_name, False)
    assert taints() == {("nvidia.com/gpu", "NoSchedule")} | not_ready


def test_rbac_denies_muster_until_its_cluster_role_is_bound(
    k8s_control_plane: ControlPlane, k8s_namespace: str, admin: client.ApiClient
) -> None:
    rbac = client.RbacAuthorizationV1Api(admin)
    role_name = f"muster-scheduler-{k8s_namespace}"
    with k8s_control_plane.client(MUSTER) as api:
        as_muster = client.CoreV1Api(api)
        with pytest.raises(ApiException) as denied:
            as_muster.list_namespaced_pod(k8s_namespace)
        assert denied.value.status == 403

        rbac.create_cluster_role(
            {
                "metadata": {"name": role_name},
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
                ],
            }
        )
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role_name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role_name,
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MUSTER}],
            }
        )
        try:
            # The RBAC authorizer reads roles from an informer: allow a moment to see the binding.
            wait_for(lambda: as_muster.list_namespaced_pod(k8s_namespace), timeout=30, what="muster allowed")
            with pytest.raises(ApiException) as still_denied:
                as_muster.list_node()
            assert still_denied.value.status == 403
        finally:
            rbac.delete_cluster_role_binding(role_name)
            rbac.delete_cluster_role(role_name)


def test_lease_is_created_renewed_and_guarded_by_resource_version(
    k8s_namespace: str, admin: client.ApiClient
) -> None:
    leases = client.CoordinationV1Api(admin)
    created = leases.create_namespaced_lease(
        k8s_namespace,
        {
            "metadata": {"name": "muster-scheduler"},
            "spec": {
                "holderIdentity": "muster-a",
                "leaseDurationSeconds": 15,
                "acquireTime": _micro_time(),
                "renewTime": _micro_time(),
            },
        },
    )
    renewed_body = admin.sanitize_for_serialization(created)
    renewed_body["spec"]["renewTime"] = _micro_time()
    renewed = leases.replace_namespaced_lease("muster-scheduler", k8s_namespace, renewed_body)
    assert renewed.spec.holder_identity == "muster-a"
    assert renewed.metadata.resource_version != created.metadata.resource_version

    # A second candidate writing with the stale version loses: leader election relies on it.
    stale = admin.sanitize_for_serialization(created)
    stale["spec"]["holderIdentity"] = "muster-b"
    with pytest.raises(ApiException) as conflict:
        leases.replace_namespaced_lease("muster-scheduler", k8s_namespace, stale)
    assert conflict.value.status == 409
    assert leases.read_namespaced_lease("muster-scheduler", k8s_namespace).spec.holder_identity == "muster-a"


def test_hollow_node_kubelet_runs_a_bound_pod(
    k8s_control_plane: ControlPlane, k8s_namespace: str, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    name = f"hollow-{k8s_namespace}"
    with k8s_control_plane.hollow_node(name, labels=GPU_LABELS, capacity={"nvidia.com/gpu": 2}):
        assert core.read_node(name).status.allocatable["nvidia.com/gpu"] == "2"
        core.create_namespaced_pod(k8s_namespace, _gpu_pod("on-hollow", gpus=1, node=name))
        running = wait_for(
            lambda: core.read_namespaced_pod("on-hollow", k8s_namespace).status.phase == "Running",
            timeout=60,
            what="the hollow kubelet to run the pod",
        )
        assert running
        pod = core.read_namespaced_pod("on-hollow", k8s_namespace)
        assert pod.status.container_statuses[0].ready
    with pytest.raises(ApiException) as gone:
        core.read_node(name)
    assert gone.value.status == 404


def _gpu_pod(name: str, gpus: int, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "muster",
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sh", "-c", "true"],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _condition(conditions: list[Any] | None, kind: str) -> str | None:
    return next((c.status for c in conditions or () if c.type == kind), None)


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
