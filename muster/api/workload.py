"""Workload: the internal admission unit (DESIGN §4), one per job or workflow task.

A Workload asks for pod sets (a gang per set) in a queue at a priority. The scheduler admits
it when quota allows *and* every pod (at least ``minCount``) has a node and devices; the
decision lands in ``status.admission`` (flavors and one ``pods[]`` entry per admitted pod,
in pod index order). A waiting Workload carries ``status.pending`` with a stable reason code.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.checks import duplicate_errors
from muster.api.common import (
    GPU,
    Affinity,
    DNSLabel,
    Labels,
    ObjectName,
    ResourceList,
    Toleration,
    amount_errors,
)
from muster.api.errors import FieldError, child_path
from muster.api.quantity import Quantity
from muster.api.resources import check_gpu_quantity

__all__ = [
    "PENDING_REASONS",
    "WORKLOAD_CONDITIONS",
    "Admission",
    "PendingStatus",
    "PodPlacement",
    "PodSet",
    "PodSetAssignment",
    "RequeueState",
    "TopologyRequest",
    "Workload",
    "WorkloadSpec",
    "WorkloadStatus",
]

WORKLOAD_CONDITIONS = (
    "QuotaReserved",
    "Admitted",
    "Evicted",
    "Preempted",
    "Requeued",
    "Finished",
    "PodsReady",
)
# Stable reason codes of a pending workload (DESIGN §5, "Reasons").
PENDING_REASONS = (
    "QuotaExhausted",
    "ExceedsMaxQuota",
    "NoMatchingFlavor",
    "WaitingForPreemption",
    "InsufficientResources",
    "TopologyUnsatisfiable",
    "GangIncomplete",
    "StrictFIFOBlocked",
    "QueueStopped",
    "Inadmissible",
)


class TopologyRequest(MusterModel):
    required: str | None = Field(
        default=None, description="All pods in one domain of this level (node label)."
    )
    preferred: str | None = Field(
        default=None, description="Try one domain of this level, then widen level by level."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        if (self.required is None) == (self.preferred is None):
            return [FieldError(path, "must set exactly one of required and preferred")]
        return []


class PodSet(MusterModel):
    name: DNSLabel = Field(default="main", description="Pod set name, unique in the workload.")
    count: int = Field(ge=1, description="Number of pods.")
    min_count: int | None = Field(
        default=None, ge=1, description="Fewest pods to admit (partial admission); default all."
    )
    requests: ResourceList = Field(default_factory=dict, description="Requests of one pod.")
    gpu_models: list[str] = Field(default_factory=list, description="Allowed GPU models (default any).")
    node_selector: Labels = Field(default_factory=dict, description="Node labels the pods need.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints the pods tolerate.")
    affinity: Affinity | None = Field(default=None, description="Node affinity, as in a PodSpec.")
    topology_request: TopologyRequest | None = Field(default=None, description="Keep the gang in a domain.")
    pod_anti_affinity: bool = Field(default=False, description="At most one pod of this set per node.")

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.min_count is not None and self.min_count > self.count:
            errors.append(
                FieldError(child_path(path, "minCount"), f"must be <= count ({self.count})", self.min_count)
            )
        if GPU in self.requests:
            why = check_gpu_quantity(Quantity.parse(self.requests[GPU]))
            if why:
                errors.append(FieldError(child_path(path, "requests", GPU), why))
        return errors + amount_errors(self.requests, child_path(path, "requests"))


class ElasticSpec(MusterModel):
    grow_cooldown_seconds: int = Field(
        default=60,
        ge=0,
        description="Least seconds between its admission or last resize and growing again.",
    )


class WorkloadSpec(MusterModel):
    queue_name: ObjectName | None = Field(default=None, description="LocalQueue in the workload's namespace.")
    priority: int = Field(default=0, description="Priority value (from the PriorityClass).")
    priority_class_name: str | None = Field(default=None, description="PriorityClass it came from.")
    active: bool = Field(default=True, description="False: deactivated, never admitted.")
    preemptible: bool = Field(default=True, description="Whether the scheduler may preempt it.")
    pod_sets: list[PodSet] = Field(min_length=1, max_length=8, description="The gangs it asks for.")
    elastic: ElasticSpec | None = Field(
        default=None,
        description="Resized in place: grown toward each pod set's count when capacity returns, "
        "shrunk (down to minCount) when a node of it is lost (an elastic TrainingJob's Workload).",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        return duplicate_errors([p.name for p in self.pod_sets], child_path(path, "podSets"), "name")


class PodPlacement(MusterModel):
    node: str = Field(description="Node the pod is placed on.")
    gpus: list[int] = Field(default_factory=list, description="GPU device indices on that node.")
    gpu_milli: int | None = Field(
        default=None,
        ge=1,
        le=999,
        description="Share of its GPU in thousandths, for a shared pod (memory-sized shares differ by node).",
    )


class PodSetAssignment(MusterModel):
    name: str = Field(description="Pod set name.")
    count: int = Field(ge=0, description="Pods admitted (below spec count under partial admission).")
    flavors: dict[str, str] = Field(default_factory=dict, description="Resource -> flavor charged.")
    resource_usage: ResourceList = Field(default_factory=dict, description="Quota charged for the whole set.")
    pods: list[PodPlacement] = Field(
        default_factory=list, description="One entry per pod, in pod index order."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        return amount_errors(self.resource_usage, child_path(path, "resourceUsage"))


class Admission(MusterModel):
    cluster_queue: str = Field(description="ClusterQueue that admitted it.")
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list, description="Per pod set.")


class RequeueState(MusterModel):
    count: int = Field(default=0, ge=0, description="Times it was evicted and requeued.")
    requeue_at: str | None = Field(default=None, description="Not before this time (backoff).")


class PendingStatus(MusterModel):
    reason: str = Field(
        description="Stable code: QuotaExhausted, ExceedsMaxQuota, NoMatchingFlavor, WaitingForPreemption, "
        "InsufficientResources, TopologyUnsatisfiable, GangIncomplete, StrictFIFOBlocked, QueueStopped, "
        "Inadmissible."
    )
    message: str = Field(default="", description="The exact constraint, numbers, and what would unblock it.")
    details: dict[str, Any] = Field(default_factory=dict, description="Machine-readable blocking numbers.")


class ElasticStatus(MusterModel):
    resizes: int = Field(default=0, ge=0, description="Resizes so far (each size is a new run of its pods).")
    last_resize_time: str | None = Field(default=None, description="When the size last changed (UTC).")
    last_resize: dict[str, Any] | None = Field(
        default=None, description="The last resize: reason, message, from and to (counts per pod set)."
    )
    held: PendingStatus | None = Field(
        default=None, description="Why it is not larger now (absent at its full size)."
    )


class WorkloadStatus(MusterModel):
    conditions: list[Condition] = Field(
        default_factory=list,
        description="QuotaReserved, Admitted, Evicted, Preempted, Requeued, Finished, PodsReady.",
    )
    admission: Admission | None = Field(default=None, description="Where and on what it was admitted.")
    requeue_state: RequeueState | None = Field(default=None, description="Eviction backoff.")
    pending: PendingStatus | None = Field(default=None, description="Why it waits.")
    preempted_by: str | None = Field(default=None, description="namespace/name of the preemptor.")
    elastic: ElasticStatus | None = Field(default=None, description="Resizes of an elastic workload.")


class Workload(Object):
    """The unit the scheduler admits: pod sets, queue, priority."""

    KIND: ClassVar[str] = "Workload"
    kind: Literal["Workload"] = Field(default="Workload", description="Always Workload.")
    spec: WorkloadSpec = Field(description="Pod sets, queue and priority.")
    status: WorkloadStatus | None = Field(default=None, description="Admission, pending reason, conditions.")
