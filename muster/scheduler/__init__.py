"""muster.scheduler: the pure scheduling core (DESIGN §5).

``schedule(snapshot, policy) -> Decisions`` runs one cycle: Kueue's quota semantics
(cohorts, borrowing, lending, preemption, fair sharing, partial admission) and gang
placement onto nodes and GPU devices, in one decision. No I/O, no clock, no globals; the
only randomness is a generator seeded from :attr:`Policy.seed`.

Drivers build a :class:`Snapshot` (see :mod:`muster.scheduler.snapshot` for the contract
and units), call :func:`schedule`, and apply the :class:`Decisions` (admissions with
per-pod node and devices, preemptions, pending reasons). :func:`apply_decisions` does the
bookkeeping for drivers that loop cycles themselves (the simulator, benchmarks).
"""

from muster.scheduler.admission import schedule
from muster.scheduler.decisions import (
    Admission,
    Decisions,
    GrowthHeld,
    NodePlacement,
    Pending,
    PodSetAdmission,
    Preemption,
    Resize,
    apply_decisions,
)
from muster.scheduler.nodes import NodeTable
from muster.scheduler.policy import PLACEMENT_POLICIES, Policy, TypicalPod
from muster.scheduler.reasons import CODES
from muster.scheduler.snapshot import (
    CPU,
    GPU,
    GPU_MILLI,
    MEMORY,
    AdmittedPodSet,
    AdmittedWorkload,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    NamespaceQuota,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PendingWorkload,
    PodBinding,
    PodSet,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    SnapshotError,
    Taint,
    Toleration,
    format_units,
    to_units,
)

__all__ = [
    "CODES",
    "CPU",
    "GPU",
    "GPU_MILLI",
    "MEMORY",
    "PLACEMENT_POLICIES",
    "Admission",
    "AdmittedPodSet",
    "AdmittedWorkload",
    "ClusterQueue",
    "Cohort",
    "Decisions",
    "Flavor",
    "FlavorQuotas",
    "GrowthHeld",
    "NamespaceQuota",
    "Node",
    "NodePlacement",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeTable",
    "Pending",
    "PendingWorkload",
    "PodBinding",
    "PodSet",
    "PodSetAdmission",
    "Policy",
    "Preemption",
    "PreemptionConfig",
    "Resize",
    "ResourceGroup",
    "ResourceQuota",
    "Snapshot",
    "SnapshotError",
    "Taint",
    "Toleration",
    "TypicalPod",
    "apply_decisions",
    "format_units",
    "schedule",
    "to_units",
]
