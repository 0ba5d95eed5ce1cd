"""Ray's node table as Muster's nodes: names, resources, GPUs, labels, addresses, deaths.

Every node in Ray's table is a Muster node (the head too: it may take CPU-only pods; GPU pods
go where the GPUs are):

* **name**: the node's Ray label ``muster.dev/node-name`` when it has one (``ray start
  --labels "muster.dev/node-name=gpu-a"``), else ``<hostname>-<first 8 hex digits of
  the Ray node id>``, lower case, as a DNS-1123 subdomain. The id part keeps two Ray nodes on
  one host (a local test cluster, two raylets in one pod) apart, and a node that restarts with
  a new id is a new Muster node;
* **capacity** and **allocatable**: ``cpu`` from Ray's ``CPU``, ``memory`` from ``memory``
  (what Ray lets tasks reserve), ``nvidia.com/gpu`` from ``GPU`` (whole GPUs);
* **GPUs**: indices ``0..GPU-1``, the model from the ``accelerator_type:<X>`` resource (or the
  label ``ray.io/accelerator-type``), the memory from the label ``muster.dev/gpu-memory``
  (a quantity, e.g. ``80Gi``) when given (Ray does not report it);
* **labels**: ``kubernetes.io/hostname`` (the name), ``ray.io/node-id``, every label of the
  Ray node, and GPU feature discovery's ``nvidia.com/gpu.product|count|memory``;
* **address**: the node's IP in Ray (``NodeManagerAddress``), where its pods reach each
  other (``MASTER_ADDR``);
* **Ready**: True while Ray says the node is alive; a dead node stays listed, NotReady with
  reason ``NodeLost`` and Ray's death message, and offers nothing (allocatable zero) until
  Ray forgets it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from muster.api.quantity import Quantity, QuantityError
from muster.runtime.base import (
    GPU_COUNT_LABEL,
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GpuDevice,
    NodeCondition,
    NodeInfo,
)

__all__ = ["NAME_LABEL", "NODE_ID_LABEL", "NodeTable", "RayNode", "node_info", "node_name"]

NAME_LABEL = "muster.dev/node-name"
GPU_MEMORY_RAY_LABEL = "muster.dev/gpu-memory"
NODE_ID_LABEL = "ray.io/node-id"
ACCELERATOR_LABEL = "ray.io/accelerator-type"
_ACCELERATOR_RESOURCE = "accelerator_type:"
_DNS = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True)
class RayNode:
    """One row of Ray's node table, as Muster uses it."""

    id: str
    name: str
    address: str
    alive: bool
    resources: Mapping[str, float]
    labels: Mapping[str, str]
    death: str = ""

    @property
    def gpus(self) -> int:
        return int(self.resources.get("GPU", 0))


def node_name(row: Mapping[str, Any]) -> str:
    """The Muster name of a row of ``ray.nodes()`` (see the module docstring)."""
    labels = row.get("Labels") or {}
    named = labels.get(NAME_LABEL)
    raw = named or f"{row.get('NodeManagerHostname') or 'ray'}-{str(row['NodeID'])[:8]}"
    name = _DNS.sub("-", str(raw).lower()).strip("-.")
    return name[:253] or str(row["NodeID"])[:16]


def _row(row: Mapping[str, Any]) -> RayNode:
    alive = bool(row.get("Alive", row.get("alive")))
    death = str(row.get("DeathReasonMessage") or "") if not alive else ""
    return RayNode(
        id=str(row["NodeID"]),
        name=node_name(row),
        address=str(row.get("NodeManagerAddress") or "127.0.0.1"),
        alive=alive,
        resources=dict(row.get("Resources") or {}),
        labels={str(k): str(v) for k, v in (row.get("Labels") or {}).items()},
        death=death,
    )


def node_info(node: RayNode) -> NodeInfo:
    """The :class:`NodeInfo` of a Ray node (see the module docstring)."""
    res = node.resources
    model = next(
        (k[len(_ACCELERATOR_RESOURCE) :] for k in res if k.startswith(_ACCELERATOR_RESOURCE)),
        node.labels.get(ACCELERATOR_LABEL, "RAY-GPU" if node.gpus else ""),
    )
    gpu_memory = _quantity(node.labels.get(GPU_MEMORY_RAY_LABEL))
    gpus = tuple(
        GpuDevice(
            index=i,
            uuid=f"ray-{node.id[:16]}-gpu-{i}",
            model=model,
            memory_bytes=gpu_memory,
            domain=f"ray-{node.id[:8]}",
        )
        for i in range(node.gpus)
    )
    capacity = {
        "cpu": _amount(res.get("CPU", 0.0)),
        "memory": str(int(res.get("memory", 0.0))),
        GPU_RESOURCE: str(node.gpus),
    }
    allocatable = capacity if node.alive else {k: "0" for k in capacity}
    labels = {
        **{k: v for k, v in node.labels.items() if _label_key(k)},
        "kubernetes.io/hostname": node.name,
        NODE_ID_LABEL: node.id,
    }
    if node.gpus:
        labels[GPU_PRODUCT_LABEL] = model.replace(" ", "-")
        labels[GPU_COUNT_LABEL] = str(node.gpus)
        if gpu_memory:
            labels[GPU_MEMORY_LABEL] = str(gpu_memory >> 20)
    if node.alive:
        ready = NodeCondition("Ready", "True", "RayNodeAlive", f"Ray node {node.id[:8]} is alive")
    else:
        why = f": {node.death}" if node.death else ""
        ready = NodeCondition("Ready", "False", "NodeLost", f"Ray reports node {node.id[:8]} dead{why}")
    return NodeInfo(
        name=node.name,
        capacity=capacity,
        allocatable=allocatable,
        labels=labels,
        gpus=gpus,
        conditions=(ready,),
        runtime="ray",
        address=node.address,
    )


class NodeTable:
    """Ray's node table, read at most every ``interval`` seconds (``read`` is ``ray.nodes``)."""

    def __init__(self, read: Callable[[], Iterable[Mapping[str, Any]]], interval: float = 1.0) -> None:
        self._read = read
        self.interval = interval
        self._at = float("-inf")
        self.by_name: dict[str, RayNode] = {}
        self.by_id: dict[str, RayNode] = {}

    def refresh(self, force: bool = False) -> bool:
        """Read the table again when it is due (or ``force``); True when it was read."""
        now = time.monotonic()
        if not force and now - self._at < self.interval:
            return False
        rows = [_row(r) for r in self._read()]
        # A name two live rows share (two raylets labelled alike) goes to the live one.
        rows.sort(key=lambda n: n.alive)
        self.by_name = {n.name: n for n in rows}
        self.by_id = {n.id: n for n in rows}
        self._at = now
        return True

    def nodes(self) -> list[RayNode]:
        return sorted(self.by_name.values(), key=lambda n: n.name)


def _amount(value: float) -> str:
    """A Ray resource amount as a quantity: whole numbers as such, fractions in milli."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def _quantity(text: str | None) -> int:
    if not text:
        return 0
    try:
        return Quantity.parse(text).as_int()
    except QuantityError:
        return 0


def _label_key(key: str) -> bool:
    """Ray labels that are valid Kubernetes label keys (Ray's own are; a stray one is left out)."""
    return (
        bool(re.fullmatch(r"([a-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?", key)) and len(key) < 317
    )
