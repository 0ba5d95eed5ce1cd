"""What a RayCluster turns into: its Workload (one gang: a ``head`` pod set and one per worker
group) and, once admitted, its pods, whose first container runs ``ray start``.

``ray start`` is built from the group's ``rayStartParams`` (``--key=value``; ``"true"`` of a
flag is the bare flag), as KubeRay builds it:

* head: ``--head --port=<GCS port> --dashboard-host=127.0.0.1 --dashboard-port=<port> --block``;
  the ports are the cluster's, chosen free when its Workload is created unless
  ``rayStartParams`` names them;
* workers: ``--address=<head address>:<GCS port> --block``;
* both: ``--num-cpus``/``--num-gpus``/``--memory`` from the container's limits (else requests)
  unless given, so Ray schedules within what the queues admitted.

Every container gets ``RAY_ADDRESS`` (the head's GCS address), ``RAY_CLUSTER_NAME``,
``RAY_DASHBOARD_URL`` and a token shared by the cluster's processes (``RAY_AUTH_MODE=token``,
``RAY_AUTH_TOKEN``), so that nothing else on a shared machine can join or drive it.
"""

from __future__ import annotations

import copy
import math
import shlex
import sys
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.api.labels import (
    ATTEMPT_LABEL,
    GPU,
    RAY_CLUSTER_LABEL,
    RAY_DASHBOARD_PORT_ANNOTATION,
    RAY_GCS_PORT_ANNOTATION,
    RAY_GROUP_LABEL,
    RAY_NODE_TYPE_LABEL,
    WORKLOAD_LABEL,
)
from muster.api.quantity import Quantity, QuantityError
from muster.api.ray import worker_count
from muster.controllers.trainingjob.pods import (
    bound_pod_spec,
    owner_reference,
    pick_port,
    pod_set_of,
    workload_object,
)

__all__ = [
    "AUTH_TOKEN_ANNOTATION",
    "HEAD",
    "ClusterPorts",
    "admitted_count",
    "cluster_env",
    "cluster_ports",
    "cluster_workload",
    "head_pod_name",
    "local_ray",
    "ray_pod",
    "ray_start_command",
    "submitter_command",
    "worker_pod_name",
]

Obj = dict[str, Any]
HEAD = "head"
AUTH_TOKEN_ANNOTATION = "muster.dev/ray-auth-token"
# rayStartParams whose "true" means the bare flag (KubeRay's list, and Ray's own flags).
_FLAGS = frozenset({"block", "head", "disable-usage-stats", "no-monitor", "verbose", "log-color"})
# Set by Muster on every `ray start`; the user's value of these is replaced.
_OWN = frozenset({"block", "head", "address", "port", "dashboard-port"})
_DRAIN = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
# The submitter's first step: wait until the head answers and every node of the cluster has
# joined (KubeRay waits for every pod's readiness probe), then the entrypoint runs.
_WAIT_FOR_NODES = """import os, time, ray
ray.init(logging_level="ERROR", log_to_driver=False)
end = time.monotonic() + 300
while len([n for n in ray.nodes() if n["Alive"]]) < int(os.environ["MUSTER_RAY_NODES"]):
    if time.monotonic() > end:
        raise SystemExit("not every node of the cluster joined within 300 s")
    time.sleep(0.2)
"""


class ClusterPorts:
    """The cluster's GCS and dashboard ports (from its Workload's annotations)."""

    def __init__(self, gcs: int, dashboard: int) -> None:
        self.gcs, self.dashboard = gcs, dashboard


def cluster_ports(spec: Obj) -> ClusterPorts:
    """Ports for a new cluster: rayStartParams' port / dashboard-port, else free ones."""
    params = spec["headGroupSpec"].get("rayStartParams") or {}
    gcs = int(params["port"]) if str(params.get("port", "")).isdigit() else pick_port()
    dash = params.get("dashboard-port")
    return ClusterPorts(gcs, int(dash) if str(dash or "").isdigit() else pick_port())


def cluster_workload(
    cluster: Obj,
    *,
    queue: str | None,
    priority: int,
    priority_class: str | None,
    ports: ClusterPorts,
    token: str,
) -> Obj:
    """The Workload of ``cluster``: pod set ``head`` (1 pod) and one per worker group."""
    spec = cluster["spec"]
    meta = cluster["metadata"]
    pod_sets = [pod_set_of(HEAD, spec["headGroupSpec"]["template"], 1)]
    for group in spec.get("workerGroupSpecs") or []:
        count = admitted_count(group)
        if count:
            pod_sets.append(pod_set_of(group["groupName"], group["template"], count))
    return workload_object(
        cluster,
        labels={RAY_CLUSTER_LABEL: meta["name"]},
        annotations={
            RAY_GCS_PORT_ANNOTATION: str(ports.gcs),
            RAY_DASHBOARD_PORT_ANNOTATION: str(ports.dashboard),
            AUTH_TOKEN_ANNOTATION: token,
        },
        pod_sets=pod_sets,
        priority=priority,
        active=not spec.get("suspend", False),
        queue=queue,
        priority_class=priority_class,
    )


def admitted_count(group: Obj) -> int:
    """Pods of a stored worker group admitted."""
    return worker_count(group.get("replicas"), group.get("minReplicas"), group.get("maxReplicas"))


def ray_start_command(
    ray: str,
    params: Obj,
    *,
    head: bool,
    head_address: str,
    ports: ClusterPorts,
    container: Obj,
    temp_dir: str,
) -> list[str]:
    """``ray start`` for a head or a worker (see the module docstring)."""
    if head:
        args = [
            "--head",
            f"--port={ports.gcs}",
            f"--dashboard-port={ports.dashboard}",
        ]
        args.append(f"--dashboard-host={params.get('dashboard-host') or '127.0.0.1'}")
        if temp_dir and "temp-dir" not in params:
            args.append(f"--temp-dir={temp_dir}")
    else:
        args = [f"--address={head_address}:{ports.gcs}"]
    for key, value in sorted(_resources(container).items()):
        if key not in params:
            args.append(f"--{key}={value}")
    if "disable-usage-stats" not in params:
        args.append("--disable-usage-stats")
    for key, value in sorted(params.items()):
        if key in _OWN or (head and key == "dashboard-host") or (not head and key == "temp-dir"):
            continue
        if key in _FLAGS and str(value).lower() in ("true", ""):
            args.append(f"--{key}")
        elif not (key in _FLAGS and str(value).lower() == "false"):
            args.append(f"--{key}={value}")
    return [ray, "start", *args, "--block"]


def _resources(container: Obj) -> dict[str, str]:
    """num-cpus, num-gpus and memory from a container's limits (else requests)."""
    resources = container.get("resources") or {}
    amounts = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    out: dict[str, str] = {}
    try:
        if "cpu" in amounts:
            out["num-cpus"] = str(max(1, math.ceil(Quantity.parse(amounts["cpu"]).value)))
        if GPU in amounts:
            out["num-gpus"] = str(math.floor(Quantity.parse(amounts[GPU]).value))
        if "memory" in amounts:
            out["memory"] = str(int(Quantity.parse(amounts["memory"]).value))
    except (QuantityError, ValueError):
        pass  # the template's own validation has said so
    return out


def cluster_env(name: str, head_address: str, ports: ClusterPorts, token: str) -> dict[str, str]:
    """The environment every process of the cluster (and a driver of it) gets."""
    return {
        "RAY_ADDRESS": f"{head_address}:{ports.gcs}",
        "RAY_CLUSTER_NAME": name,
        "RAY_DASHBOARD_URL": f"http://{head_address}:{ports.dashboard}",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "PYTHONUNBUFFERED": "1",
    }


def ray_pod(
    cluster: Obj,
    group: Obj | None,
    index: int,
    placement: Obj,
    attempt: str,
    command: list[str],
    env: dict[str, str],
) -> Obj:
    """The head pod (``group`` None) or pod ``index`` of a worker group, bound to ``placement``;
    its first container runs ``command``."""
    meta = cluster["metadata"]
    spec = cluster["spec"]
    template = copy.deepcopy(group["template"] if group else spec["headGroupSpec"]["template"])
    containers = template["spec"]["containers"]
    containers[0]["command"] = command
    containers[0].pop("args", None)
    if not any(e.get("name") == _DRAIN for e in containers[0].get("env") or []):
        # Muster stops a cluster's pods together: a node draining its work to the others
        # (Ray's SIGTERM default, 30 s) only delays the end.
        env = {**env, _DRAIN: "0"}
    tmeta = template.get("metadata") or {}
    name = (
        head_pod_name(meta["name"])
        if group is None
        else worker_pod_name(meta["name"], group["groupName"], index)
    )
    labels = {
        **(tmeta.get("labels") or {}),
        RAY_CLUSTER_LABEL: meta["name"],
        RAY_NODE_TYPE_LABEL: "head" if group is None else "worker",
        RAY_GROUP_LABEL: "headgroup" if group is None else group["groupName"],
        WORKLOAD_LABEL: meta["name"],
        ATTEMPT_LABEL: attempt,
    }
    pod_meta: Obj = {
        "name": name,
        "namespace": meta.get("namespace") or "default",
        "labels": labels,
        "ownerReferences": [owner_reference(cluster)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {
        "apiVersion": API_VERSION,
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": bound_pod_spec(template, placement, env),
    }


def submitter_command(python: str, entrypoint: str) -> list[str]:
    """The submitter's command: wait for the cluster's nodes (``MUSTER_RAY_NODES``), then run
    ``entrypoint`` with the job's config (``RAY_JOB_CONFIG_JSON_ENV_VAR``) as its driver."""
    wait = f"env -u RAY_JOB_CONFIG_JSON_ENV_VAR {shlex.quote(python)} -c {shlex.quote(_WAIT_FOR_NODES)}"
    return ["/bin/sh", "-c", f"until {wait}; do sleep 1; done\n{entrypoint}"]


def head_pod_name(cluster: str) -> str:
    return f"{cluster}-head"


def worker_pod_name(cluster: str, group: str, index: int) -> str:
    return f"{cluster}-{group}-worker-{index}"


def local_ray() -> str:
    """The ``ray`` program of the server's own environment (the ``ray`` extra), else ``ray``."""
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else "ray"
