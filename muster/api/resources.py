"""What a pod asks for: effective requests (as kube-scheduler computes them) and GPU demand.

GPU demand (CONTRIBUTING, "GPU demand"): ``nvidia.com/gpu: N`` asks for N whole GPUs;
``nvidia.com/gpu: 500m`` asks for a 500-milli share of one GPU (counted as 0.5 against
quota); ``muster.dev/gpu-memory: 20Gi`` asks for a share of one GPU sized by its memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from muster.api.common import GPU, GPU_MEMORY
from muster.api.quantity import Quantity

if TYPE_CHECKING:
    from muster.api.podspec import Container, PodSpec, PodTemplateSpec

__all__ = ["GPUDemand", "check_gpu_quantity", "container_requests", "gpu_demand", "pod_requests"]


@dataclass(frozen=True)
class GPUDemand:
    """One pod's GPU demand.

    ``devices`` GPUs are needed; each is taken whole (``milli == 1000``) or shared
    (``milli < 1000``, or ``memory`` bytes of one GPU's memory when sized by memory).
    """

    devices: int
    milli: int
    memory: int

    @property
    def shared(self) -> bool:
        return self.devices == 1 and (self.milli < 1000 or self.memory > 0)


def pod_requests(pod: PodSpec | PodTemplateSpec) -> dict[str, Quantity]:
    """The requests a pod holds on its node, as kube-scheduler computes them.

    The sum over containers (plus sidecars: init containers with ``restartPolicy: Always``),
    or, when larger, what any init container needs while it runs (its own requests plus the
    sidecars started before it).
    """
    spec = pod.spec if hasattr(pod, "spec") else pod
    total = _sum(container_requests(c) for c in spec.containers)
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for init in spec.init_containers:
        requests = container_requests(init)
        if init.restart_policy == "Always":
            sidecars = _sum([sidecars, requests])
        else:
            init_peak = _max(init_peak, _sum([sidecars, requests]))
    return _max(_sum([total, sidecars]), init_peak)


def container_requests(container: Container) -> dict[str, Quantity]:
    """A container's requests, with limits standing in for missing requests (as Kubernetes
    defaults them)."""
    res = container.resources
    merged = {**res.limits, **res.requests}
    return {name: Quantity.parse(value) for name, value in merged.items()}


def gpu_demand(requests: Mapping[str, Quantity | str]) -> GPUDemand:
    """The GPU demand of one pod's (effective) requests; ``GPUDemand(0, 0, 0)`` when none."""
    memory = Quantity.parse(requests[GPU_MEMORY]).as_int() if GPU_MEMORY in requests else 0
    if GPU not in requests:
        return GPUDemand(1, 1000, memory) if memory else GPUDemand(0, 0, 0)
    milli = Quantity.parse(requests[GPU]).milli()
    if milli < 1000:
        return GPUDemand(1 if milli else 0, milli, memory)
    return GPUDemand(milli // 1000, 1000, memory)


def check_gpu_quantity(value: Quantity) -> str | None:
    """Why ``value`` is not a valid nvidia.com/gpu amount, or None: whole GPUs, or one share
    below 1."""
    milli = value.milli()
    if milli < 1000 or milli % 1000 == 0:
        return None
    return (
        f"must be a whole number of GPUs or a share of one GPU below 1 (e.g. 500m = half a GPU), "
        f"got {str(value)!r}"
    )


def _sum(lists: Iterable[Mapping[str, Quantity]]) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for resources in lists:
        for name, value in resources.items():
            out[name] = out[name] + value if name in out else value
    return out


def _max(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> dict[str, Quantity]:
    out = dict(a)
    for name, value in b.items():
        if name not in out or value > out[name]:
            out[name] = value
    return out
