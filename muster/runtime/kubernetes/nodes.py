"""A cluster's Nodes as :class:`NodeInfo`, and what pods Muster did not create hold on them.

* Resources: the Node's ``status.capacity`` and ``status.allocatable`` as they are (cpu,
  memory, ``nvidia.com/gpu``, ``nvidia.com/mig-*`` slices, any extended resource).
* GPUs: one device per ``nvidia.com/gpu`` of capacity; those beyond allocatable are
  Unhealthy (the device plugin withdraws a failed GPU from allocatable). Model and memory come
  from GPU feature discovery's labels ``nvidia.com/gpu.product`` and ``nvidia.com/gpu.memory``
  (MiB). Indices are Muster's bookkeeping only: the node's device plugin picks the devices.
* Ready: the Node's Ready condition (Unknown counts as not ready); taints and cordon
  (``spec.unschedulable``) belong to the cluster.
* Used by others: the requests of every pod bound to the node that Muster did not create and
  that has not ended (kube-scheduler's pods, daemonsets, static pods), the way kube-scheduler
  counts them: per resource the larger of the containers' sum and the largest init container,
  plus the pod's overhead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from muster.api.quantity import Format, Quantity, QuantityError
from muster.runtime.base import (
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GpuDevice,
    NodeCondition,
    NodeInfo,
    NodeTaint,
)

__all__ = ["is_ready", "node_info", "pod_requests", "sum_requests"]

Obj = dict[str, Any]
_MIB = 1 << 20
_CONDITION_STATUS = ("True", "False", "Unknown")
_BINARY = ("memory", "ephemeral-storage")


def node_info(node: Obj, used_by_others: Mapping[str, Quantity] | None = None) -> NodeInfo:
    """The :class:`NodeInfo` of a Node wire dict, charged with what others use on it."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    labels = dict(meta.get("labels") or {})
    capacity = dict(status.get("capacity") or {})
    allocatable = dict(status.get("allocatable") or capacity)
    warnings: list[str] = []
    gpus = _gpus(labels, capacity, allocatable, warnings)
    ready = _ready(status)
    return NodeInfo(
        name=meta["name"],
        capacity=capacity,
        allocatable=allocatable,
        labels=labels,
        gpus=gpus,
        conditions=(ready,),
        runtime="kubernetes",
        warnings=tuple(warnings),
        address=_address(meta["name"], status),
        used_by_others={r: _format(r, q) for r, q in (used_by_others or {}).items() if not q.is_zero()},
        taints=tuple(
            NodeTaint(t["key"], t.get("value") or "", t.get("effect") or "NoSchedule")
            for t in spec.get("taints") or ()
        ),
        unschedulable=bool(spec.get("unschedulable")),
    )


def is_ready(node: Obj) -> bool:
    return _ready(node.get("status") or {}).status == "True"


def pod_requests(pod: Obj) -> dict[str, Quantity]:
    """What a pod holds on its node, as kube-scheduler counts it; pods count 1 under ``pods``."""
    spec = pod.get("spec") or {}
    total = sum_requests(_requests(c) for c in spec.get("containers") or ())
    for init in spec.get("initContainers") or ():
        for resource, amount in _requests(init).items():
            if amount > total.get(resource, Quantity(0)):
                total[resource] = amount
    for resource, amount in (spec.get("overhead") or {}).items():
        total[resource] = total.get(resource, Quantity(0)) + _parse(amount)
    total["pods"] = Quantity(1)
    return total


def sum_requests(items: Iterable[Mapping[str, Quantity]]) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for requests in items:
        for resource, amount in requests.items():
            total[resource] = total.get(resource, Quantity(0)) + amount
    return total


# -- helpers ------------------------------------------------------------------------------------


def _gpus(
    labels: Mapping[str, str],
    capacity: Mapping[str, str],
    allocatable: Mapping[str, str],
    warnings: list[str],
) -> tuple[GpuDevice, ...]:
    count = _parse(capacity.get(GPU_RESOURCE, "0")).as_int()
    usable = _parse(allocatable.get(GPU_RESOURCE, "0")).as_int()
    if not count:
        return ()
    model = labels.get(GPU_PRODUCT_LABEL, "")
    memory = labels.get(GPU_MEMORY_LABEL, "")
    memory_bytes = int(memory) * _MIB if memory.isdigit() else 0
    if not model or not memory_bytes:
        warnings.append(
            f"no GPU feature discovery labels ({GPU_PRODUCT_LABEL}, {GPU_MEMORY_LABEL}): jobs that ask "
            "for a GPU model or GPU memory cannot be placed here; deploy GPU feature discovery "
            "(part of the NVIDIA GPU Operator)"
        )
    return tuple(
        GpuDevice(
            index=i,
            uuid="",
            model=model,
            memory_bytes=memory_bytes,
            health="Healthy" if i < usable else "Unhealthy",
            health_reason="" if i < usable else "not allocatable: the device plugin withdrew it",
        )
        for i in range(count)
    )


def _ready(status: Obj) -> NodeCondition:
    for c in status.get("conditions") or ():
        if c.get("type") == "Ready":
            value = c.get("status") if c.get("status") in _CONDITION_STATUS else "Unknown"
            return NodeCondition("Ready", value, c.get("reason") or "", c.get("message") or "")
    return NodeCondition("Ready", "Unknown", "NoReadyCondition", "the node reports no Ready condition")


def _address(name: str, status: Obj) -> str:
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or ()}
    return addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname") or name


def _requests(container: Obj) -> dict[str, Quantity]:
    resources = container.get("resources") or {}
    # The API server defaults requests to limits, so stored pods have both; a pod read any other
    # way may carry limits only.
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {r: _parse(q) for r, q in amounts.items()}


def _parse(value: Any) -> Quantity:
    try:
        return Quantity.parse(value)
    except QuantityError:
        return Quantity(0)


def _format(resource: str, amount: Quantity) -> str:
    if resource in _BINARY:
        return str(Quantity(amount.value, Format.BINARY_SI))
    return str(amount)
