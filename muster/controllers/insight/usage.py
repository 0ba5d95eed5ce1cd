"""Who uses what, computed from the objects alone: allocation per node and per GPU (from the
bound pods that still hold resources) and quota usage per ClusterQueue (from the admitted
Workloads). ``muster top`` prints these; ``muster why`` quotes the quota rows; the
dashboard can serve them as they are. Pure functions over wire dicts: no store, no clock.

A pod holds its node's resources from binding until it is terminal (Succeeded or Failed)
or gone; a pod that is stopping still holds them. A Workload holds quota from admission
until it is Finished or its admission is cleared (an evicted Workload keeps its quota until
its pods are gone, as the control-plane contract says).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

from muster.api.common import GPU
from muster.api.conditions import condition
from muster.api.lifecycle import is_final
from muster.api.pod import BoundPodSpec
from muster.api.quantity import Quantity, QuantityError, amount_of, fmt_amount
from muster.api.resources import pod_requests
from muster.controllers.insight.gpuview import gpu_rows, pod_gpu_milli

__all__ = [
    "GpuHolder",
    "GpuUsage",
    "NodeUsage",
    "QueueUsage",
    "QuotaRow",
    "Usage",
    "cluster_queue_of",
    "gpu_usage",
    "holds_quota",
    "is_finished",
    "is_pending",
    "local_queue_map",
    "node_usage",
    "queue_usage",
    "quota_rows",
    "scheduler_amount",
    "workload_requests",
    "workload_usage",
]

Obj = Mapping[str, Any]
FlavorResource = tuple[str, str]


@dataclass(frozen=True)
class Usage:
    """An amount in use out of a total (``total`` None: no total known)."""

    used: Fraction
    total: Fraction | None

    @property
    def percent(self) -> int | None:
        if not self.total:
            return None
        return round(100 * self.used / self.total)

    def to_dict(self, resource: str) -> dict[str, Any]:
        return {
            "used": fmt_amount(resource, self.used),
            "total": None if self.total is None else fmt_amount(resource, self.total),
            "percent": self.percent,
        }


@dataclass(frozen=True)
class NodeUsage:
    name: str
    ready: str
    unschedulable: bool
    pods: int
    resources: dict[str, Usage]  # cpu, memory, nvidia.com/gpu, and any other allocatable

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ready": self.ready,
            "unschedulable": self.unschedulable,
            "pods": self.pods,
            "resources": {r: u.to_dict(r) for r, u in self.resources.items()},
        }


@dataclass(frozen=True)
class GpuHolder:
    pod: str  # namespace/name
    milli: int  # 1000 for a whole GPU


@dataclass(frozen=True)
class GpuUsage:
    node: str
    index: int
    model: str
    memory: str
    health: str
    holders: tuple[GpuHolder, ...]

    @property
    def used_milli(self) -> int:
        return sum(h.milli for h in self.holders)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "holders": [asdict(h) for h in self.holders], "usedMilli": self.used_milli}


@dataclass(frozen=True)
class QuotaRow:
    """One flavor/resource of a ClusterQueue: what its admitted Workloads use against quota."""

    flavor: str
    resource: str
    used: Fraction
    nominal: Fraction
    borrowing_limit: Fraction | None  # None: no limit (with a cohort) or no borrowing
    lending_limit: Fraction | None

    @property
    def borrowed(self) -> Fraction:
        return max(Fraction(0), self.used - self.nominal)

    def to_dict(self) -> dict[str, Any]:
        r = self.resource
        return {
            "flavor": self.flavor,
            "resource": r,
            "used": fmt_amount(r, self.used),
            "nominal": fmt_amount(r, self.nominal),
            "borrowed": fmt_amount(r, self.borrowed),
            "borrowingLimit": None if self.borrowing_limit is None else fmt_amount(r, self.borrowing_limit),
            "lendingLimit": None if self.lending_limit is None else fmt_amount(r, self.lending_limit),
        }


@dataclass(frozen=True)
class QueueUsage:
    name: str
    cohort: str | None
    pending: int
    admitted: int
    rows: tuple[QuotaRow, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cohort": self.cohort,
            "pending": self.pending,
            "admitted": self.admitted,
            "quota": [r.to_dict() for r in self.rows],
        }


# -- nodes and GPUs ------------------------------------------------------------------------


def node_usage(nodes: Iterable[Obj], pods: Iterable[Obj]) -> list[NodeUsage]:
    """Per node (by name): the requests of the pods bound to it that still hold resources,
    against its allocatable; GPUs count shares as fractions of a GPU."""
    by_node = _holding_pods_by_node(pods)
    out = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        status = node.get("status") or {}
        allocatable = {r: amount_of(v) for r, v in (status.get("allocatable") or {}).items()}
        used: dict[str, Fraction] = {}
        for pod in by_node.get(name, []):
            for resource, amount in _pod_node_use(pod).items():
                used[resource] = used.get(resource, Fraction(0)) + amount
        present = set(allocatable) | set(used)
        names = [r for r in ("cpu", "memory", GPU) if r in present]
        names += sorted(present - {"cpu", "memory", GPU})
        resources = {r: Usage(used.get(r, Fraction(0)), allocatable.get(r)) for r in names}
        out.append(
            NodeUsage(
                name=name,
                ready=_condition_status(status, "Ready"),
                unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
                pods=len(by_node.get(name, [])),
                resources=resources,
            )
        )
    return out


def gpu_usage(nodes: Iterable[Obj], pods: Iterable[Obj]) -> list[GpuUsage]:
    """Every GPU of every node, with the pods holding it (whole or a share)."""
    return [
        GpuUsage(
            node=row.node,
            index=row.index,
            model=row.model,
            memory=row.memory,
            health=row.health,
            holders=tuple(GpuHolder(f"{h.namespace}/{h.pod}", h.milli) for h in row.holders),
        )
        for row in gpu_rows(nodes, pods)
    ]


# -- quota -----------------------------------------------------------------------------------


def queue_usage(
    cluster_queues: Iterable[Obj], local_queues: Iterable[Obj], workloads: Iterable[Obj]
) -> list[QueueUsage]:
    """Per ClusterQueue (by name): pending and admitted Workload counts and, per flavor and
    resource of its quota, the usage of its admitted Workloads against nominal quota."""
    lq_map = local_queue_map(local_queues)
    workloads = list(workloads)
    pending: dict[str, int] = {}
    admitted: dict[str, int] = {}
    for wl in workloads:
        if holds_quota(wl):
            cq = wl["status"]["admission"]["clusterQueue"]
            admitted[cq] = admitted.get(cq, 0) + 1
        elif is_pending(wl):
            cq = cluster_queue_of(wl, lq_map)
            if cq is not None:
                pending[cq] = pending.get(cq, 0) + 1
    out = []
    for cq in sorted(cluster_queues, key=lambda c: c["metadata"]["name"]):
        name = cq["metadata"]["name"]
        out.append(
            QueueUsage(
                name=name,
                cohort=(cq.get("spec") or {}).get("cohort"),
                pending=pending.get(name, 0),
                admitted=admitted.get(name, 0),
                rows=tuple(quota_rows(cq, workloads)),
            )
        )
    return out


def quota_rows(cluster_queue: Obj, workloads: Iterable[Obj]) -> list[QuotaRow]:
    """The ClusterQueue's quota per flavor and resource, in spec order, with what its
    admitted Workloads use (usage charged to a flavor the spec no longer lists is shown too,
    with no quota)."""
    name = cluster_queue["metadata"]["name"]
    used: dict[FlavorResource, Fraction] = {}
    for wl in workloads:
        if holds_quota(wl) and wl["status"]["admission"]["clusterQueue"] == name:
            for fr, amount in workload_usage(wl).items():
                used[fr] = used.get(fr, Fraction(0)) + amount
    rows = []
    seen: set[FlavorResource] = set()
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for quota in flavor.get("resources") or []:
                fr = (flavor["name"], quota["name"])
                seen.add(fr)
                rows.append(
                    QuotaRow(
                        flavor=fr[0],
                        resource=fr[1],
                        used=used.get(fr, Fraction(0)),
                        nominal=amount_of(quota.get("nominalQuota")),
                        borrowing_limit=_optional(quota.get("borrowingLimit")),
                        lending_limit=_optional(quota.get("lendingLimit")),
                    )
                )
    for fr in sorted(set(used) - seen):
        rows.append(QuotaRow(fr[0], fr[1], used[fr], Fraction(0), Fraction(0), None))
    return rows


def workload_usage(workload: Obj) -> dict[FlavorResource, Fraction]:
    """The quota an admitted Workload is charged, per (flavor, resource)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    out: dict[FlavorResource, Fraction] = {}
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            fr = (flavors.get(resource, ""), resource)
            out[fr] = out.get(fr, Fraction(0)) + amount_of(amount)
    return out


def workload_requests(workload: Obj) -> dict[str, Fraction]:
    """What a Workload asks for in all: the sum over pod sets of count × per-pod requests."""
    out: dict[str, Fraction] = {}
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        count = int(pod_set.get("count") or 0)
        for resource, amount in (pod_set.get("requests") or {}).items():
            out[resource] = out.get(resource, Fraction(0)) + count * amount_of(amount)
    return out


def holds_quota(workload: Obj) -> bool:
    """Admitted (or evicting, its pods not gone yet) and not finished."""
    status = workload.get("status") or {}
    return bool(status.get("admission")) and not is_finished(workload)


def is_finished(workload: Obj) -> bool:
    return _condition_status(workload.get("status") or {}, "Finished") == "True"


def is_pending(workload: Obj) -> bool:
    """Waiting for admission: no admission, not finished, not deactivated."""
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    return not status.get("admission") and not is_finished(workload) and spec.get("active", True)


def cluster_queue_of(workload: Obj, local_queues: Mapping[tuple[str, str], str]) -> str | None:
    """The ClusterQueue a Workload is (or would be) admitted by: its admission's, else the one
    behind its LocalQueue (``default`` when it names none). ``local_queues`` maps
    (namespace, LocalQueue) to ClusterQueue (see :func:`local_queue_map`)."""
    admission = (workload.get("status") or {}).get("admission")
    if admission:
        return admission.get("clusterQueue")
    ns = workload["metadata"].get("namespace") or "default"
    queue = (workload.get("spec") or {}).get("queueName") or "default"
    return local_queues.get((ns, queue))


def local_queue_map(local_queues: Iterable[Obj]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue name) -> ClusterQueue name."""
    return {
        (lq["metadata"].get("namespace") or "default", lq["metadata"]["name"]): lq["spec"]["clusterQueue"]
        for lq in local_queues
    }


def scheduler_amount(resource: str, value: Any) -> str:
    """An amount in the scheduler's units (thousandths of CPUs and GPUs, as pending details
    carry them), for people; None is unlimited."""
    if value is None:
        return "unlimited"
    # Imported here: the scheduler package loads NumPy, which the CLI should not pay for at start.
    from muster.scheduler.snapshot import format_units

    return fmt_amount(resource, Quantity.parse(format_units(resource, int(value))).value)


# -- helpers ---------------------------------------------------------------------------------


def _holding_pods_by_node(pods: Iterable[Obj]) -> dict[str, list[Obj]]:
    out: dict[str, list[Obj]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not is_final(pod):
            out.setdefault(node, []).append(pod)
    return out


def _pod_node_use(pod: Obj) -> dict[str, Fraction]:
    """What a bound pod takes from its node: its effective requests, GPUs as bound."""
    spec = pod.get("spec") or {}
    try:
        requests = pod_requests(BoundPodSpec.model_validate(spec))
    except (ValueError, QuantityError):  # a pod the API would not have stored; count its GPUs only
        requests = {}
    out = {r: q.value for r, q in requests.items()}
    gpus = spec.get("gpus") or []
    if gpus:
        out[GPU] = Fraction(len(gpus) * pod_gpu_milli(pod), 1000)
    return out


def _condition_status(status: Obj, type_: str) -> str:
    found = condition({"status": status}, type_)
    return str(found.get("status") or "Unknown") if found else "Unknown"


def _ref(obj: Obj) -> str:
    return f"{obj['metadata'].get('namespace') or 'default'}/{obj['metadata']['name']}"


def _optional(text: Any) -> Fraction | None:
    return None if text is None else amount_of(text)
