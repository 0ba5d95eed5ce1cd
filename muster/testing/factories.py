"""Valid documents of common kinds, for tests (the smallest that pass validation)."""

from __future__ import annotations

from typing import Any

from muster.api.base import API_VERSION

__all__ = ["flavor", "local_queue", "training_job"]


def training_job(
    name: str,
    namespace: str = "default",
    workers: int = 1,
    labels: dict[str, str] | None = None,
    queue: str | None = None,
    command: list[str] | None = None,
    gpus: int = 0,
    restart_policy: str | None = None,
    image: str | None = "python:3.11",
) -> dict[str, Any]:
    """A TrainingJob with ``workers`` Worker replicas running ``command``, each asking for
    ``gpus`` GPUs (and 1m of CPU, so that CPU never limits how many run at once)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    container: dict[str, Any] = {"name": "main", "command": command or ["python", "-c", "print('hi')"]}
    if image:
        container["image"] = image
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "1m"}}
    replica: dict[str, Any] = {"replicas": workers, "template": {"spec": {"containers": [container]}}}
    if restart_policy:
        replica["restartPolicy"] = restart_policy
    spec: dict[str, Any] = {"replicaSpecs": {"Worker": replica}}
    if queue:
        spec["queueName"] = queue
    return {"apiVersion": API_VERSION, "kind": "TrainingJob", "metadata": meta, "spec": spec}


def flavor(name: str, node_labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec = {"nodeLabels": node_labels} if node_labels else {}
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cluster_queue: str = "default", namespace: str = "default") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": meta,
        "spec": {"clusterQueue": cluster_queue},
    }
