"""GPUSharing: which nodes offer each GPU as several time-sliced replicas (docs/scheduler.md,
"GPU sharing").

It is what the NVIDIA device plugin's time-slicing ConfigMap becomes
(:mod:`muster.api.compat.deviceplugin`): named configs, one chosen per node by the node's
``nvidia.com/device-plugin.config`` label (``default`` for nodes without it). A node whose
config has ``timeSlicing.replicas: N`` is labelled ``nvidia.com/gpu.replicas=N`` (as GPU
feature discovery labels it), and a pod asking for one ``nvidia.com/gpu`` there takes one of
the N replicas of a GPU: ``1000/N`` milli-GPU of one device, without isolation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from muster.api.base import MusterModel, Object
from muster.api.errors import FieldError, child_path
from muster.api.labels import DEVICE_PLUGIN_CONFIG_LABEL, GPU_REPLICAS_LABEL

__all__ = ["GPUSharing", "GPUSharingConfig", "GPUSharingSpec", "TimeSlicing", "gpu_replicas", "node_replicas"]

# A replica is charged in whole milli-GPU, so a GPU has at most 1000 of them.
MAX_REPLICAS = 1000


class TimeSlicing(MusterModel):
    replicas: int = Field(
        ge=1,
        le=MAX_REPLICAS,
        description="How many pods may share each GPU of the node: a pod asking for one nvidia.com/gpu "
        "takes 1/replicas of one GPU (1 means whole GPUs).",
    )


class GPUSharingConfig(MusterModel):
    time_slicing: TimeSlicing | None = Field(
        default=None, description="Time-slicing: each GPU offered as several replicas, without isolation."
    )


class GPUSharingSpec(MusterModel):
    node_label: str = Field(
        default=DEVICE_PLUGIN_CONFIG_LABEL,
        min_length=1,
        description="Node label whose value names the config a node uses (the device plugin's).",
    )
    default_config: str = Field(
        default="",
        description="The config of nodes without that label (empty: such nodes are not shared).",
    )
    configs: dict[str, GPUSharingConfig] = Field(
        min_length=1, description="Named configs, as the device plugin's ConfigMap keys name them."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        if self.default_config and self.default_config not in self.configs:
            return [
                FieldError(
                    child_path(path, "defaultConfig"),
                    f"names no config (configs: {', '.join(sorted(self.configs))})",
                    self.default_config,
                    "name one of the configs, or leave it empty",
                )
            ]
        return []


class GPUSharing(Object):
    """Time-slicing of the GPUs of the nodes it selects (the device plugin's sharing config)."""

    KIND: ClassVar[str] = "GPUSharing"
    kind: Literal["GPUSharing"] = Field(default="GPUSharing", description="Always GPUSharing.")
    spec: GPUSharingSpec = Field(description="Named sharing configs and how nodes choose one.")


def node_replicas(labels: Mapping[str, str], sharings: Iterable[Mapping[str, Any]]) -> tuple[int, str] | None:
    """The time-slicing replicas of a node with ``labels`` and the GPUSharing that sets them:
    the first GPUSharing (by name) with a config for the node, or None when none has one."""
    for sharing in sorted(sharings, key=lambda s: s["metadata"]["name"]):
        spec = sharing.get("spec") or {}
        chosen = labels.get(spec.get("nodeLabel") or DEVICE_PLUGIN_CONFIG_LABEL) or spec.get("defaultConfig")
        config = (spec.get("configs") or {}).get(chosen) if chosen else None
        if config is None:
            continue
        replicas = int((config.get("timeSlicing") or {}).get("replicas") or 1)
        return replicas, sharing["metadata"]["name"]
    return None


def gpu_replicas(node: Mapping[str, Any]) -> int:
    """The replicas each GPU of the Node (a wire dict) is offered as: 1 unless the node is
    labelled ``nvidia.com/gpu.replicas`` (by a GPUSharing, or by hand). A Kubernetes node's
    device plugin already offers each replica as one ``nvidia.com/gpu`` (one device each), so
    there the label (GPU feature discovery's) changes nothing."""
    if (node.get("status") or {}).get("runtime") == "kubernetes":
        return 1
    text = ((node.get("metadata") or {}).get("labels") or {}).get(GPU_REPLICAS_LABEL, "")
    return max(1, min(int(text), MAX_REPLICAS)) if text.isdigit() else 1
