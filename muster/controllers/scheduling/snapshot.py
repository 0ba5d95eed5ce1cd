"""The scheduler loop's snapshot: store objects (from the cache) as a :class:`Snapshot`.

Workloads sort into three groups:

* **holding** an admission (admitted, or being evicted: quota is held until the pods are
  gone) -> :class:`AdmittedWorkload` with their placements (``evicted`` when evicting);
* **pending** (active, not finished, no admission, not waiting out a requeue backoff) whose
  queue resolves -> :class:`PendingWorkload`, queue order by priority, then creation time or
  the time of the last requeue;
* **unqueueable** pending ones whose LocalQueue or ClusterQueue is missing, stopped or closed
  to their namespace: the scheduler never sees them; they get their reason here.

A Workload that names no queue goes to its namespace's ``default`` LocalQueue (DESIGN §4).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from muster.api.conditions import epoch, is_true, transition_time
from muster.api.lifecycle import WorkloadState, requeue_keeps_place, workload_state
from muster.api.namespace import NAMESPACE_NAME_LABEL, enforced_quota_resource
from muster.api.quantity import to_int
from muster.api.resources import gpu_demand
from muster.controllers.scheduling.cluster import (
    build_cluster_queues,
    build_cohorts,
    build_flavors,
    build_nodes,
    request_units,
    tolerations,
)
from muster.controllers.scheduling.elastic import below_full_size, growth, running_pods
from muster.scheduler import (
    GPU_MILLI,
    AdmittedPodSet,
    AdmittedWorkload,
    NamespaceQuota,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PendingWorkload,
    PodBinding,
    PodSet,
    Snapshot,
    to_units,
)

__all__ = [
    "DEFAULT_QUEUE",
    "Built",
    "SnapshotMemo",
    "Unqueueable",
    "admitted_view",
    "build_snapshot",
    "namespace_quota",
    "pod_set_of",
    "resolve_queue",
    "workload_key",
]

Obj = dict[str, Any]
DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Unqueueable:
    """A pending Workload the scheduler cannot consider, and why."""

    workload: Obj
    reason: str
    message: str


@dataclass
class Built:
    """A snapshot and how its workloads map back to store objects (by namespace/name)."""

    snapshot: Snapshot
    workloads: dict[tuple[str, str], Obj] = field(default_factory=dict)
    unqueueable: list[Unqueueable] = field(default_factory=list)
    next_requeue: float | None = None  # the earliest requeue backoff still running
    # elastic Workloads that may not grow yet, and why (reason, message): see .elastic
    held: list[tuple[Obj, str, str]] = field(default_factory=list)
    next_grow: float | None = None  # the earliest end of a growth cool-down


def workload_key(namespace: str | None, name: str) -> tuple[str, str]:
    return namespace or "", name


@dataclass(slots=True)
class _Read:
    """What a snapshot reads of one Workload at one resourceVersion."""

    version: str
    uid: str
    key: tuple[str, str]  # workload_key
    state: WorkloadState
    active: bool
    requeue_at: float | None
    asks: tuple[str | None, str | None]  # (namespace, spec.queueName): what resolves its queue
    priority_class: str | None
    # its pending view, with the queue and the preemption class it was made for
    pending: PendingWorkload | None = None
    pending_for: tuple[str, bool] | None = None


class SnapshotMemo:
    """What :func:`build_snapshot` read of each Workload, kept between cycles by uid: its
    pod sets while its generation holds, and its state, requeue time and pending view while
    its resourceVersion holds. A queue of a thousand waiting Workloads is thus read once, not
    once per cycle (each cycle would otherwise scan every condition of every one of them)."""

    def __init__(self) -> None:
        self._pod_sets: dict[str, tuple[int, str, list[PodSet]]] = {}
        self._reads: dict[str, _Read] = {}
        # Workloads of one shape (a sweep's trials, a burst of one job) share one list: the
        # core works out what it needs of a shape once per cycle, not once per Workload.
        self._shapes: dict[str, list[PodSet]] = {}

    def keep(self, uids: set[str]) -> None:
        """Forget the Workloads not in ``uids`` (gone or finished) once they are the most."""
        if len(self._reads) + len(self._pod_sets) > 4 * max(64, len(uids)):
            self._pod_sets = {u: v for u, v in self._pod_sets.items() if u in uids}
            self._reads = {u: v for u, v in self._reads.items() if u in uids}
            shapes = {shape for _, shape, _ in self._pod_sets.values()}
            self._shapes = {k: v for k, v in self._shapes.items() if k in shapes}

    def read(self, wl: Obj) -> _Read:
        meta = wl["metadata"]
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not uid or not version:
            return _read(wl, "")
        known = self._reads.get(uid)
        if known is None or known.version != version:
            known = self._reads[uid] = _read(wl, str(version))
        return known

    def pod_sets(self, wl: Obj) -> list[PodSet]:
        meta = wl["metadata"]
        uid, generation = meta.get("uid") or "", int(meta.get("generation") or 0)
        known = self._pod_sets.get(uid)
        if known is not None and known[0] == generation:
            return known[2]
        shape = json.dumps(wl["spec"]["podSets"], sort_keys=True)
        pod_sets = self._shapes.get(shape)
        if pod_sets is None:
            pod_sets = self._shapes[shape] = [pod_set_of(ps) for ps in wl["spec"]["podSets"]]
        if uid:
            self._pod_sets[uid] = (generation, shape, pod_sets)
        return pod_sets


def _read(wl: Obj, version: str) -> _Read:
    state = workload_state(wl)
    requeue_at = None
    if state is WorkloadState.PENDING:
        requeue_at = epoch(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
    meta, spec = wl["metadata"], wl["spec"]
    return _Read(
        version,
        meta.get("uid") or "",
        workload_key(meta.get("namespace"), meta["name"]),
        state,
        bool(spec.get("active", True)),
        requeue_at,
        (meta.get("namespace"), spec.get("queueName")),
        spec.get("priorityClassName"),
    )


def build_snapshot(
    *,
    nodes: Iterable[Obj],
    flavors: Iterable[Obj],
    topologies: Iterable[Obj],
    cluster_queues: list[Obj],
    cohorts: Iterable[Obj],
    local_queues: Iterable[Obj],
    priority_classes: Iterable[Obj],
    workloads: Iterable[Obj],
    pods: Iterable[Obj],
    now: float,
    memo: SnapshotMemo | None = None,
    namespaces: Iterable[Obj] = (),
    resource_quotas: Iterable[Obj] = (),
) -> Built:
    """The snapshot of these objects. ``memo`` keeps what was read of each Workload between
    cycles (see :class:`SnapshotMemo`). ``namespaces`` give the labels a ClusterQueue's
    namespaceSelector matches; ``resource_quotas`` become namespace quotas."""
    memo = memo if memo is not None else SnapshotMemo()
    flavor_objs = list(flavors)
    inactive = _inactive_queues(cluster_queues, {f["metadata"]["name"] for f in flavor_objs})
    queues = [q for q in cluster_queues if q["metadata"]["name"] not in inactive]
    queue_objs = {q["metadata"]["name"]: q for q in queues}
    local = {(q["metadata"].get("namespace") or "", q["metadata"]["name"]): q for q in local_queues}
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in namespaces}
    never_preempt = {p["metadata"]["name"] for p in priority_classes if p.get("preemptionPolicy") == "Never"}
    holding: list[Obj] = []
    built = Built(snapshot=Snapshot(cluster_queues=build_cluster_queues(queues)))
    snap = built.snapshot
    pods = list(pods)
    running: dict[tuple[str, str], int] | None = None
    uids: set[str] = set()
    queue_of: dict[tuple[str | None, str | None], tuple[str | None, tuple[str, str] | None]] = {}
    # Everything this loop asks of a Workload is read once per resourceVersion (memo.read):
    # a long queue is walked every cycle.
    for wl in workloads:
        read = memo.read(wl)
        uids.add(read.uid)
        state = read.state
        key = read.key
        if state in (WorkloadState.ADMITTED, WorkloadState.EVICTING):
            holding.append(wl)
            admitted = _admitted(wl, state is WorkloadState.EVICTING)
            if admitted is not None:
                built.workloads[key] = wl
                snap.admitted.append(admitted)
                if state is WorkloadState.ADMITTED and below_full_size(wl):
                    running = running_pods(pods) if running is None else running
                    _growth(built, wl, admitted, running.get(key, 0), now)
            continue
        if state is not WorkloadState.PENDING or not read.active:
            continue
        requeue_at = read.requeue_at
        if requeue_at is not None and requeue_at > now:
            built.next_requeue = min(built.next_requeue or requeue_at, requeue_at)
            continue
        resolved = queue_of.get(read.asks)
        if resolved is None:  # the same answer for every Workload naming that queue there
            resolved = queue_of[read.asks] = resolve_queue(wl, local, queue_objs, inactive, labels)
        queue, problem = resolved
        if problem is not None:
            built.unqueueable.append(Unqueueable(wl, *problem))
            continue
        built.workloads[key] = wl
        made_for = (queue or "", read.priority_class not in never_preempt)
        if read.pending is None or read.pending_for != made_for:
            read.pending, read.pending_for = _pending(wl, *made_for, memo), made_for
        snap.pending.append(read.pending)
    memo.keep(uids)
    snap.nodes = build_nodes(nodes, holding, pods)
    # A workload admitted by a queue since deleted, or placed on a node since gone, still
    # charges the nodes above; the cycle cannot account it to a queue or preempt it.
    known_nodes = {n.name for n in snap.nodes}
    snap.admitted = [
        a
        for a in snap.admitted
        if a.queue in queue_objs and all(p.node in known_nodes for ps in a.pod_sets for p in ps.pods)
    ]
    snap.flavors = build_flavors(flavor_objs, topologies)
    snap.cohorts = build_cohorts(cohorts)
    snap.namespace_quotas = [q for q in map(namespace_quota, resource_quotas) if q.hard]
    return built


def _growth(built: Built, wl: Obj, admitted: AdmittedWorkload, running: int, now: float) -> None:
    """An elastic Workload below its full size: a grower, or held with the reason."""
    g = growth(wl, running, now, pod_set_of)
    admitted.grow = g.grow
    if g.held is not None:
        built.held.append((wl, *g.held))
    if g.wake_at is not None:
        built.next_grow = min(built.next_grow or g.wake_at, g.wake_at)


def admitted_view(wl: Obj) -> AdmittedWorkload | None:
    """A Workload holding an admission as the scheduler sees it (None when it holds none)."""
    state = workload_state(wl)
    if state not in (WorkloadState.ADMITTED, WorkloadState.EVICTING):
        return None
    return _admitted(wl, state is WorkloadState.EVICTING)


def namespace_quota(obj: Obj) -> NamespaceQuota:
    """A ResourceQuota as the scheduler's :class:`NamespaceQuota` (the keys Muster enforces)."""
    hard: dict[str, int] = {}
    keys: dict[str, str] = {}
    for key, value in ((obj.get("spec") or {}).get("hard") or {}).items():
        res = enforced_quota_resource(key)
        if res is None:
            continue
        amount = to_int(value) if res == "pods" else to_units(res, value)
        if res not in hard or amount < hard[res]:  # requests.cpu and cpu both: the tighter holds
            hard[res], keys[res] = amount, key
    meta = obj["metadata"]
    return NamespaceQuota(meta.get("namespace") or "default", meta["name"], hard, keys)


def resolve_queue(
    wl: Obj,
    local: dict[tuple[str, str], Obj],
    cluster: dict[str, Obj],
    inactive: dict[str, str] | None = None,
    namespace_labels: dict[str, dict[str, str]] | None = None,
) -> tuple[str | None, tuple[str, str] | None]:
    """The ClusterQueue of ``wl``, or (None, (reason code, message)) when it has none now.
    A namespaceSelector matches the Namespace's labels (``namespace_labels``) and its name."""
    ns = wl["metadata"].get("namespace") or "default"
    named = wl["spec"].get("queueName")
    lq = local.get((ns, named or DEFAULT_QUEUE))
    if lq is None:
        if named:
            return None, (
                "Inadmissible",
                f"LocalQueue {named} does not exist in namespace {ns}; create it or change queueName",
            )
        return None, (
            "Inadmissible",
            f"the job names no queue and namespace {ns} has no LocalQueue named {DEFAULT_QUEUE}; "
            "set queueName or create a LocalQueue named default",
        )
    lq_name = lq["metadata"]["name"]
    if ((lq.get("spec") or {}).get("stopPolicy") or "None") != "None":
        return None, ("QueueStopped", f"LocalQueue {lq_name} is stopped (stopPolicy)")
    cq_name = lq["spec"]["clusterQueue"]
    if inactive and cq_name in inactive:
        return None, ("Inadmissible", f"ClusterQueue {cq_name} is inactive: {inactive[cq_name]}")
    cq = cluster.get(cq_name)
    if cq is None:
        return None, (
            "Inadmissible",
            f"ClusterQueue {cq_name} (behind LocalQueue {ns}/{lq_name}) does not exist",
        )
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if selector and not _selects(
        selector, {**(namespace_labels or {}).get(ns, {}), NAMESPACE_NAME_LABEL: ns}
    ):
        return None, (
            "Inadmissible",
            f"ClusterQueue {cq_name} does not admit workloads of namespace {ns} (namespaceSelector)",
        )
    return cq_name, None


def _inactive_queues(queues: Iterable[Obj], flavors: set[str]) -> dict[str, str]:
    """ClusterQueues that name a ResourceFlavor that does not exist, and why (Kueue keeps
    such a queue inactive until the flavor appears)."""
    out = {}
    for q in queues:
        named = [
            f["name"]
            for g in (q.get("spec") or {}).get("resourceGroups") or ()
            for f in g.get("flavors") or ()
        ]
        missing = sorted(set(named) - flavors)
        if missing:
            out[q["metadata"]["name"]] = f"ResourceFlavor {', '.join(missing)} does not exist"
    return out


def _selects(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for req in selector.get("matchExpressions") or ():
        value = labels.get(req["key"])
        op, values = req["operator"], req.get("values") or []
        if (
            (op == "In" and value not in values)
            or (op == "NotIn" and value in values)
            or (op == "Exists" and value is None)
            or (op == "DoesNotExist" and value is not None)
        ):
            return False
    return True


def _pending(wl: Obj, queue: str, can_preempt: bool, memo: SnapshotMemo) -> PendingWorkload:
    spec = wl["spec"]
    meta = wl["metadata"]
    requeued = (
        transition_time(wl, "Requeued") if is_true(wl, "Requeued") and not requeue_keeps_place(wl) else None
    )
    return PendingWorkload(
        name=meta["name"],
        namespace=meta.get("namespace") or "default",
        queue=queue,
        pod_sets=memo.pod_sets(wl),
        priority=int(spec.get("priority") or 0),
        creation_time=epoch(wl["metadata"].get("creationTimestamp")) or 0.0,
        eviction_time=requeued,
        can_preempt=can_preempt,
    )


def pod_set_of(ps: Obj) -> PodSet:
    """A Workload's pod set (wire form) as the scheduler sees it."""
    requests = ps.get("requests") or {}
    demand = gpu_demand(requests)
    topology = ps.get("topologyRequest") or {}
    node_affinity = ((ps.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    return PodSet(
        name=ps.get("name", "main"),
        count=int(ps["count"]),
        requests=request_units(requests),
        gpus=demand.devices,
        gpu_milli=demand.milli or GPU_MILLI,
        gpu_memory=demand.memory,
        min_count=ps.get("minCount"),
        gpu_models=tuple(ps.get("gpuModels") or ()),
        node_selector=dict(ps.get("nodeSelector") or {}),
        node_affinity=tuple(
            NodeSelectorTerm(
                tuple(
                    NodeSelectorRequirement(e["key"], e["operator"], tuple(e.get("values") or ()))
                    for e in term.get("matchExpressions") or ()
                )
            )
            for term in node_affinity.get("nodeSelectorTerms") or ()
        ),
        tolerations=tolerations(ps.get("tolerations")),
        topology_required=topology.get("required"),
        topology_preferred=topology.get("preferred"),
        anti_affinity=bool(ps.get("podAntiAffinity")),
    )


def _admitted(wl: Obj, evicting: bool) -> AdmittedWorkload | None:
    spec = wl["spec"]
    admission = wl["status"]["admission"]
    specs = {ps.get("name", "main"): ps for ps in spec["podSets"]}
    pod_sets = []
    for a in admission.get("podSetAssignments") or ():
        ps = specs.get(a["name"])
        if ps is None:
            continue
        requests = ps.get("requests") or {}
        demand = gpu_demand(requests)
        pod_sets.append(
            AdmittedPodSet(
                name=a["name"],
                count=int(a["count"]),
                requests=request_units(requests),
                gpus=demand.devices,
                gpu_milli=demand.milli or GPU_MILLI,
                flavors=dict(a.get("flavors") or {}),
                pods=tuple(
                    PodBinding(p["node"], tuple(p.get("gpus") or ()), p.get("gpuMilli"))
                    for p in a.get("pods") or ()
                ),
            )
        )
    return AdmittedWorkload(
        name=wl["metadata"]["name"],
        namespace=wl["metadata"].get("namespace") or "default",
        queue=admission["clusterQueue"],
        pod_sets=pod_sets,
        priority=int(spec.get("priority") or 0),
        creation_time=epoch(wl["metadata"].get("creationTimestamp")) or 0.0,
        admission_time=transition_time(wl, "QuotaReserved") or 0.0,
        preemptible=bool(spec.get("preemptible", True)),
        evicted=evicting,
    )
