"""KubeRay's RayCluster on a real kube-apiserver: the head and workers are Pods Muster binds to
the nodes its scheduler chose as one gang, each running ``ray start`` (the workers pointed at the
head through the gang's headless Service), and the cluster turns ready when the kubelet reports
every pod running; deleting the cluster deletes its pods (with their grace period)."""

from __future__ import annotations

import pytest

from muster.testing import wait_for
from muster.testing.kubernetes import NodeRegistry
from tests.e2e.test_kubernetes import Cluster, cluster, muster_user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]


def _ray_cluster(ns: str) -> dict:
    def container(name: str, gpus: str) -> dict:
        return {
            "name": name,
            "image": "rayproject/ray:2.60.0-gpu",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus}},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "rc", "namespace": ns},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {"num-gpus": "0"},
                "template": {"spec": {"containers": [container("ray-head", "0")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": 2,
                    "minReplicas": 2,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-worker", "1")]}},
                }
            ],
        },
    }


def _env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


def test_a_raycluster_is_one_bound_gang_of_ray_start_pods_and_turns_ready(
    cluster: Cluster,  # noqa: F811
    k8s_nodes: NodeRegistry,
) -> None:
    nodes = {k8s_nodes.add(gpus=1), k8s_nodes.add(gpus=1)}
    cluster.start()
    cluster.apply(_ray_cluster(cluster.ns))

    head = cluster.bound("rc-head")
    workers = [cluster.bound(f"rc-gpu-worker-{i}") for i in range(2)]
    assert {w["spec"]["nodeName"] for w in workers} == nodes  # one GPU each: one per node
    workload = head["metadata"]["labels"]["muster.dev/workload"]
    assert all(w["metadata"]["labels"]["muster.dev/workload"] == workload for w in workers)
    head_command = " ".join(
        head["spec"]["containers"][0]["command"] + head["spec"]["containers"][0].get("args", [])
    )
    assert head_command.startswith("ray start") and "--head" in head_command and "--block" in head_command
    address = _env(head)["RAY_ADDRESS"]
    assert address.startswith(f"rc-head.{workload}:")  # the head's name through the gang's Service
    for worker in workers:
        command = " ".join(
            worker["spec"]["containers"][0]["command"] + worker["spec"]["containers"][0].get("args", [])
        )
        assert (
            command.startswith("ray start") and f"--address={address}" in command and "--head" not in command
        )
        assert _env(worker)["RAY_ADDRESS"] == address
        assert worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert (head["spec"]["hostname"], head["spec"]["subdomain"]) == ("rc-head", workload)
    service = cluster.plane.core_api().read_namespaced_service(workload, cluster.ns)
    assert service.spec.cluster_ip == "None"

    for name in ("rc-head", "rc-gpu-worker-0", "rc-gpu-worker-1"):
        cluster.plane.set_pod_status(cluster.ns, name, "Running")

    def state() -> str | None:
        rc = cluster.get("RayCluster", "rc")
        return ((rc or {}).get("status") or {}).get("state")

    wait_for(lambda: state() == "ready", timeout=30, what="the RayCluster ready")
    rc = cluster.get("RayCluster", "rc")
    assert rc is not None and rc["status"]["headAddress"] == address

    cluster.store.delete("RayCluster", "rc", cluster.ns)

    def stopping() -> bool:  # deleted, or deleting with their grace (the kubelet ends them)
        pods = [cluster.k8s_pod(n) for n in ("rc-head", "rc-gpu-worker-0", "rc-gpu-worker-1")]
        return all(p is None or p["metadata"].get("deletionTimestamp") for p in pods)

    wait_for(stopping, timeout=30, what="the cluster's pods deleted")


def test_a_rayjob_submits_from_a_pod_once_its_cluster_is_ready_and_tears_it_down(
    cluster: Cluster,  # noqa: F811
    k8s_nodes: NodeRegistry,
) -> None:
    k8s_nodes.add(gpus=1)
    k8s_nodes.add(gpus=1)
    cluster.start()
    spec = _ray_cluster(cluster.ns)["spec"]
    cluster.apply(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "hello", "namespace": cluster.ns},
            "spec": {
                "entrypoint": "python train.py --epochs 1",
                "runtimeEnvYAML": "env_vars:\n  GREETING: bonjour\n",
                "shutdownAfterJobFinishes": True,
                "ttlSecondsAfterFinished": 0,
                "rayClusterSpec": spec,
            },
        }
    )
    names = ["hello-raycluster-head", "hello-raycluster-gpu-worker-0", "hello-raycluster-gpu-worker-1"]
    head = cluster.bound(names[0])
    for name in names[1:]:
        cluster.bound(name)
    for name in names:
        cluster.plane.set_pod_status(cluster.ns, name, "Running")

    def submitter() -> dict | None:
        pods = [p for p in cluster.k8s_pods() if p.startswith("hello-submitter-")]
        return cluster.bound(pods[0]) if pods else None

    pod = wait_for(submitter, timeout=30, what="the submitter pod")
    assert pod["spec"]["nodeName"] == head["spec"]["nodeName"]  # on the head's node
    container = pod["spec"]["containers"][0]
    assert container["image"] == "rayproject/ray:2.60.0-gpu"  # the head's image by default
    assert "python train.py --epochs 1" in " ".join(container["command"] + container.get("args", []))
    env = _env(pod)
    assert env["GREETING"] == "bonjour" and env["RAY_ADDRESS"] == _env(head)["RAY_ADDRESS"]

    cluster.plane.set_pod_status(cluster.ns, pod["metadata"]["name"], "Running")
    cluster.plane.set_pod_status(cluster.ns, pod["metadata"]["name"], "Succeeded", exit_code=0)

    def job_status() -> str | None:
        job = cluster.get("RayJob", "hello")
        return ((job or {}).get("status") or {}).get("jobStatus")

    wait_for(lambda: job_status() == "SUCCEEDED", timeout=30, what="the RayJob succeeded")
    wait_for(
        lambda: cluster.get("RayCluster", "hello-raycluster") is None, timeout=30, what="its cluster deleted"
    )
