"""Capacity that follows demand: NodePool (what nodes a pool can make, at what price) and
NodeClaim (one node asked of a pool's provider, from the intent to the node's end).

A NodePool mirrors Karpenter's ``karpenter.sh/v1 NodePool`` where the ideas meet (a template
of the nodes it makes, capacity type, limits, weight, consolidation), plus what Karpenter
leaves to the cloud: the provider that makes the nodes, their price, and how long one takes
to come up. A NodeClaim is written by the capacity controller *before* the provider is asked
for the node, so a restart of the server neither loses nor duplicates a node
(docs/capacity.md). UsageRecord is the cost ledger: one per pod run and per node lifetime,
kept after the pod or node is gone, so ``muster cost`` can answer for any past window.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.common import Labels, NonNegativeQuantity, ObjectName, ResourceList, Taint
from muster.api.errors import FieldError, child_path
from muster.api.quantity import Quantity

__all__ = [
    "CAPACITY_TYPES",
    "CLAIM_PHASES",
    "PROVIDERS",
    "ClaimInterruption",
    "ConsolidationSpec",
    "MigSpec",
    "NodeClaim",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
    "NodeTemplate",
    "UsageRecord",
    "UsageRecordSpec",
]

# The providers Muster ships; "python" loads a class a user wrote (providerConfig.class).
PROVIDERS = ("local", "kubernetes", "hook", "python")
CAPACITY_TYPES = ("on-demand", "spot")
CLAIM_PHASES = ("Pending", "Launched", "Ready", "Draining", "Failed", "Terminating", "Terminated")

# The settings each provider takes (None: any; a python provider's class reads its own).
_PROVIDER_CONFIG_KEYS: dict[str, tuple[str, ...] | None] = {
    "local": (),
    "kubernetes": ("provisioningClassName", "namespace"),
    "hook": ("command", "timeoutSeconds"),
    "python": None,
}
_REQUIRED_CONFIG = {"hook": "command", "python": "class"}


class MigSpec(MusterModel):
    """GPUs partitioned into MIG slices, offered as ``nvidia.com/mig-<profile>`` resources
    instead of whole GPUs (the device plugin's mixed strategy)."""

    profile: str = Field(
        pattern=r"^[1-9]g\.[0-9]+gb$", description="MIG profile of every slice, e.g. 1g.10gb or 3g.40gb."
    )
    slices_per_gpu: int = Field(ge=1, le=7, description="Slices each GPU is cut into (at most 7).")


class NodeTemplate(MusterModel):
    """What every node of the pool looks like once it is up."""

    gpus: int = Field(default=0, ge=0, le=64, description="GPUs per node (0 for CPU-only nodes).")
    gpu_model: str = Field(
        default="",
        max_length=63,
        description="GPU product as GPU feature discovery labels it (nvidia.com/gpu.product), "
        "e.g. A100-SXM4-80GB. Required when gpus > 0.",
    )
    gpu_memory: NonNegativeQuantity = Field(default="16Gi", description="Memory of each GPU, e.g. 80Gi.")
    cpu: NonNegativeQuantity = Field(default="8", description="Allocatable CPUs per node.")
    memory: NonNegativeQuantity = Field(default="64Gi", description="Allocatable memory per node.")
    mig: MigSpec | None = Field(
        default=None, description="Partition every GPU into MIG slices (unset: whole GPUs)."
    )
    labels: Labels = Field(
        default_factory=dict,
        description="Labels of the nodes, topology labels included (topology.kubernetes.io/zone, a "
        "rack or block label): every node of the pool carries the same values, so a gang placed on "
        "one pool's new nodes keeps its topology.",
    )
    taints: list[Taint] = Field(
        default_factory=list, max_length=16, description="Taints the nodes are created with."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        if self.gpus and not self.gpu_model:
            errors.append(
                FieldError(
                    child_path(path, "gpuModel"),
                    "is required when gpus > 0",
                    hint="name the GPU product, e.g. A100-SXM4-80GB",
                )
            )
        if self.mig is not None and not self.gpus:
            errors.append(FieldError(child_path(path, "mig"), "needs gpus > 0 to partition"))
        if Quantity.parse(self.gpu_memory) < Quantity(1 << 20) and self.gpus:
            errors.append(FieldError(child_path(path, "gpuMemory"), "must be at least 1Mi", self.gpu_memory))
        return errors


class ConsolidationSpec(MusterModel):
    """When nodes go away again (Karpenter's disruption.consolidationPolicy and consolidateAfter)."""

    ttl_seconds_after_empty: float = Field(
        default=300.0,
        ge=0,
        description="An empty node (no pod runs there and no pending work is planned onto it) is "
        "removed after this many seconds, unless the pool would fall below minNodes.",
    )
    repack_underutilized: bool = Field(
        default=False,
        description="Also drain a node whose allocated GPU share stays under utilizationThreshold "
        "when every pod on it can be checkpointed (annotation muster.dev/checkpointable) and fits "
        "on the pool's other nodes; its jobs are requeued with their checkpoints.",
    )
    utilization_threshold: float = Field(
        default=0.5, gt=0, le=1, description="Allocated GPU share under which a node counts as under-used."
    )


class NodePoolSpec(MusterModel):
    provider: str = Field(
        description="Who makes the nodes: local (fake-GPU nodes inside muster up), kubernetes "
        "(ProvisioningRequests for the cluster autoscaler), hook (an executable you write), python "
        "(a NodeProvider class you write, named in providerConfig.class)."
    )
    provider_config: dict[str, str] = Field(
        default_factory=dict,
        description="Provider settings: hook: command, timeoutSeconds; python: class (module:Class) "
        "and whatever your class reads; kubernetes: provisioningClassName, namespace.",
    )
    template: NodeTemplate = Field(default_factory=NodeTemplate, description="The nodes the pool makes.")
    capacity_type: Literal["on-demand", "spot"] = Field(
        default="on-demand",
        description="on-demand, or spot: cheaper, may be interrupted with a short notice. Spot nodes "
        "carry the taint muster.dev/capacity-type=spot:NoSchedule, so only work that tolerates it "
        "lands there (the autoscaler prefers spot for such work).",
    )
    price_per_hour: float = Field(
        default=0.0, ge=0, description="What one node costs per hour (any currency; cost reports use it)."
    )
    min_nodes: int = Field(default=0, ge=0, description="Nodes kept even when idle.")
    max_nodes: int = Field(default=10, ge=0, le=10000, description="Most nodes the pool makes.")
    provisioning_delay_seconds: float = Field(
        default=60.0,
        ge=0,
        description="How long a node takes from the request to Ready: the local provider waits this "
        "long; for others it is the ETA `muster why` shows.",
    )
    registration_timeout_seconds: float = Field(
        default=900.0,
        gt=0,
        description="A node not Ready (with its GPUs) this long after launch is given up and removed.",
    )
    weight: int = Field(
        default=0, ge=0, le=100, description="Preference among pools that fit the same work; higher first."
    )
    limits: ResourceList = Field(
        default_factory=dict,
        description="Ceiling on the pool's total resources (e.g. nvidia.com/gpu: 64), as Karpenter's limits.",
    )
    consolidation: ConsolidationSpec = Field(
        default_factory=ConsolidationSpec, description="When idle or under-used nodes go."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        if self.provider not in PROVIDERS:
            errors.append(
                FieldError(
                    child_path(path, "provider"),
                    f"unknown provider; use one of {', '.join(PROVIDERS)}",
                    self.provider,
                    "write your own as a NodeProvider class and name it with provider: python "
                    "and providerConfig.class (docs/capacity.md)",
                )
            )
        else:
            known = _PROVIDER_CONFIG_KEYS[self.provider]
            for key in self.provider_config:
                if known is not None and key not in known:
                    errors.append(
                        FieldError(
                            child_path(path, "providerConfig", key),
                            f"is not a setting of the {self.provider} provider"
                            + (f"; it takes {', '.join(known)}" if known else "; it takes none"),
                        )
                    )
            needed = _REQUIRED_CONFIG.get(self.provider)
            if needed and not self.provider_config.get(needed):
                errors.append(
                    FieldError(
                        child_path(path, "providerConfig", needed),
                        f"is required by the {self.provider} provider",
                        hint="a command run with a JSON request on stdin"
                        if needed == "command"
                        else "module:Class of your NodeProvider, e.g. mycloud:Provider",
                    )
                )
        if self.max_nodes < self.min_nodes:
            errors.append(
                FieldError(
                    child_path(path, "maxNodes"),
                    f"must be >= minNodes ({self.min_nodes})",
                    self.max_nodes,
                    "raise maxNodes or lower minNodes",
                )
            )
        return errors


class NodePoolStatus(MusterModel):
    nodes: int = Field(default=0, description="Nodes of the pool that exist or are coming up.")
    ready_nodes: int = Field(default=0, description="Nodes that are Ready.")
    provisioning: int = Field(default=0, description="Nodes asked for and not Ready yet.")
    gpus: int = Field(default=0, description="GPUs of the Ready nodes.")
    cost_per_hour: float = Field(default=0.0, description="What the pool's nodes cost per hour now.")
    last_scale_time: str | None = Field(default=None, description="When the pool last grew or shrank.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, with the last problem.")


class NodePool(Object):
    """A pool of nodes the autoscaler grows while work waits and shrinks when it is idle."""

    KIND: ClassVar[str] = "NodePool"
    kind: Literal["NodePool"] = Field(default="NodePool", description="Always NodePool.")
    spec: NodePoolSpec = Field(description="The provider, the nodes, their price and the limits.")
    status: NodePoolStatus | None = Field(default=None, description="What the pool has now.")


# -- NodeClaim ----------------------------------------------------------------------------------


class ClaimInterruption(MusterModel):
    """A spot interruption notice and what it cost."""

    notice_time: str = Field(description="When the notice arrived.")
    termination_time: str = Field(description="When the provider takes the node back.")
    action: str = Field(default="terminate", description="What the cloud does then (terminate, stop).")
    lost_gpu_seconds: float | None = Field(
        default=None,
        description="GPU-seconds of work redone because of it: per interrupted pod, GPUs x the run "
        "since its last checkpoint (the whole run when none was found).",
    )


class NodeClaimSpec(MusterModel):
    node_pool: ObjectName = Field(description="The NodePool the node is asked of.")
    provider: str = Field(description="The pool's provider when the claim was made.")
    provider_config: dict[str, str] = Field(
        default_factory=dict, description="The pool's providerConfig then (to give the node back later)."
    )
    capacity_type: Literal["on-demand", "spot"] = Field(description="on-demand or spot.")
    price_per_hour: float = Field(ge=0, description="The node's price per hour.")
    template: NodeTemplate = Field(description="The node asked for (the pool's template then).")
    provisioning_delay_seconds: float = Field(
        default=0.0, ge=0, description="The pool's provisioning delay then (the ETA of the node)."
    )
    registration_timeout_seconds: float = Field(
        default=900.0, gt=0, description="How long after launch the node may take to be Ready."
    )
    reason: str = Field(default="", description="Why it was asked for: the pending work, or minNodes.")


class NodeClaimStatus(MusterModel):
    phase: Literal["Pending", "Launched", "Ready", "Draining", "Failed", "Terminating", "Terminated"] = Field(
        default="Pending",
        description="Pending (asked for; the provider is called), Launched (the provider is making "
        "it), Ready, Draining, Failed, Terminating, Terminated.",
    )
    provider_id: str = Field(default="", description="The provider's id of the machine.")
    node_name: str = Field(default="", description="The Node it registered as.")
    attempts: int = Field(default=0, description="Provider calls that failed so far.")
    last_error: str = Field(default="", description="The provider's last error.")
    next_attempt_at: str | None = Field(default=None, description="When the provider is asked again.")
    launched_at: str | None = Field(default=None, description="When the provider accepted the request.")
    expected_ready_at: str | None = Field(default=None, description="When the node should be Ready.")
    ready_at: str | None = Field(default=None, description="When the node turned Ready.")
    terminated_at: str | None = Field(default=None, description="When the machine was given back.")
    empty_since: str | None = Field(default=None, description="Since when nothing runs on the node.")
    underused_since: str | None = Field(
        default=None, description="Since when its allocated GPU share is under the pool's threshold."
    )
    workloads: list[str] = Field(
        default_factory=list, description="The pending work (namespace/name) planned onto this node now."
    )
    interruption: ClaimInterruption | None = Field(default=None, description="A spot interruption notice.")
    message: str = Field(default="", description="What happens now, in a sentence.")


class NodeClaim(Object):
    """One node asked of a NodePool's provider (written before the provider is called)."""

    KIND: ClassVar[str] = "NodeClaim"
    kind: Literal["NodeClaim"] = Field(default="NodeClaim", description="Always NodeClaim.")
    spec: NodeClaimSpec = Field(description="What was asked for and why.")
    status: NodeClaimStatus | None = Field(default=None, description="Where the node is in its life.")


# -- UsageRecord --------------------------------------------------------------------------------


class UsageRecordSpec(MusterModel):
    type: Literal["Pod", "Node"] = Field(description="A pod's run on GPUs, or a node's lifetime.")
    namespace: str = Field(default="", description="The pod's namespace (empty for a node).")
    name: str = Field(description="The pod's or node's name.")
    uid: str = Field(default="", description="The pod's or node's uid.")
    node: str = Field(default="", description="The node it ran on (a pod) or the node itself.")
    node_pool: str = Field(default="", description="The NodePool of the node, if any.")
    capacity_type: str = Field(default="", description="on-demand or spot (pool nodes).")
    job: str = Field(default="", description="The TrainingJob of the pod, if any.")
    queue: str = Field(default="", description="The ClusterQueue that admitted the pod.")
    labels: dict[str, str] = Field(
        default_factory=dict, description="The pod's and its job's labels (a team label, ...)."
    )
    gpus: float = Field(default=0.0, ge=0, description="GPUs held (a share counts as a fraction).")
    node_gpus: int = Field(default=0, ge=0, description="GPUs of the node.")
    cpu: float = Field(default=0.0, ge=0, description="CPUs the pod requested.")
    node_cpu: float = Field(default=0.0, ge=0, description="Allocatable CPUs of the node.")
    price_per_hour: float = Field(default=0.0, ge=0, description="The node's price per hour.")
    start: str = Field(description="When it began (the pod's start, the node's launch).")
    end: str | None = Field(default=None, description="When it ended; unset while it lasts.")
    interrupted: bool = Field(default=False, description="Ended by a spot interruption.")
    lost_gpu_seconds: float = Field(default=0.0, ge=0, description="Work redone because of an interruption.")


class UsageRecord(Object):
    """One entry of the cost ledger (written by the control plane, read by muster cost)."""

    KIND: ClassVar[str] = "UsageRecord"
    kind: Literal["UsageRecord"] = Field(default="UsageRecord", description="Always UsageRecord.")
    spec: UsageRecordSpec = Field(description="What ran where, from when to when, at what price.")
