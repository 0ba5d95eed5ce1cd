"""Serving on a real kube-apiserver: an InferenceService's replica is a Pod Muster binds to the
node its scheduler chose, listening on the predictor's port on all addresses, and the routes the
gateway gets point at the Pod's IP as the kubelet reports it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from muster.gateway.table import ReplicaLoad, RevisionLoad, Route
from muster.testing import wait_for
from muster.testing.kubernetes import NodeRegistry
from tests.e2e.test_kubernetes import Cluster, cluster, muster_user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]


class Routes:
    """Records what the controller hands the gateway."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def apply(self, routes: Sequence[Route]) -> None:
        self.routes = list(routes)

    def load(self, namespace: str, name: str) -> dict[str, RevisionLoad]:
        return {}

    def replica_load(self, namespace: str, name: str) -> dict[str, ReplicaLoad]:
        return {}

    def drained(self, namespace: str, name: str, replica: str) -> bool:
        return True


def test_a_replica_is_a_bound_pod_and_the_gateway_routes_to_its_ip(
    cluster: Cluster,  # noqa: F811
    k8s_nodes: NodeRegistry,
) -> None:
    node = k8s_nodes.add(gpus=1)
    server = cluster.start()
    routes = Routes()
    server.manager.serving.attach(routes, "http://gateway.example:7071")
    cluster.apply(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "InferenceService",
            "metadata": {"name": "llm", "namespace": cluster.ns},
            "spec": {
                "minReplicas": 1,
                "maxReplicas": 1,
                "queueName": "default",
                "predictor": {
                    "port": 8000,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:latest",
                            "args": ["--port", "$(PORT)", "--host", "$(HOST)"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        }
    )
    pod = cluster.bound("llm-00001-0")
    assert pod["spec"]["nodeName"] == node
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert (env["PORT"], env["HOST"]) == ("8000", "0.0.0.0")  # its own address: the predictor's port
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    running = cluster.plane.set_pod_status(cluster.ns, "llm-00001-0", "Running")
    ip = running["status"]["podIP"]

    def backend() -> tuple[str, int] | None:
        for route in routes.routes:
            for b in route.backends:
                return b.host, b.port
        return None

    assert wait_for(backend, timeout=30, what="a route to the replica") == (ip, 8000)
    muster_pod = cluster.get("Pod", "llm-00001-0")
    assert muster_pod is not None and muster_pod["status"]["podIP"] == ip
