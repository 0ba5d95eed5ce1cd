"""Pod: one process group (its containers) bound to a node and GPU devices.

Controllers create pods from templates, bound by the scheduler's decision (``nodeName``,
``gpus``); runtimes report ``status``. A failed pod carries a classified ``reason``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.common import NonNegativeQuantity
from muster.api.podspec import PodSpec

__all__ = ["POD_REASONS", "BoundPodSpec", "ContainerStatus", "Pod", "PodStatus"]

# Classified reasons of a finished (or finishing) pod; stable API.
POD_REASONS = (
    "Completed",
    "Error",
    "OOMKilled",
    "Preempted",
    "Evicted",
    "DeadlineExceeded",
    "NodeLost",
    "GPUUnhealthy",
)


class BoundPodSpec(PodSpec):
    """A pod's spec: a PodSpec plus the devices the scheduler bound it to."""

    gpus: list[int] = Field(default_factory=list, description="GPU device indices bound on the node.")
    gpu_milli: int | None = Field(
        default=None, ge=1, le=999, description="The pod's share of its GPU in thousandths, when shared."
    )
    gpu_memory: NonNegativeQuantity | None = Field(
        default=None, description="GPU memory reserved on its GPU, for a memory-sized share."
    )


class ContainerStatus(MusterModel):
    name: str = Field(description="Container name.")
    state: Literal["Waiting", "Running", "Terminated"] = Field(
        default="Waiting", description="Waiting, Running or Terminated."
    )
    exit_code: int | None = Field(
        default=None, description="Exit status once terminated (128+N for signal N)."
    )
    signal: int | None = Field(default=None, description="Signal that ended the process, if any.")
    reason: str | None = Field(default=None, description="Why it is waiting or terminated.")
    restart_count: int = Field(default=0, ge=0, description="Restarts in place.")
    started_at: str | None = Field(default=None, description="When it started (UTC).")
    finished_at: str | None = Field(default=None, description="When it ended (UTC).")


class PodStatus(MusterModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed"] = Field(
        default="Pending", description="Pending, Running, Succeeded or Failed."
    )
    reason: str | None = Field(
        default=None,
        description="Classified reason: Completed, Error, OOMKilled, Preempted, Evicted, DeadlineExceeded, "
        "NodeLost or GPUUnhealthy.",
    )
    message: str = Field(default="", description="Human-readable detail (e.g. exit code and last log line).")
    conditions: list[Condition] = Field(default_factory=list, description="Pod conditions.")
    start_time: str | None = Field(default=None, description="When the runtime started the pod (UTC).")
    finish_time: str | None = Field(default=None, description="When the pod ended (UTC).")
    container_statuses: list[ContainerStatus] = Field(default_factory=list, description="Per container.")
    init_container_statuses: list[ContainerStatus] = Field(
        default_factory=list, description="Per init container."
    )
    host_ip: str | None = Field(default=None, alias="hostIP", description="Address of its node.")
    pod_ip: str | None = Field(
        default=None,
        alias="podIP",
        description="Its own address (Kubernetes), or its node's where pods share the host's network.",
    )
    handle: dict[str, Any] = Field(
        default_factory=dict,
        description="Runtime handle (e.g. pid and pgid) so a restarted server re-adopts the pod.",
    )


class Pod(Object):
    """One process group bound to a node and devices."""

    KIND: ClassVar[str] = "Pod"
    kind: Literal["Pod"] = Field(default="Pod", description="Always Pod.")
    spec: BoundPodSpec = Field(description="Containers, volumes and the node and GPUs bound.")
    status: PodStatus | None = Field(default=None, description="Phase, reason, container states.")
