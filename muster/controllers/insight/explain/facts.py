"""The shapes of an explanation and of its input, and the small facts read off a pod."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from muster.api.labels import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, replica_name
from muster.api.lifecycle import exit_code, phase
from muster.controllers.insight.usage import QuotaRow

__all__ = [
    "CapacityFacts",
    "ElasticFacts",
    "Explanation",
    "FailureFacts",
    "FitsWhen",
    "Fragmentation",
    "NodeVerdict",
    "NodeWait",
    "Obj",
    "Placement",
    "PodFacts",
    "PreemptionFacts",
    "QueueFacts",
    "RootCause",
    "TaskFacts",
    "WhyContext",
    "event_row",
    "pod_facts",
    "where",
]

Obj = Mapping[str, Any]


@dataclass
class WhyContext:
    """The objects around the one asked about. Lists may hold more than needed (every
    Workload of every namespace, every event of the namespace): the explanation picks."""

    job: Obj | None = None
    workload: Obj | None = None
    pods: Sequence[Obj] = ()
    cluster_queues: Sequence[Obj] = ()
    local_queues: Sequence[Obj] = ()
    workloads: Sequence[Obj] = ()
    events: Sequence[Obj] = ()
    log_tails: Mapping[str, Sequence[str]] = field(default_factory=dict)  # pod name -> last lines
    now: float | None = None  # epoch seconds, for ages; None: the explanation names no ages
    # The cluster, for a waiting Workload's per-node breakdown and what-if simulation (empty:
    # those parts are left out).
    nodes: Sequence[Obj] = ()
    all_pods: Sequence[Obj] = ()
    flavors: Sequence[Obj] = ()
    topologies: Sequence[Obj] = ()
    cohorts: Sequence[Obj] = ()
    priority_classes: Sequence[Obj] = ()
    jobs: Sequence[Obj] = ()
    node_claims: Sequence[Obj] = ()  # the nodes coming up (a Workload may wait for one)
    # The scheduler's snapshots of this context, built once and shared by the per-node
    # verdicts, the what-ifs and the root cause: by Workload (namespace/name), "*" for one with
    # every pending Workload in it (the doctor explains several against it).
    snapshots: dict[str, Any] = field(default_factory=dict)


@dataclass
class PodFacts:
    name: str
    replica: str  # master-0, worker-1
    phase: str
    reason: str | None = None
    node: str | None = None
    gpus: list[int] = field(default_factory=list)
    gpu_milli: int | None = None
    exit_code: int | None = None
    message: str = ""
    started: str | None = None
    finished: str | None = None


@dataclass
class FailureFacts:
    reason: str  # BackoffLimitExceeded, DeadlineExceeded, OOMKilled, Error, ...
    message: str
    pod: PodFacts | None = None
    log_tail: list[str] = field(default_factory=list)


@dataclass
class PreemptionFacts:
    time: str | None
    preemptor: str | None
    reason: str
    message: str
    resumed_at: str | None = None  # when the next run started; None: not resumed yet
    checkpoint_found: bool | None = None
    checkpoint: str | None = None  # the newest checkpoint file then


@dataclass
class QueueFacts:
    """Where a Workload stands in its ClusterQueue."""

    local_queue: str | None
    cluster_queue: str | None
    strategy: str | None = None
    position: int | None = None  # 1-based among the queue's pending Workloads, by queue order
    pending: int = 0  # pending Workloads in the ClusterQueue
    ahead: list[str] = field(default_factory=list)  # namespace/name of the first ones ahead


@dataclass
class NodeVerdict:
    node: str
    fits: bool
    reason: str  # NotReady, Cordoned, Taint, Labels, GPUModel, NoGPU, GPUCount, ..., FreeGPUs, Fits
    message: str
    have: str = ""  # for Taint, the taint; for GPUModel, the node's model
    want: str = ""  # for GPUModel, the model the pods want


@dataclass
class Fragmentation:
    """Whole free GPUs on the nodes that could host the pod (right labels, taints, model,
    CPU and memory): the gang needs ``pods`` pods of ``gpus_per_pod`` GPUs."""

    gpus_per_pod: int
    pods: int
    free_gpus: int
    nodes_with_free: int
    largest_block: int
    largest_block_node: str | None
    room: int  # pods of that size the free GPUs can take now
    fragmented: bool  # enough GPUs free in all, but not in blocks the pods can use
    message: str


@dataclass
class FitsWhen:
    finishing: list[str] = field(default_factory=list)  # namespace/name of Workloads
    fits_now: bool = False
    never: bool = False  # not even on an empty cluster
    message: str = ""


@dataclass
class RootCause:
    """The fact that sets a waiting Workload's binding constraint, one step behind the quota or
    node filter the scheduler names: a GPU that turned unhealthy, a node cordoned or not ready,
    no node with GPUs, or the borrowing or lending limit of a named queue."""

    kind: str  # NoGPUs, GPUUnhealthy, NodeNotReady, NodeCordoned, BorrowingLimit, LendingLimit
    object: str  # what to change: node/NAME, clusterqueue/NAME, cohort/NAME
    message: str  # the fact, with its numbers
    action: str  # the change that would let the Workload in
    numbers: dict[str, Any] = field(default_factory=dict)
    since: str | None = None  # when the fact became true, where the objects record it
    also: list[RootCause] = field(default_factory=list)  # further facts that must change too


@dataclass
class Placement:
    nodes: list[NodeVerdict]
    fragmentation: Fragmentation | None
    fits_when: FitsWhen | None


@dataclass
class TaskFacts:
    """One run of a workflow task (a fan-out's runs each have one)."""

    name: str  # train, or train(1) of a fan-out
    phase: str
    reason: str = ""
    message: str = ""
    attempts: int = 0
    started: str | None = None
    finished: str | None = None
    detail: str = ""  # the summary of its latest attempt's own explanation (where it runs, why it waits)
    waiting: bool = False  # running, but its attempt waits to be admitted or started


@dataclass
class NodeWait:
    """One node a waiting Workload is planned onto."""

    claim: str
    pool: str
    phase: str  # the NodeClaim's: Pending, Launched
    eta_seconds: float | None = None  # until the node should be Ready; None: unknown
    error: str = ""  # the provider's last error
    next_attempt_seconds: float | None = None  # until the provider is asked again


@dataclass
class CapacityFacts:
    nodes: list[NodeWait] = field(default_factory=list)
    message: str = ""


@dataclass
class ElasticFacts:
    """An elastic job's size: the workers admitted now, its bounds, why it is not larger
    (the scheduler's or the cool-down's reason; none at its full size) and its last resizes."""

    workers: int
    min_replicas: int
    max_replicas: int
    message: str
    held_reason: str | None = None
    held_message: str = ""
    resizes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Explanation:
    kind: str
    namespace: str | None
    name: str
    state: str
    summary: str
    reason: str | None = None
    message: str = ""
    queue: QueueFacts | None = None
    requests: dict[str, str] = field(default_factory=dict)
    quota: list[QuotaRow] = field(default_factory=list)
    pods: list[PodFacts] = field(default_factory=list)
    failure: FailureFacts | None = None
    preemptions: list[PreemptionFacts] = field(default_factory=list)
    unblock: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    blocker: str = ""  # the one sentence that names what keeps a waiting Workload out
    nodes: list[NodeVerdict] = field(default_factory=list)  # a waiting Workload's per-node verdicts
    fragmentation: Fragmentation | None = None
    fits_when: FitsWhen | None = None
    capacity: CapacityFacts | None = None  # the nodes coming up for a waiting Workload
    # an InferenceService's replicas, revisions (with the autoscaler's view) and traffic split
    serving: dict[str, Any] | None = None
    root_cause: RootCause | None = None  # the fact behind the blocker, named first in the summary
    tasks: list[TaskFacts] = field(default_factory=list)  # a workflow's task runs
    elastic: ElasticFacts | None = None  # an elastic job's size and why it is not larger

    @property
    def ref(self) -> str:
        return f"{self.kind.lower()}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out = _camel(asdict(self))
        out["quota"] = [row.to_dict() for row in self.quota]
        out["requests"] = dict(self.requests)  # resource names are keys, kept as they are
        return out


def event_row(e: Obj) -> dict[str, Any]:
    """An Event as an explanation lists it."""
    return {
        "object": f"{e['involvedObject']['kind'].lower()}/{e['involvedObject']['name']}",
        "type": e.get("type"),
        "reason": e.get("reason"),
        "message": e.get("message", ""),
        "count": e.get("count", 1),
        "lastTimestamp": e.get("lastTimestamp"),
    }


def pod_facts(pods: Sequence[Obj]) -> list[PodFacts]:
    """What matters of each pod, master first, then workers by index."""
    out = []
    for pod in sorted(pods, key=_replica_order):
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        out.append(
            PodFacts(
                name=pod["metadata"]["name"],
                replica=replica_name(pod),
                phase=phase(pod),
                reason=status.get("reason"),
                node=spec.get("nodeName"),
                gpus=list(spec.get("gpus") or []),
                gpu_milli=spec.get("gpuMilli"),
                exit_code=exit_code(pod),
                message=status.get("message") or "",
                started=status.get("startTime"),
                finished=status.get("finishTime"),
            )
        )
    return out


def where(pods: Sequence[PodFacts]) -> str:
    """``master-0 on node-a GPU 0; worker-0 on node-a GPU 1``."""
    placed = [p for p in pods if p.node]
    if not placed:
        return "no pod placed yet"
    parts = []
    for p in placed:
        gpus = ""
        if p.gpus:
            share = f" ({p.gpu_milli}m)" if p.gpu_milli else ""
            gpus = f" GPU {','.join(str(g) for g in p.gpus)}{share}"
        parts.append(f"{p.replica} on {p.node}{gpus}")
    return "; ".join(parts)


def _replica_order(pod: Obj) -> tuple[int, int, str]:
    labels = pod["metadata"].get("labels") or {}
    rtype = str(labels.get(REPLICA_TYPE_LABEL) or "")
    try:
        index = int(labels.get(REPLICA_INDEX_LABEL, 0))
    except ValueError:
        index = 0
    # the replica that leads (and decides) first: master, chief, launcher
    return (0 if rtype.lower() in ("master", "chief", "launcher") else 1, index, pod["metadata"]["name"])


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {_camel_key(k): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)
