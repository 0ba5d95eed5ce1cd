"""Quota objects, mirroring Kueue v1beta2: ResourceFlavor, Topology, ClusterQueue, Cohort,
LocalQueue.

The shapes and rules follow Kueue (``apis/kueue/v1beta2``, ``pkg/webhooks``) so manifests
convert mechanically; the one rename is ClusterQueue ``cohort`` (Kueue v1beta2 calls it
``cohortName``; the converter accepts both). Quota arithmetic lives in ``muster.scheduler``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.checks import duplicate_errors
from muster.api.common import (
    Labels,
    LabelSelector,
    NonNegativeQuantity,
    ObjectName,
    QuantityStr,
    ResourceAmount,
    ResourceName,
    Taint,
    Toleration,
)
from muster.api.errors import FieldError, child_path
from muster.api.quantity import Quantity, units_problem

__all__ = [
    "BorrowWithinCohort",
    "ClusterQueue",
    "ClusterQueuePreemption",
    "ClusterQueueSpec",
    "ClusterQueueStatus",
    "Cohort",
    "CohortSpec",
    "FairSharing",
    "FlavorFungibility",
    "FlavorQuotas",
    "LocalQueue",
    "LocalQueueSpec",
    "ResourceFlavor",
    "ResourceFlavorSpec",
    "ResourceGroup",
    "ResourceQuota",
    "StopPolicy",
    "Topology",
    "TopologyLevel",
    "TopologySpec",
]

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
_STOP_POLICY_DOC = (
    "None admits; Hold stops new admissions and lets admitted workloads finish; "
    "HoldAndDrain also evicts admitted workloads."
)


# -- ResourceFlavor and Topology ---------------------------------------------------------


class ResourceFlavorSpec(MusterModel):
    node_labels: Labels = Field(
        default_factory=dict,
        max_length=8,
        description="Labels of the nodes that provide this flavor; injected into admitted pods.",
    )
    node_taints: list[Taint] = Field(
        default_factory=list, max_length=8, description="Taints those nodes carry; pods must tolerate them."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, max_length=8, description="Tolerations added to pods admitted on this flavor."
    )
    topology_name: ObjectName | None = Field(
        default=None, description="Topology whose levels describe these nodes (enables topology requests)."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        if self.topology_name and not self.node_labels:
            return [FieldError(child_path(path, "nodeLabels"), "must not be empty when topologyName is set")]
        return []


class ResourceFlavor(Object):
    """A hardware or pricing class of nodes (e.g. a100, spot)."""

    KIND: ClassVar[str] = "ResourceFlavor"
    kind: Literal["ResourceFlavor"] = Field(default="ResourceFlavor", description="Always ResourceFlavor.")
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec, description="Which nodes.")


class TopologyLevel(MusterModel):
    node_label: str = Field(description="Node label key for this level, e.g. topology.kubernetes.io/zone.")


class TopologySpec(MusterModel):
    levels: list[TopologyLevel] = Field(
        min_length=1, max_length=16, description="Levels from the broadest (block) to the narrowest (host)."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        labels = [level.node_label for level in self.levels]
        return duplicate_errors(labels, child_path(path, "levels"), "nodeLabel", "duplicate node label")


class Topology(Object):
    """Ordered node-label levels used by topology-aware placement."""

    KIND: ClassVar[str] = "Topology"
    kind: Literal["Topology"] = Field(default="Topology", description="Always Topology.")
    spec: TopologySpec = Field(description="The levels.")


# -- quotas --------------------------------------------------------------------------------


class ResourceQuota(MusterModel):
    name: ResourceName = Field(description="Resource name, e.g. nvidia.com/gpu.")
    nominal_quota: ResourceAmount = Field(description="Quantity this queue may always use.")
    borrowing_limit: ResourceAmount | None = Field(
        default=None,
        description="Most this queue may use above nominal, borrowed from its cohort; unset means no "
        "limit. Only with a cohort.",
    )
    lending_limit: ResourceAmount | None = Field(
        default=None,
        description="Most of its unused nominal quota this queue lends to its cohort; unset lends all. "
        "Only with a cohort.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        amounts = {"nominalQuota": self.nominal_quota, "borrowingLimit": self.borrowing_limit}
        amounts["lendingLimit"] = self.lending_limit
        return [
            FieldError(child_path(path, key), why, value)
            for key, value in amounts.items()
            if value is not None and (why := units_problem(Quantity.parse(value), self.name))
        ]


class FlavorQuotas(MusterModel):
    name: ObjectName = Field(description="ResourceFlavor name.")
    resources: list[ResourceQuota] = Field(
        min_length=1,
        max_length=64,
        description="One quota per covered resource, in the order of the group's coveredResources.",
    )


class ResourceGroup(MusterModel):
    covered_resources: list[ResourceName] = Field(
        min_length=1, max_length=64, description="Resources whose quota this group's flavors provide."
    )
    flavors: list[FlavorQuotas] = Field(
        min_length=1, max_length=64, description="Flavors in order of preference, each with its quotas."
    )


class FairSharing(MusterModel):
    weight: NonNegativeQuantity = Field(
        default="1", description="Share weight when borrowing in the cohort; 0 means always last."
    )


class BorrowWithinCohort(MusterModel):
    policy: Literal["Never", "LowerPriority"] = Field(
        default="Never",
        description="LowerPriority: a workload that must borrow may preempt lower-priority workloads "
        "of other queues in the cohort.",
    )
    max_priority_threshold: int | None = Field(
        default=None, description="Only workloads at or below this priority may be preempted so."
    )


class ClusterQueuePreemption(MusterModel):
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = Field(
        default="Never", description="Whether a workload may preempt others in its own queue."
    )
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        default="Never",
        description="Whether a workload may preempt workloads of queues borrowing from the cohort.",
    )
    borrow_within_cohort: BorrowWithinCohort | None = Field(
        default=None, description="Preemption while borrowing (classical preemption only)."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        bwc = self.borrow_within_cohort
        if self.reclaim_within_cohort == "Never" and bwc is not None and bwc.policy != "Never":
            return [
                FieldError(
                    child_path(path, "borrowWithinCohort", "policy"),
                    "must be Never when reclaimWithinCohort is Never",
                    bwc.policy,
                    "set reclaimWithinCohort to LowerPriority or Any",
                )
            ]
        return []


class FlavorFungibility(MusterModel):
    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor"] = Field(
        default="MayStopSearch",
        description="MayStopSearch: take the first flavor that fits by borrowing; TryNextFlavor: "
        "look for a flavor that fits without borrowing first.",
    )
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor"] = Field(
        default="TryNextFlavor",
        description="MayStopSearch: take the first flavor that fits by preempting; TryNextFlavor: "
        "look for a flavor that fits without preempting first.",
    )
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = Field(
        default=None, description="Which to prefer when every flavor needs borrowing or preemption."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        if self.preference and not (self.when_can_borrow == self.when_can_preempt == "TryNextFlavor"):
            return [
                FieldError(
                    child_path(path, "preference"),
                    "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor",
                )
            ]
        return []


class ClusterQueueSpec(MusterModel):
    resource_groups: list[ResourceGroup] = Field(
        default_factory=list, max_length=16, description="Quotas: groups of resources and their flavors."
    )
    cohort: ObjectName | None = Field(
        default=None, description="Cohort whose queues lend each other unused quota (Kueue: cohortName)."
    )
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = Field(
        default="BestEffortFIFO",
        description="StrictFIFO: the head blocks the queue; BestEffortFIFO: later workloads that fit "
        "may go first.",
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces that may submit here. Unset admits every namespace (unlike Kueue, "
        "where unset admits none); {} also admits every namespace.",
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, description="When workloads may preempt others."
    )
    fair_sharing: FairSharing | None = Field(default=None, description="Weight in fair sharing.")
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility,
        description="How far to search flavors before borrowing/preempting.",
    )
    stop_policy: StopPolicy = Field(default="None", description=_STOP_POLICY_DOC)

    def field_rules(self, path: str) -> list[FieldError]:
        return resource_group_rules(
            self.resource_groups,
            child_path(path, "resourceGroups"),
            has_parent=bool(self.cohort),
            parent_field=child_path(path, "cohort"),
            lending_within_nominal=True,
        )


class ResourceUsage(MusterModel):
    name: str = Field(description="Resource name.")
    total: QuantityStr = Field(default="0", description="Quota in use, including borrowed.")
    borrowed: QuantityStr = Field(default="0", description="Quota in use above nominal.")


class FlavorUsage(MusterModel):
    name: str = Field(description="Flavor name.")
    resources: list[ResourceUsage] = Field(default_factory=list, description="Usage per resource.")


class FairSharingStatus(MusterModel):
    weighted_share: int = Field(default=0, description="Dominant resource share above nominal, by weight.")


class QueueStatus(MusterModel):
    """What ClusterQueue and LocalQueue both report."""

    conditions: list[Condition] = Field(default_factory=list, description="Active, with a reason.")
    pending_workloads: int = Field(default=0, description="Workloads waiting.")
    reserving_workloads: int = Field(default=0, description="Workloads holding quota.")
    admitted_workloads: int = Field(default=0, description="Workloads admitted and not finished.")
    flavors_usage: list[FlavorUsage] = Field(default_factory=list, description="Quota used by admitted.")


class ClusterQueueStatus(QueueStatus):
    flavors_reservation: list[FlavorUsage] = Field(default_factory=list, description="Quota reserved.")
    fair_sharing: FairSharingStatus | None = Field(default=None, description="Fair-sharing state.")


class ClusterQueue(Object):
    """A pool of quota per flavor and resource, with its queueing and preemption policy."""

    KIND: ClassVar[str] = "ClusterQueue"
    kind: Literal["ClusterQueue"] = Field(default="ClusterQueue", description="Always ClusterQueue.")
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec, description="Quotas and policy.")
    status: ClusterQueueStatus | None = Field(default=None, description="Usage and counts.")


class CohortSpec(MusterModel):
    parent_name: ObjectName | None = Field(
        default=None, description="Parent cohort (hierarchical cohorts); unset for a root."
    )
    resource_groups: list[ResourceGroup] = Field(
        default_factory=list,
        max_length=16,
        description="Extra quota shared by the cohort's members; limits only with a parent.",
    )
    fair_sharing: FairSharing | None = Field(default=None, description="Weight in fair sharing.")

    def field_rules(self, path: str) -> list[FieldError]:
        return resource_group_rules(
            self.resource_groups,
            child_path(path, "resourceGroups"),
            has_parent=bool(self.parent_name),
            parent_field=child_path(path, "parentName"),
            lending_within_nominal=False,
        )


class CohortStatus(MusterModel):
    fair_sharing: FairSharingStatus | None = Field(default=None, description="Fair-sharing state.")


class Cohort(Object):
    """A group of ClusterQueues that lend each other quota; may have its own quota and parent."""

    KIND: ClassVar[str] = "Cohort"
    kind: Literal["Cohort"] = Field(default="Cohort", description="Always Cohort.")
    spec: CohortSpec = Field(default_factory=CohortSpec, description="Parent and shared quota.")
    status: CohortStatus | None = Field(default=None, description="Fair-sharing state.")


class LocalQueueSpec(MusterModel):
    cluster_queue: ObjectName = Field(description="The ClusterQueue that backs this queue.")
    stop_policy: StopPolicy = Field(default="None", description=_STOP_POLICY_DOC)


class LocalQueue(Object):
    """A namespace's entry point to a ClusterQueue; jobs name it in queueName."""

    KIND: ClassVar[str] = "LocalQueue"
    kind: Literal["LocalQueue"] = Field(default="LocalQueue", description="Always LocalQueue.")
    spec: LocalQueueSpec = Field(description="The backing ClusterQueue.")
    status: QueueStatus | None = Field(default=None, description="Counts and usage.")


def resource_group_rules(
    groups: list[ResourceGroup],
    path: str,
    has_parent: bool,
    parent_field: str,
    lending_within_nominal: bool,
) -> list[FieldError]:
    """Kueue's resource-group rules (``pkg/webhooks/clusterqueue_webhook.go``).

    A resource and a flavor belong to one group only; every flavor lists exactly the group's
    coveredResources in the same order; borrowing and lending limits need a cohort (parent);
    a ClusterQueue cannot lend more than its nominal quota.
    """
    errors: list[FieldError] = []
    resource_group: dict[str, int] = {}
    flavor_group: dict[str, int] = {}
    for g, group in enumerate(groups):
        gpath = child_path(path, g)
        for r, name in enumerate(group.covered_resources):
            if name in resource_group:
                where = f"resourceGroups[{resource_group[name]}]"
                what = (
                    "appears twice in this group" if resource_group[name] == g else f"is already in {where}"
                )
                errors.append(
                    FieldError(
                        child_path(gpath, "coveredResources", r),
                        f"resource {name!r} {what}; a resource belongs to one group only",
                    )
                )
            resource_group.setdefault(name, g)
        for f, flavor in enumerate(group.flavors):
            fpath = child_path(gpath, "flavors", f)
            if flavor.name in flavor_group:
                errors.append(
                    FieldError(
                        child_path(fpath, "name"),
                        f"flavor {flavor.name!r} is already in "
                        f"resourceGroups[{flavor_group[flavor.name]}]; a flavor belongs "
                        "to one group only",
                    )
                )
            flavor_group.setdefault(flavor.name, g)
            errors.extend(
                _flavor_rules(
                    flavor, group.covered_resources, fpath, has_parent, parent_field, lending_within_nominal
                )
            )
    return errors


def _flavor_rules(
    flavor: FlavorQuotas,
    covered: list[str],
    path: str,
    has_parent: bool,
    parent_field: str,
    lending_within_nominal: bool,
) -> list[FieldError]:
    errors: list[FieldError] = []
    names = [q.name for q in flavor.resources]
    if len(names) != len(covered):
        errors.append(
            FieldError(
                child_path(path, "resources"),
                f"must list exactly the group's coveredResources {covered} in that order",
                names,
            )
        )
    for i, quota in enumerate(flavor.resources):
        qpath = child_path(path, "resources", i)
        if i < len(covered) and quota.name != covered[i]:
            errors.append(
                FieldError(
                    child_path(qpath, "name"),
                    f"must be {covered[i]!r}, the group's coveredResources[{i}]",
                    quota.name,
                )
            )
        for limit in ("borrowing_limit", "lending_limit"):
            alias = "borrowingLimit" if limit == "borrowing_limit" else "lendingLimit"
            if getattr(quota, limit) is not None and not has_parent:
                errors.append(
                    FieldError(child_path(qpath, alias), f"may only be set when {parent_field} is set")
                )
        if (
            lending_within_nominal
            and quota.lending_limit is not None
            and Quantity.parse(quota.lending_limit) > Quantity.parse(quota.nominal_quota)
        ):
            errors.append(
                FieldError(
                    child_path(qpath, "lendingLimit"),
                    f"must be <= nominalQuota ({quota.nominal_quota})",
                    quota.lending_limit,
                )
            )
    return errors
