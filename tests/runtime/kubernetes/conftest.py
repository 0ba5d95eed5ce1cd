"""Helpers for the Kubernetes runtime's tests: Muster pods and gangs built the way the
controllers and the executor build them (the API server and ``k8s_nodes`` are tests/conftest.py's)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from muster.controllers.pods.launch import device_binding, pod_launch
from muster.runtime.base import GangLaunch, GangMember


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
