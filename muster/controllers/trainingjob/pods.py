"""What a TrainingJob turns into: its Workload (one gang of a pod set per replica type) and,
once admitted, its pods with the environment contract of DESIGN §7.

Environment of every container of a PyTorch job (torchrun-compatible, as the Training
Operator sets it; TensorFlow's and MPI's are in frameworks.py, with the same ``MUSTER_*``):

=======================  ==========================================================
``PYTHONUNBUFFERED``     ``1``
``MASTER_ADDR``          the address of the master's node (127.0.0.1 locally); the master
                         is Master-0, or Worker-0 when the job has no Master
``MASTER_PORT``          a free port chosen for the job, stable while it runs
``WORLD_SIZE``           admitted pods x ``nprocPerNode`` when that is a number, else pods
``RANK``                 Master 0, Worker i -> i + 1 (i without a Master)
``PET_MASTER_ADDR/PORT`` as ``MASTER_ADDR``/``MASTER_PORT``
``PET_NNODES``           admitted pods (with elasticPolicy too: the count admitted)
``PET_NODE_RANK``        as ``RANK``
``PET_NPROC_PER_NODE``   ``nprocPerNode`` (``auto`` unless set)
``MUSTER_JOB_NAME``, ``MUSTER_NAMESPACE``, ``MUSTER_REPLICA_TYPE`` (Master/Worker),
``MUSTER_REPLICA_INDEX``, ``MUSTER_RESTART_COUNT`` (gang restarts so far),
``MUSTER_CHECKPOINT_DIR`` (``$MUSTER_HOME/checkpoints/<namespace>/<job>``, the same for
every run of the job: restarts and preemptions resume from it)
=======================  ==========================================================

With ``elasticPolicy`` also ``PET_RDZV_BACKEND``, ``PET_RDZV_ENDPOINT``, ``PET_RDZV_ID`` and
``PET_MAX_RESTARTS``. ``CUDA_VISIBLE_DEVICES`` is the runtime's: the bound GPUs. A variable
of the template with one of these names is replaced (the contract wins).
"""

from __future__ import annotations

import copy
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.api.labels import (
    ATTEMPT_LABEL,
    JOB_NAME_LABEL,
    MASTER_PORT_ANNOTATION,
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    WORKLOAD_LABEL,
    pod_name,
)
from muster.api.podspec import PodTemplateSpec
from muster.api.resources import pod_requests
from muster.api.trainingjob import REPLICA_TYPES, SINGLE_REPLICA_TYPES
from muster.controllers.trainingjob.frameworks import framework, mpi_hosts, mpi_launcher_env, tf_config
from muster.store.codec import dumps

__all__ = [
    "DEFAULT_GROW_COOLDOWN",
    "REPLICA_TYPES",
    "GangShape",
    "bound_pod_spec",
    "build_pod",
    "checkpoint_dir",
    "latest_checkpoint",
    "owner_reference",
    "pick_port",
    "pod_set_of",
    "port_free",
    "template_requests",
    "training_env",
    "workload_for",
    "workload_object",
]

Obj = dict[str, Any]
DEFAULT_GROW_COOLDOWN = 60  # seconds: elasticPolicy.growCooldownSeconds unset
_REQUESTS_KEPT = 256
# template_requests' results by what they depend on (a cache of a pure function, bounded)
_REQUESTS: dict[str, dict[str, str]] = {}


def owner_reference(job: Obj) -> Obj:
    return {
        "apiVersion": job.get("apiVersion") or API_VERSION,
        "kind": job["kind"],
        "name": job["metadata"]["name"],
        "uid": job["metadata"]["uid"],
        "controller": True,
    }


def checkpoint_dir(home: Path, job: Obj) -> Path:
    meta = job["metadata"]
    return home / "checkpoints" / (meta.get("namespace") or "default") / meta["name"]


def latest_checkpoint(directory: Path) -> str | None:
    """The newest checkpoint in a job's checkpoint directory: the most recently modified file
    below it (relative path), skipping hidden files and ``*.tmp`` (writes in progress); None
    when there is none. This is what "a checkpoint was found on resume" means (docs/trainingjob.md)."""
    newest: tuple[float, str] | None = None
    if not directory.is_dir():
        return None
    for path in directory.rglob("*"):
        rel = path.relative_to(directory)
        if any(part.startswith(".") for part in rel.parts) or path.name.endswith(".tmp"):
            continue
        try:
            if not path.is_file():
                continue
            mtime = path.stat().st_mtime
        except OSError:  # removed meanwhile (the job prunes old checkpoints)
            continue
        if newest is None or (mtime, str(rel)) > newest:
            newest = (mtime, str(rel))
    return newest[1] if newest else None


def workload_for(
    job: Obj, *, queue: str | None, priority: int, priority_class: str | None, master_port: int
) -> Obj:
    """The Workload of ``job``: a pod set per replica type (``master``, ``worker``, ``ps``...);
    with elasticPolicy the Worker set asks for maxReplicas and accepts minReplicas."""
    spec = job["spec"]
    meta = job["metadata"]
    pod_sets = []
    for rtype in REPLICA_TYPES:
        replica = spec["replicaSpecs"].get(rtype)
        if replica is None:
            continue
        count, min_count = _counts(spec, rtype, int(replica.get("replicas", 1)))
        pod_sets.append(pod_set_of(rtype.lower(), replica["template"], count, min_count))
    elastic = spec.get("elasticPolicy")
    wl_elastic: Obj | None = None
    if elastic is not None:
        # resized in place (docs/trainingjob.md, "Elastic jobs"): grown back toward maxReplicas,
        # shrunk on node loss
        cooldown = elastic.get("growCooldownSeconds")
        wl_elastic = {"growCooldownSeconds": DEFAULT_GROW_COOLDOWN if cooldown is None else cooldown}
    return workload_object(
        job,
        labels={JOB_NAME_LABEL: meta["name"]},
        annotations={MASTER_PORT_ANNOTATION: str(master_port)},
        pod_sets=pod_sets,
        priority=priority,
        active=not (spec.get("runPolicy") or {}).get("suspend", False),
        queue=queue,
        priority_class=priority_class,
        elastic=wl_elastic,
    )


def workload_object(
    owner: Obj,
    *,
    labels: dict[str, str],
    annotations: dict[str, str],
    pod_sets: list[Obj],
    priority: int,
    active: bool,
    queue: str | None,
    priority_class: str | None,
    elastic: Obj | None = None,
) -> Obj:
    """The Workload (same name and namespace) that ``owner`` submits to its queue; ``elastic``
    is its ``spec.elastic`` (a job resized in place)."""
    meta = owner["metadata"]
    wl_spec: Obj = {"priority": priority, "active": active, "podSets": pod_sets}
    if elastic is not None:
        wl_spec["elastic"] = elastic
    if queue:
        wl_spec["queueName"] = queue
    if priority_class:
        wl_spec["priorityClassName"] = priority_class
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": wl_spec,
    }


def pod_set_of(name: str, template: Obj, count: int, min_count: int | None = None) -> Obj:
    """A Workload pod set of ``count`` pods of ``template``: their requests and the placement
    rules the scheduler reads (node selector, tolerations, node affinity)."""
    tspec = template.get("spec") or {}
    pod_set: Obj = {
        "name": name,
        "count": count,
        "requests": template_requests(template),
    }
    if min_count is not None and min_count < count:
        pod_set["minCount"] = min_count
    if tspec.get("nodeSelector"):
        pod_set["nodeSelector"] = dict(tspec["nodeSelector"])
    if tspec.get("tolerations"):
        pod_set["tolerations"] = copy.deepcopy(tspec["tolerations"])
    node_affinity = (tspec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity:
        pod_set["affinity"] = {"nodeAffinity": copy.deepcopy(node_affinity)}
    return pod_set


def template_requests(template: Obj) -> dict[str, str]:
    """The effective requests of a pod ``template`` (:func:`muster.api.resources.pod_requests`),
    as strings. They depend only on its containers' and init containers' ``resources`` (and the
    init containers' ``restartPolicy``), which most templates share with many others (the jobs
    of a burst or a sweep), and validating a whole template to read them was about 6% of the
    manager's CPU per job (in process): so they are computed once per distinct such parts,
    for the last :data:`_REQUESTS_KEPT` of them."""
    spec = template.get("spec") or {}
    key = dumps(
        [
            [c.get("resources") for c in spec.get("containers") or ()],
            [[c.get("resources"), c.get("restartPolicy")] for c in spec.get("initContainers") or ()],
        ]
    )
    found = _REQUESTS.get(key)
    if found is None:
        requests = pod_requests(PodTemplateSpec.model_validate(template))
        found = _REQUESTS[key] = {name: str(q) for name, q in requests.items()}
        if len(_REQUESTS) > _REQUESTS_KEPT:
            del _REQUESTS[next(iter(_REQUESTS))]  # the oldest computed
    return dict(found)


def _counts(spec: Obj, rtype: str, replicas: int) -> tuple[int, int | None]:
    if rtype in SINGLE_REPLICA_TYPES:
        return 1, None
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        # Training Operator defaulting: one bound copies the other; neither means replicas.
        low = elastic.get("minReplicas") or elastic.get("maxReplicas") or replicas
        high = elastic.get("maxReplicas") or elastic.get("minReplicas") or replicas
        return high, low
    min_available = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("minAvailable")
    if min_available is not None and rtype == "Worker":
        others = sum(
            int(r.get("replicas", 1) or 1) for t, r in spec["replicaSpecs"].items() if t != "Worker" and r
        )
        return replicas, max(1, min(replicas, int(min_available) - others))
    return replicas, None


@dataclass(frozen=True)
class GangShape:
    """The admitted gang: pods per replica type, and where the master runs; for TensorFlow and
    MPI also where every replica runs (host and port by replica type, in index order)."""

    masters: int
    workers: int
    master_addr: str
    master_port: int
    hosts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ports: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def pods(self) -> int:
        return self.masters + self.workers

    def rank(self, rtype: str, index: int) -> int:
        return index if rtype == "Master" else index + self.masters


def training_env(
    job: Obj,
    shape: GangShape,
    rtype: str,
    index: int,
    restart_count: int,
    checkpoints: Path,
    hostfile: Path | None = None,
) -> dict[str, str]:
    """The environment contract (module docstring, frameworks.py) for pod ``index`` of
    ``rtype``; ``hostfile`` is where an MPI job's Launcher finds its hostfile."""
    spec = job["spec"]
    kind = framework(job)
    if kind == "TensorFlow":
        addresses = {
            rt: [f"{host}:{port}" for host, port in zip(hosts, shape.ports.get(rt, ()), strict=False)]
            for rt, hosts in shape.hosts.items()
        }
        env = {"PYTHONUNBUFFERED": "1", "TF_CONFIG": tf_config(addresses, rtype, index)}
    elif kind == "MPI":
        env = {"PYTHONUNBUFFERED": "1"}
        if rtype == "Launcher" and hostfile is not None:
            slots = int(spec.get("slotsPerWorker") or 1)
            env.update(mpi_launcher_env(hostfile, mpi_hosts(shape.hosts.get("Worker", ()), slots)))
    else:
        env = _torch_env(spec, shape, rtype, index)
    meta = job["metadata"]
    env.update(
        MUSTER_JOB_NAME=meta["name"],
        MUSTER_NAMESPACE=meta.get("namespace") or "default",
        MUSTER_REPLICA_TYPE=rtype,
        MUSTER_REPLICA_INDEX=str(index),
        MUSTER_RESTART_COUNT=str(restart_count),
        MUSTER_CHECKPOINT_DIR=str(checkpoints),
    )
    return env


def _torch_env(spec: Obj, shape: GangShape, rtype: str, index: int) -> dict[str, str]:
    nproc = str(spec.get("nprocPerNode") or "auto")
    per_pod = int(nproc) if nproc.isdigit() else 1
    rank = str(shape.rank(rtype, index))
    addr, port = shape.master_addr, str(shape.master_port)
    env = {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": addr,
        "MASTER_PORT": port,
        "WORLD_SIZE": str(shape.pods * per_pod),
        "RANK": rank,
        "PET_MASTER_ADDR": addr,
        "PET_MASTER_PORT": port,
        "PET_NNODES": str(shape.pods),
        "PET_NODE_RANK": rank,
        "PET_NPROC_PER_NODE": nproc,
    }
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        env["PET_RDZV_BACKEND"] = elastic.get("rdzvBackend") or "c10d"
        host = elastic.get("rdzvHost") or addr
        env["PET_RDZV_ENDPOINT"] = f"{host}:{elastic.get('rdzvPort') or port}"
        if elastic.get("rdzvId"):
            env["PET_RDZV_ID"] = str(elastic["rdzvId"])
        if elastic.get("maxRestarts") is not None:
            env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
    return env


def build_pod(job: Obj, rtype: str, index: int, placement: Obj, attempt: str, env: dict[str, str]) -> Obj:
    """Pod ``index`` of ``rtype``, bound to ``placement`` (node, GPUs, share) at creation."""
    meta = job["metadata"]
    template = job["spec"]["replicaSpecs"][rtype]["template"]
    tmeta = template.get("metadata") or {}
    # the replica's restartPolicy decides, for the whole gang
    spec = bound_pod_spec(template, placement, env)
    labels = {
        **(tmeta.get("labels") or {}),
        JOB_NAME_LABEL: meta["name"],
        REPLICA_TYPE_LABEL: rtype.lower(),
        REPLICA_INDEX_LABEL: str(index),
        WORKLOAD_LABEL: meta["name"],
        ATTEMPT_LABEL: attempt,
    }
    pod_meta: Obj = {
        "name": pod_name(meta["name"], rtype, index),
        "namespace": meta.get("namespace") or "default",
        "labels": labels,
        "ownerReferences": [owner_reference(job)],
    }
    if tmeta.get("annotations"):
        pod_meta["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": API_VERSION, "kind": "Pod", "metadata": pod_meta, "spec": spec}


def bound_pod_spec(template: Obj, placement: Obj, env: dict[str, str]) -> Obj:
    """The spec of a pod of ``template`` bound to ``placement`` (node, GPUs, share), with
    ``env`` set in every container (replacing the template's variables of those names). The
    template's restartPolicy goes: the owner decides what a failure means."""
    spec = copy.deepcopy(template["spec"])
    spec.pop("restartPolicy", None)
    spec["nodeName"] = placement["node"]
    spec["gpus"] = list(placement.get("gpus") or [])
    if placement.get("gpuMilli"):
        spec["gpuMilli"] = placement["gpuMilli"]
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            own = [e for e in container.get("env") or [] if e["name"] not in env]
            container["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
    return spec


def pick_port() -> int:
    """A TCP port free on this machine a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now (with SO_REUSEADDR, as torch's store does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            return False
        return True
