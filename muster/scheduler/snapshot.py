"""The scheduler's input: plain dataclasses, built once per cycle by a driver.

A driver (the control plane, the scenario replayer, the trace simulator) describes the
cluster as it is *now* and calls :func:`muster.scheduler.schedule`. Nothing here does I/O
or reads a clock; times are plain floats on any axis where larger is later.

Units (the contract every driver keeps): resource amounts are integers, converted once at
the boundary with :func:`to_units` -- thousandths for ``cpu`` and ``nvidia.com/gpu``
(milli-CPU, milli-GPU), whole units (bytes, counts) for everything else. GPUs are not a
generic node resource: a node lists its devices (:attr:`Node.gpus`, :attr:`Node.gpu_free`)
and a pod set asks for ``gpus`` devices with ``gpu_milli`` of each. Quota charges
``nvidia.com/gpu`` as ``gpus * gpu_milli`` per pod, so a 250-milli share counts 0.25 GPU.

Usage is derived, never trusted twice: a cluster queue's usage is the sum of its admitted
workloads (plus :attr:`ClusterQueue.usage` for usage the driver tracks itself), and a
node's ``used`` and ``gpu_free`` already include every pod running there (admitted
workloads' pods too; their :attr:`AdmittedPodSet.pods` tell preemption what a victim
would free).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# The units are muster.api's, whose validation bounds every quantity to what they can hold.
from muster.api.quantity import format_units, to_units

if TYPE_CHECKING:
    from muster.scheduler.nodes import NodeTable

__all__ = [
    "CPU",
    "GPU",
    "GPU_MILLI",
    "MEMORY",
    "AdmittedPodSet",
    "AdmittedWorkload",
    "ClusterQueue",
    "Cohort",
    "Flavor",
    "FlavorQuotas",
    "NamespaceQuota",
    "Node",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PendingWorkload",
    "PodBinding",
    "PodSet",
    "PreemptionConfig",
    "ResourceGroup",
    "ResourceQuota",
    "Snapshot",
    "SnapshotError",
    "Taint",
    "Toleration",
    "format_units",
    "to_units",
]

CPU = "cpu"
MEMORY = "memory"
GPU = "nvidia.com/gpu"
GPU_MILLI = 1000  # one whole GPU in milli-GPU


class SnapshotError(ValueError):
    """The snapshot contradicts itself (an unknown flavor or cohort, a cohort cycle)."""


def _quota_requests(requests: dict[str, int], gpus: int, gpu_milli: int) -> dict[str, int]:
    if not gpus:
        return requests
    out = dict(requests)
    out[GPU] = gpus * gpu_milli
    return out


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; ``effect`` is NoSchedule, PreferNoSchedule or NoExecute."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration with Kubernetes semantics (empty key + Exists tolerates everything;
    an empty effect matches every effect)."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One expression of a required node-affinity term (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None and self.values:
            try:
                left, right = int(value), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions that must all hold; a pod set's terms are alternatives (any may hold)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.match_expressions)


@dataclass(slots=True)
class Node:
    """A machine as it is now.

    ``allocatable`` and ``used`` hold every resource but GPUs, in units (see module doc);
    ``used`` includes all pods on the node. GPUs are ``gpus`` devices with indices
    ``0..gpus-1``; ``gpu_free`` gives each device's free milli-GPU (empty: all free) and
    ``gpu_healthy`` its health (empty: all healthy; an unhealthy device is never used).
    A node that is not ``ready`` or is ``unschedulable`` gets no new pods.
    """

    name: str
    allocatable: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpus: int = 0
    gpu_model: str = ""
    gpu_memory: int = 0  # bytes per device
    # Time-slicing: each device is offered as this many replicas; a pod asking for one whole
    # GPU takes GPU_MILLI // gpu_replicas of one device, and no pod asking for more lands here.
    gpu_replicas: int = 1
    gpu_free: tuple[int, ...] = ()
    gpu_healthy: tuple[bool, ...] = ()
    ready: bool = True
    unschedulable: bool = False


@dataclass(slots=True)
class Flavor:
    """A ResourceFlavor: pods admitted on it go only to nodes carrying ``node_labels``, must
    tolerate ``node_taints`` (its own ``tolerations`` are added to the pods), and may ask
    for topology by the label keys in ``topology_levels`` (top level first)."""

    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_levels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one resource in one flavor. ``None`` limits mean unlimited (Kueue semantics:
    borrowingLimit caps use above nominal; lendingLimit caps what is lent to the cohort)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(slots=True)
class FlavorQuotas:
    """One flavor of a resource group and its quota per covered resource."""

    name: str
    resources: dict[str, ResourceQuota] = field(default_factory=dict)


@dataclass(slots=True)
class ResourceGroup:
    """Resources that are assigned one flavor together, and their flavors in preference order."""

    covered_resources: tuple[str, ...]
    flavors: list[FlavorQuotas] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PreemptionConfig:
    """Kueue's ClusterQueue preemption policy.

    ``within_cluster_queue``: Never | LowerPriority | LowerOrNewerEqualPriority;
    ``reclaim_within_cohort``: Never | LowerPriority | Any;
    ``borrow_within_cohort``: Never | LowerPriority, with ``max_priority_threshold``.
    """

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"
    borrow_within_cohort: str = "Never"
    max_priority_threshold: int | None = None


@dataclass(slots=True)
class ClusterQueue:
    """A ClusterQueue. ``usage`` is quota in use by workloads *not* listed in
    :attr:`Snapshot.admitted` (``(flavor, resource) -> units``); admitted workloads add to it.

    Flavor fungibility (Kueue's ``flavorFungibility``): ``when_can_borrow`` MayStopSearch
    takes the first flavor that fits even by borrowing, TryNextFlavor keeps looking for one
    that fits without; ``when_can_preempt`` TryNextFlavor prefers a later flavor that fits
    over preempting in an earlier one, MayStopSearch stops at the first that could preempt.
    A flavor whose quota fits but whose nodes cannot take the gang is always skipped.
    """

    name: str
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    cohort: str | None = None
    queueing_strategy: str = "BestEffortFIFO"  # or StrictFIFO
    preemption: PreemptionConfig = field(default_factory=PreemptionConfig)
    fair_weight: float = 1.0
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    stopped: bool = False
    usage: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(slots=True)
class Cohort:
    """A cohort of the tree. Its ``resource_groups`` add a shared pool on top of its
    children's quota (with borrowing/lending limits towards ``parent``)."""

    name: str
    parent: str | None = None
    resource_groups: list[ResourceGroup] = field(default_factory=list)
    fair_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class NamespaceQuota:
    """A namespace's ResourceQuota: the most the admitted workloads of ``namespace`` may hold
    together, on top of their cluster queues' quota. ``hard`` maps ``"pods"`` (a pod count) and
    resource names (in units, ``nvidia.com/gpu`` in milli-GPU as quota charges it) to limits;
    ``keys`` gives each the key the user wrote (``requests.nvidia.com/gpu``), for messages."""

    namespace: str
    name: str
    hard: dict[str, int] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class PodSet:
    """Identical pods of a pending workload, all placed or none (with ``min_count`` the
    scheduler may admit fewer, down to ``min_count``).

    ``requests`` are per pod without GPUs. ``gpus`` devices per pod, each with
    ``gpu_milli`` (< 1000 is a share of one device, then ``gpus`` is 1). ``gpu_memory``
    (bytes) sizes a share by device memory instead: on a node with M bytes per GPU the pod
    takes ``ceil(gpu_memory * 1000 / M)`` milli; quota is still charged ``gpu_milli``.
    ``topology_required``/``topology_preferred`` name a topology level (a node label key of
    the flavor's levels). ``anti_affinity`` keeps the workload's anti-affine pods on
    distinct nodes (hostname anti-affinity between a gang's pods).
    """

    name: str
    count: int
    requests: dict[str, int] = field(default_factory=dict)
    gpus: int = 0
    gpu_milli: int = GPU_MILLI
    gpu_memory: int = 0
    min_count: int | None = None
    gpu_models: tuple[str, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    node_affinity: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_required: str | None = None
    topology_preferred: str | None = None
    anti_affinity: bool = False

    def quota_requests(self) -> dict[str, int]:
        """Per-pod quota charge: the requests plus ``nvidia.com/gpu`` in milli-GPU."""
        return _quota_requests(self.requests, self.gpus, self.gpu_milli)

    def shape(self) -> tuple:
        """Everything it asks for, as a key: pod sets of one shape are decided alike."""
        return (
            self.name,
            self.count,
            self.min_count,
            tuple(self.requests.items()),
            self.gpus,
            self.gpu_milli,
            self.gpu_memory,
            self.gpu_models,
            tuple(self.node_selector.items()) if self.node_selector else (),
            self.node_affinity,
            self.tolerations,
            self.topology_required,
            self.topology_preferred,
            self.anti_affinity,
        )


@dataclass(slots=True)
class PendingWorkload:
    """A workload waiting for admission. Queue order: higher ``priority``, then older
    ``eviction_time`` (after a requeue) or ``creation_time``, then namespace/name.
    ``can_preempt`` False (PriorityClass preemptionPolicy Never) never evicts anything."""

    name: str
    queue: str
    pod_sets: list[PodSet]
    namespace: str = "default"
    priority: int = 0
    creation_time: float = 0.0
    eviction_time: float | None = None
    can_preempt: bool = True

    @property
    def queue_time(self) -> float:
        return self.creation_time if self.eviction_time is None else self.eviction_time


@dataclass(frozen=True, slots=True)
class PodBinding:
    """Where one pod of an admitted workload runs: a node, its device indices and, when it
    differs from the pod set's ``gpu_milli`` (memory-sized shares), the milli per device."""

    node: str
    gpus: tuple[int, ...] = ()
    gpu_milli: int | None = None


@dataclass(slots=True)
class AdmittedPodSet:
    """An admitted pod set: its per-pod requests, the flavor each resource was charged to,
    and (with nodes) one binding per pod."""

    name: str
    count: int
    requests: dict[str, int] = field(default_factory=dict)
    gpus: int = 0
    gpu_milli: int = GPU_MILLI
    flavors: dict[str, str] = field(default_factory=dict)
    pods: tuple[PodBinding, ...] = ()

    def quota_requests(self) -> dict[str, int]:
        return _quota_requests(self.requests, self.gpus, self.gpu_milli)


@dataclass(slots=True)
class AdmittedWorkload:
    """A workload holding quota (and, with nodes, running). ``evicted`` marks one already
    being evicted (its quota still counts; preemption considers it first). ``grow`` lists the
    full-size pod sets of an elastic workload the cycle may grow (:mod:`muster.scheduler.grow`)."""

    name: str
    queue: str
    pod_sets: list[AdmittedPodSet]
    namespace: str = "default"
    priority: int = 0
    creation_time: float = 0.0
    admission_time: float = 0.0
    preemptible: bool = True
    evicted: bool = False
    # An elastic workload running below its full size that may grow now (its driver decides
    # when: the gang runs and a cool-down has passed): its pod sets at full size, by name
    # (``count`` the most it asks for). Empty: it never grows.
    grow: tuple[PodSet, ...] = ()


@dataclass(slots=True)
class Snapshot:
    """Everything one scheduling cycle looks at.

    ``nodes`` is None for a quota-only snapshot (placement always succeeds), a list of
    :class:`Node`, or a prebuilt :class:`~muster.scheduler.nodes.NodeTable` (drivers that
    call :func:`schedule` often keep one and update it with
    :func:`~muster.scheduler.decisions.apply_decisions`). ``pending`` may be in any order.
    ``namespace_quotas`` cap what each namespace's admitted workloads hold together (admitted
    ones count, evicting ones too, until their pods are gone).
    """

    cluster_queues: list[ClusterQueue]
    pending: list[PendingWorkload] = field(default_factory=list)
    admitted: list[AdmittedWorkload] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    flavors: list[Flavor] = field(default_factory=list)
    nodes: list[Node] | NodeTable | None = None
    namespace_quotas: list[NamespaceQuota] = field(default_factory=list)
