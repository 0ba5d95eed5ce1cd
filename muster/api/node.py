"""Node: a machine that runs pods, with its GPUs, capacity, taints and health.

Runtimes write ``status`` (capacity, GPU devices from NVML or ``--fake-gpus``, heartbeats);
users write ``spec`` (cordon with ``unschedulable``, taints), except on Kubernetes, where the
cluster's Node owns them. GPU feature discovery label
names are used for the model and memory: ``nvidia.com/gpu.product``, ``nvidia.com/gpu.memory``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.checks import duplicate_errors
from muster.api.common import NonNegativeQuantity, ResourceList, Taint, amount_errors
from muster.api.errors import FieldError, child_path

__all__ = [
    "GPU_MEMORY_LABEL",
    "GPU_PRODUCT_LABEL",
    "GPUDevice",
    "MIGDevice",
    "Node",
    "NodeAddress",
    "NodeSpec",
    "NodeStatus",
]

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"


class NodeSpec(MusterModel):
    unschedulable: bool = Field(default=False, description="Cordon: no new pods are placed here.")
    taints: list[Taint] = Field(default_factory=list, description="Pods must tolerate these to run here.")


class MIGDevice(MusterModel):
    profile: str = Field(description="MIG profile, e.g. 1g.10gb.")
    uuid: str = Field(default="", description="MIG device UUID (MIG-...).")


class GPUDevice(MusterModel):
    index: int = Field(ge=0, description="Device index, as CUDA_VISIBLE_DEVICES counts it.")
    uuid: str = Field(default="", description="GPU UUID (GPU-...); empty for fake GPUs.")
    model: str = Field(default="", description="Product name, e.g. NVIDIA A100-SXM4-80GB.")
    memory: NonNegativeQuantity = Field(default="0", description="Total device memory, e.g. 80Gi.")
    mig_mode: bool = Field(default=False, description="Whether MIG is enabled on this GPU.")
    mig_devices: list[MIGDevice] = Field(default_factory=list, description="MIG slices configured.")
    nvlink_peers: list[int] = Field(default_factory=list, description="Indices of GPUs linked by NVLink.")
    domain: str = Field(default="", description="NVLink/PCIe topology domain id: GPUs sharing it are close.")
    health: Literal["Healthy", "Unhealthy"] = Field(default="Healthy", description="Healthy or Unhealthy.")
    health_reason: str = Field(default="", description="Why the GPU is unhealthy (e.g. XID 79).")


class NodeAddress(MusterModel):
    type: str = Field(description="Hostname, InternalIP or ExternalIP.")
    address: str = Field(description="The address.")


class NodeStatus(MusterModel):
    capacity: ResourceList = Field(default_factory=dict, description="Total resources of the machine.")
    allocatable: ResourceList = Field(
        default_factory=dict, description="Resources available to pods (capacity minus reserved)."
    )
    gpus: list[GPUDevice] = Field(default_factory=list, description="GPU devices, by index.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready and GPUHealthy.")
    last_heartbeat_time: str | None = Field(default=None, description="When the runtime last reported.")
    runtime: Literal["local", "ray", "kubernetes", "sim"] | None = Field(
        default=None, description="The runtime that owns this node."
    )
    addresses: list[NodeAddress] = Field(default_factory=list, description="How to reach the node.")
    used_by_others: ResourceList = Field(
        default_factory=dict,
        description="Resources held by pods Muster did not create (on Kubernetes: kube-scheduler's "
        "pods, daemonsets), with their count under pods; Muster never places onto them.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        indices = [gpu.index for gpu in self.gpus]
        errors = duplicate_errors(indices, child_path(path, "gpus"), "index", "duplicate GPU index")
        lists = (("capacity", self.capacity), ("allocatable", self.allocatable))
        for key, amounts in (*lists, ("usedByOthers", self.used_by_others)):
            errors += amount_errors(amounts, child_path(path, key))
        return errors


class Node(Object):
    """A machine: capacity, GPUs, labels, taints, health."""

    KIND: ClassVar[str] = "Node"
    kind: Literal["Node"] = Field(default="Node", description="Always Node.")
    spec: NodeSpec = Field(default_factory=NodeSpec, description="What users set: cordon and taints.")
    status: NodeStatus | None = Field(default=None, description="What the runtime reports.")
