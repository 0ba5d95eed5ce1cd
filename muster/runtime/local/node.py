"""The Node of this machine: CPUs, memory, GPUs, labels and health, as the local runtime offers it.

Capacity counts every CPU, all memory and every whole GPU. Allocatable leaves out what is
reserved for the system (``reserved``, e.g. ``{"cpu": "1", "memory": "2Gi"}``) and unhealthy
GPUs. GPUs in MIG mode are offered as their slices, one resource per profile
(``nvidia.com/mig-1g.10gb``, the device plugin's "mixed" strategy), not as whole GPUs.

Labels: ``kubernetes.io/hostname``, ``kubernetes.io/os``, ``kubernetes.io/arch``, and, as
NVIDIA GPU feature discovery writes them, ``nvidia.com/gpu.product`` (the model with spaces
as dashes), ``nvidia.com/gpu.memory`` (MiB) and ``nvidia.com/gpu.count``, from GPU 0 when
models are mixed. Fake GPUs add ``muster.dev/fake-gpus=true``.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

import psutil

from muster.api.quantity import Format, Quantity, parse_quantity
from muster.runtime.base import (
    GPU_COUNT_LABEL,
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    GpuDevice,
    NodeCondition,
    NodeInfo,
)
from muster.runtime.local.gpus import GpuSource

__all__ = ["FAKE_GPUS_LABEL", "apply_health", "local_node", "node_name"]

FAKE_GPUS_LABEL = "muster.dev/fake-gpus"
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}


def node_name() -> str:
    """This machine's hostname as a DNS-1123 subdomain (lower case, other characters as '-')."""
    name = re.sub(r"[^a-z0-9.-]+", "-", socket.gethostname().lower()).strip("-.")
    return name[:253] or "localhost"


def apply_health(devices: list[GpuDevice], overrides: Mapping[int, tuple[bool, str]]) -> list[GpuDevice]:
    """Devices with injected health (index -> (healthy, reason)) laid over what the source says."""
    out = []
    for d in devices:
        if d.index in overrides:
            healthy, reason = overrides[d.index]
            d = replace(
                d, health="Healthy" if healthy else "Unhealthy", health_reason="" if healthy else reason
            )
        out.append(d)
    return out


def local_node(
    gpus: GpuSource,
    *,
    name: str | None = None,
    reserved: Mapping[str, str] | None = None,
    health: Mapping[int, tuple[bool, str]] | None = None,
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    labels: Mapping[str, str] | None = None,
) -> NodeInfo:
    """Describe this machine now (CPU count, total memory, GPU devices and their health).

    A virtual node the runtime hosts (:mod:`muster.runtime.local.virtual`) gives its own
    ``cpu``, ``memory`` and extra ``labels`` instead of this machine's."""
    devices = apply_health(gpus.devices(), health or {})
    capacity: dict[str, Quantity] = {
        "cpu": cpu if cpu is not None else Quantity(_usable_cpus()),
        "memory": memory if memory is not None else Quantity(psutil.virtual_memory().total, Format.BINARY_SI),
    }
    allocatable = dict(capacity)
    whole = [d for d in devices if not d.mig_mode]
    if whole:
        capacity[GPU_RESOURCE] = Quantity(len(whole))
        allocatable[GPU_RESOURCE] = Quantity(sum(d.health == "Healthy" for d in whole))
    for profile, (total, usable) in _mig_counts(devices).items():
        capacity[f"nvidia.com/mig-{profile}"] = Quantity(total)
        allocatable[f"nvidia.com/mig-{profile}"] = Quantity(usable)
    for key, value in (reserved or {}).items():
        if key in allocatable:
            allocatable[key] = max(Quantity(0), allocatable[key] - parse_quantity(value))
    return NodeInfo(
        name=name or node_name(),
        capacity={k: str(v) for k, v in capacity.items()},
        allocatable={k: str(v) for k, v in allocatable.items()},
        labels={**(labels or {}), **_labels(name or node_name(), devices, gpus.kind)},
        gpus=tuple(devices),
        conditions=(
            NodeCondition("Ready", "True", "LocalRuntimeReady", "the local runtime is running pods"),
            _gpu_condition(devices, gpus.warnings),
        ),
        runtime="local",
        warnings=tuple(gpus.warnings),
    )


def _usable_cpus() -> int:
    # The CPUs this process may run on (a container or taskset may allow fewer than exist).
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return psutil.cpu_count(logical=True) or os.cpu_count() or 1


def _labels(name: str, devices: list[GpuDevice], kind: str) -> dict[str, str]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": platform.system().lower(),
        "kubernetes.io/arch": _ARCH.get(platform.machine(), platform.machine().lower()),
    }
    if devices:
        first = devices[0]
        labels[GPU_PRODUCT_LABEL] = (
            re.sub(r"[^A-Za-z0-9._-]+", "-", first.model.strip()).strip("-.") or "unknown"
        )
        labels[GPU_MEMORY_LABEL] = str(first.memory_bytes // (1024 * 1024))
        labels[GPU_COUNT_LABEL] = str(len(devices))
    if kind == "fake":
        labels[FAKE_GPUS_LABEL] = "true"
    return labels


def _mig_counts(devices: list[GpuDevice]) -> dict[str, tuple[int, int]]:
    total: Counter[str] = Counter()
    usable: Counter[str] = Counter()
    for d in devices:
        for m in d.mig_devices:
            total[m.profile] += 1
            usable[m.profile] += d.health == "Healthy"
    return {p: (total[p], usable[p]) for p in sorted(total)}


def _gpu_condition(devices: list[GpuDevice], warnings: tuple[str, ...]) -> NodeCondition:
    if not devices:
        return NodeCondition(
            "GPUHealthy", "Unknown", "NoGPUs", "; ".join(warnings) or "this node has no GPUs"
        )
    bad = [d for d in devices if d.health != "Healthy"]
    if not bad:
        return NodeCondition("GPUHealthy", "True", "AllHealthy", f"{len(devices)} GPU(s) healthy")
    detail = ", ".join(f"GPU {d.index}: {d.health_reason or 'unhealthy'}" for d in bad)
    return NodeCondition("GPUHealthy", "False", "GPUUnhealthy", detail)
