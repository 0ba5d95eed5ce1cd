"""Fixtures for the Kubernetes runtime's tests: the session's real API server, nodes a test
registers (deleted after it), and gangs built the way the executor builds them."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from muster.controllers.launch import device_binding, pod_launch
from muster.runtime.base import GangLaunch, GangMember
from muster.testing.kubernetes import ControlPlane


class Nodes:
    """Registers nodes with unique names on the session's plane; deletes them afterwards."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.names: list[str] = []

    def add(
        self,
        stem: str = "gpu",
        gpus: int = 4,
        labels: Mapping[str, str] | None = None,
        **capacity: str | int,
    ) -> str:
        name = f"{stem}-{secrets.token_hex(3)}"
        resources: dict[str, str | int] = {"cpu": "32", "memory": "256Gi", **capacity}
        if gpus:
            resources["nvidia.com/gpu"] = gpus
        gfd = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}
        self.plane.register_node(name, resources, labels={**(gfd if gpus else {}), **(labels or {})})
        self.names.append(name)
        return name

    def delete_all(self) -> None:
        from kubernetes.client.exceptions import ApiException

        core = self.plane.core_api()
        for name in self.names:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def k8s_nodes(k8s_control_plane: ControlPlane) -> Iterator[Nodes]:
    nodes = Nodes(k8s_control_plane)
    yield nodes
    nodes.delete_all()


def muster_pod(
    namespace: str,
    name: str,
    node: str,
    *,
    workload: str = "job",
    gpus: int = 0,
    grace: int | None = None,
    env: Mapping[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A bound Muster Pod wire dict, as the TrainingJob controller writes it."""
    container: dict[str, Any] = {
        "name": "main",
        "image": "python:3.11",
        "command": ["python", "train.py"],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    if gpus:
        container["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "nodeName": node,
        "gpus": list(range(gpus)),
        **spec,
    }
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": secrets.token_hex(8),
            "labels": {
                "muster.dev/job-name": workload,
                "muster.dev/replica-type": name.rsplit("-", 2)[-2],
                "muster.dev/replica-index": name.rsplit("-", 1)[-1],
                "muster.dev/workload": workload,
            },
        },
        "spec": pod_spec,
    }


def gang(namespace: str, workload: str, pods: list[dict[str, Any]], timeout: float = 30.0) -> GangLaunch:
    """The executor's GangLaunch of these bound pods."""
    return GangLaunch(
        namespace=namespace,
        workload=workload,
        uid=secrets.token_hex(8),
        members=tuple(
            GangMember(pod_launch(p, "", native=True), device_binding(p), p["spec"]["nodeName"]) for p in pods
        ),
        timeout_seconds=timeout,
    )
