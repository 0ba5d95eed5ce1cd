"""The cluster half of the scheduler snapshot: Nodes with what their pods use, flavors,
cluster queues and cohorts, converted from store objects to :mod:`muster.scheduler` types.

A node's usage is derived, never stored: every Workload that holds an admission (admitted or
being evicted) charges its placements (node, requests, GPU devices), and every other pod that
has not ended charges what it asks (the pods of a finished job that are still stopping, pods
no Workload accounts for). So GPUs are reserved from the moment of admission, before the pods
exist, and stay reserved until the last process is gone. What the node's runtime reports as
held by things Muster did not create (``status.usedByOthers``: kube-scheduler's pods,
daemonsets) is charged last, its whole GPUs on the devices Muster left free.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from muster.api.common import GPU, GPU_MEMORY
from muster.api.gpusharing import gpu_replicas
from muster.api.labels import WORKLOAD_LABEL
from muster.api.lifecycle import is_final
from muster.api.podspec import PodSpec
from muster.api.quantity import Quantity
from muster.api.resources import gpu_demand, pod_requests
from muster.scheduler import (
    GPU_MILLI,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    Node,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    to_units,
)

__all__ = [
    "build_cluster_queues",
    "build_cohorts",
    "build_flavors",
    "build_nodes",
    "pod_charge",
    "request_units",
    "scheduler_node",
    "taints",
    "tolerations",
]

Obj = dict[str, Any]
# (requests without GPUs in units, GPU device indices, milli per device)
Charge = tuple[dict[str, int], tuple[int, ...], int]


def request_units(requests: dict[str, Any]) -> dict[str, int]:
    """Non-GPU requests in scheduler units (GPUs are devices, not a node resource)."""
    return {r: to_units(r, q) for r, q in requests.items() if r not in (GPU, GPU_MEMORY) and to_units(r, q)}


def pod_charge(pod: Obj) -> Charge:
    """What a running (or starting) pod holds on its node."""
    spec = PodSpec.model_validate(
        {k: v for k, v in pod["spec"].items() if k not in ("gpus", "gpuMilli", "gpuMemory")}
    )
    requests = {r: str(q) for r, q in pod_requests(spec).items()}
    return (
        request_units(requests),
        tuple(pod["spec"].get("gpus") or ()),
        int(pod["spec"].get("gpuMilli") or GPU_MILLI),
    )


def build_nodes(nodes: Iterable[Obj], holding: Iterable[Obj], pods: Iterable[Obj]) -> list[Node]:
    """Scheduler nodes, charged with the placements of ``holding`` Workloads (those with an
    admission) and with every unfinished pod whose Workload holds none."""
    out: dict[str, Node] = {}
    free: dict[str, list[int]] = {}
    others: dict[str, dict[str, str]] = {}
    for obj in nodes:
        node = scheduler_node(obj)
        out[node.name] = node
        free[node.name] = [GPU_MILLI] * node.gpus
        used = (obj.get("status") or {}).get("usedByOthers")
        if used:
            others[node.name] = used
    held: set[tuple[str, str]] = set()
    for wl in holding:
        held.add((wl["metadata"].get("namespace") or "", wl["metadata"]["name"]))
        for charge_node, charge in _placements(wl):
            _charge(out, free, charge_node, charge)
    for pod in pods:
        node_name = pod["spec"].get("nodeName")
        owner = (pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
        if not node_name or is_final(pod) or (pod["metadata"].get("namespace") or "", owner) in held:
            continue
        _charge(out, free, node_name, pod_charge(pod))
    for name, used in others.items():
        _charge_others(out[name], free[name], used)
    for name, node in out.items():
        node.gpu_free = tuple(max(0, f) for f in free[name])
    return list(out.values())


def _placements(wl: Obj) -> list[tuple[str, Charge]]:
    specs = {ps.get("name", "main"): ps for ps in wl["spec"]["podSets"]}
    out = []
    for assignment in (wl.get("status") or {}).get("admission", {}).get("podSetAssignments") or []:
        spec = specs.get(assignment["name"])
        if spec is None:
            continue
        requests = spec.get("requests") or {}
        demand = gpu_demand(requests)
        units = request_units(requests)
        for pod in assignment.get("pods") or []:
            milli = int(pod.get("gpuMilli") or demand.milli or GPU_MILLI)
            out.append((pod["node"], (units, tuple(pod.get("gpus") or ()), milli)))
    return out


def _charge(nodes: dict[str, Node], free: dict[str, list[int]], name: str, charge: Charge) -> None:
    node = nodes.get(name)
    if node is None:
        return
    requests, gpus, milli = charge
    for resource, amount in requests.items():
        node.used[resource] = node.used.get(resource, 0) + amount
    for g in gpus:
        if 0 <= g < len(free[name]):
            free[name][g] -= milli


def _charge_others(node: Node, free: list[int], used: dict[str, str]) -> None:
    """Charge what pods Muster did not create hold. Their GPUs are whole devices whose indices
    the node's device plugin chose and Muster does not know: the freest devices are taken."""
    for resource, amount in used.items():
        if resource == GPU:
            continue
        node.used[resource] = node.used.get(resource, 0) + to_units(resource, amount)
    gpus = Quantity.parse(used.get(GPU, "0")).as_int()
    for index in sorted(range(len(free)), key=lambda i: (-free[i], i))[:gpus]:
        free[index] = 0


def scheduler_node(obj: Obj) -> Node:
    """A Node wire dict as the scheduler sees it (before any pod is charged)."""
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    devices = sorted(status.get("gpus") or [], key=lambda g: g["index"])
    count = (max(g["index"] for g in devices) + 1) if devices else 0
    healthy = [False] * count
    for g in devices:
        # A GPU in MIG mode is offered as its slices (extended resources), never whole.
        healthy[g["index"]] = g.get("health", "Healthy") == "Healthy" and not g.get("migMode")
    first = devices[0] if devices else {}
    labels = dict(obj["metadata"].get("labels") or {})
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return Node(
        name=obj["metadata"]["name"],
        allocatable={r: to_units(r, q) for r, q in allocatable.items() if r != GPU},
        labels=labels,
        taints=taints(spec.get("taints")),
        gpus=count,
        gpu_model=labels.get("nvidia.com/gpu.product", first.get("model", "")),
        gpu_memory=Quantity.parse(first.get("memory", "0")).as_int() if first else 0,
        gpu_replicas=gpu_replicas(obj),
        gpu_healthy=tuple(healthy),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


def taints(items: Iterable[Obj] | None) -> tuple[Taint, ...]:
    return tuple(Taint(t["key"], t.get("value") or "", t.get("effect") or "NoSchedule") for t in items or ())


def tolerations(items: Iterable[Obj] | None) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "", t.get("effect") or ""
        )
        for t in items or ()
    )


def build_flavors(flavors: Iterable[Obj], topologies: Iterable[Obj]) -> list[Flavor]:
    levels = {
        t["metadata"]["name"]: tuple(level["nodeLabel"] for level in t["spec"]["levels"]) for t in topologies
    }
    out = []
    for f in flavors:
        spec = f.get("spec") or {}
        out.append(
            Flavor(
                name=f["metadata"]["name"],
                node_labels=dict(spec.get("nodeLabels") or {}),
                node_taints=taints(spec.get("nodeTaints")),
                tolerations=tolerations(spec.get("tolerations")),
                topology_levels=levels.get(spec.get("topologyName") or "", ()),
            )
        )
    return out


def build_cluster_queues(queues: Iterable[Obj]) -> list[ClusterQueue]:
    out = []
    for q in queues:
        spec = q.get("spec") or {}
        preemption = spec.get("preemption") or {}
        borrow = preemption.get("borrowWithinCohort") or {}
        fungibility = spec.get("flavorFungibility") or {}
        out.append(
            ClusterQueue(
                name=q["metadata"]["name"],
                resource_groups=_groups(spec.get("resourceGroups")),
                cohort=spec.get("cohort"),
                queueing_strategy=spec.get("queueingStrategy") or "BestEffortFIFO",
                preemption=PreemptionConfig(
                    within_cluster_queue=preemption.get("withinClusterQueue") or "Never",
                    reclaim_within_cohort=preemption.get("reclaimWithinCohort") or "Never",
                    borrow_within_cohort=borrow.get("policy") or "Never",
                    max_priority_threshold=borrow.get("maxPriorityThreshold"),
                ),
                fair_weight=_weight(spec),
                when_can_borrow=fungibility.get("whenCanBorrow") or "MayStopSearch",
                when_can_preempt=fungibility.get("whenCanPreempt") or "TryNextFlavor",
                stopped=(spec.get("stopPolicy") or "None") != "None",
            )
        )
    return out


def build_cohorts(cohorts: Iterable[Obj]) -> list[Cohort]:
    return [
        Cohort(
            name=c["metadata"]["name"],
            parent=(c.get("spec") or {}).get("parentName"),
            resource_groups=_groups((c.get("spec") or {}).get("resourceGroups")),
            fair_weight=_weight(c.get("spec") or {}),
        )
        for c in cohorts
    ]


def _groups(groups: Iterable[Obj] | None) -> list[ResourceGroup]:
    out = []
    for g in groups or ():
        flavors = []
        for f in g.get("flavors") or ():
            quotas = {}
            for r in f.get("resources") or ():
                name = r["name"]
                quotas[name] = ResourceQuota(
                    nominal=to_units(name, r["nominalQuota"]),
                    borrowing_limit=None
                    if r.get("borrowingLimit") is None
                    else to_units(name, r["borrowingLimit"]),
                    lending_limit=None
                    if r.get("lendingLimit") is None
                    else to_units(name, r["lendingLimit"]),
                )
            flavors.append(FlavorQuotas(f["name"], quotas))
        out.append(ResourceGroup(covered_resources=tuple(g["coveredResources"]), flavors=flavors))
    return out


def _weight(spec: Obj) -> float:
    weight = (spec.get("fairSharing") or {}).get("weight")
    return float(Quantity.parse(weight).milli()) / 1000 if weight is not None else 1.0
