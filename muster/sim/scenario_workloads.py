"""Scenario workloads: admitted (with their placements charged to the nodes) and pending,
plus validation of the ``expect`` block. Split from :mod:`muster.sim.scenario` by phase."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from muster.scheduler import (
    GPU,
    GPU_MILLI,
    AdmittedPodSet,
    AdmittedWorkload,
    ClusterQueue,
    Node,
    PendingWorkload,
    PodBinding,
    PodSet,
)
from muster.scheduler.reasons import CODES

if TYPE_CHECKING:
    from muster.sim.scenario import Validator

__all__ = ["EXPECT_KEYS", "PREEMPTION_REASONS", "check_expect_block", "parse_workloads"]

PREEMPTION_REASONS = (
    "InClusterQueue",
    "InCohortReclamation",
    "InCohortFairSharing",
    "InCohortReclaimWhileBorrowing",
)
EXPECT_KEYS = (
    "admitted",
    "preempted",
    "pending",
    "reasons",
    "preemptionReasons",
    "counts",
    "nodes",
    "domains",
    "devices",
    "resized",
    "resizedNodes",
    "held",
)

_ADMITTED = (
    "name",
    "namespace",
    "queue",
    "priority",
    "creationTime",
    "admissionTime",
    "preemptible",
    "flavors",
    "podSets",
)
_PENDING = ("name", "namespace", "queue", "priority", "creationTime", "podSets")
_ADMITTED_PS = ("name", "count", "maxCount", "requests", "gpuMilli", "placement")
_PENDING_PS = (
    "name",
    "count",
    "minCount",
    "requests",
    "gpuMilli",
    "gpuModels",
    "nodeSelector",
    "tolerations",
    "topology",
)


def parse_workloads(
    v: Validator, doc: dict, queues: dict[str, ClusterQueue], nodes: dict[str, Node] | None
) -> tuple[list[AdmittedWorkload], list[PendingWorkload]]:
    """Admitted then pending workloads; positions in the file are their default times.
    With nodes, each admitted pod is charged to its node (usage and GPU devices)."""
    state = _NodeState(nodes) if nodes is not None else None
    position = 0
    admitted = []
    for i, w in enumerate(v.seq(doc.get("admitted"), "admitted")):
        admitted.append(_admitted(v, w, f"admitted[{i}]", position, queues, state))
        position += 1
    pending = []
    for i, w in enumerate(v.seq(doc.get("pending"), "pending")):
        pending.append(_pending(v, w, f"pending[{i}]", position, queues))
        position += 1
    if state is not None:
        state.finish()
    return [w for w in admitted if w], [w for w in pending if w]  # type: ignore[misc]


class _NodeState:
    """Usage and per-device free milli of nodes while admitted pods are charged."""

    def __init__(self, nodes: dict[str, Node]) -> None:
        self.nodes = nodes
        self.free = {n: list(node.gpu_free) for n, node in nodes.items()}

    def charge(
        self,
        v: Validator,
        path: str,
        node: Node,
        requests: dict[str, int],
        devices: tuple[int, ...],
        milli: int,
    ) -> None:
        for res, val in requests.items():
            used = node.used.get(res, 0) + val
            if used > node.allocatable.get(res, 0):
                v.err(
                    path,
                    f"overcommits node {node.name} on {res}",
                    hint="fix the placement or the node capacity",
                )
            node.used[res] = used
        free = self.free[node.name]
        for d in devices:
            if not 0 <= d < len(free):
                v.err(path, f"node {node.name} has no GPU {d}", d)
            elif free[d] < milli:
                v.err(path, f"GPU {d} of node {node.name} has only {free[d]} milli free", milli)
            else:
                free[d] -= milli

    def lowest_free(self, node: Node, gpus: int, milli: int) -> tuple[int, ...] | None:
        free = self.free[node.name]
        if milli >= GPU_MILLI:
            picked = [d for d, f in enumerate(free) if f >= GPU_MILLI][:gpus]
        else:
            picked = [d for d, f in enumerate(free) if f >= milli][:1]
        return tuple(picked) if len(picked) == gpus else None

    def finish(self) -> None:
        for name, node in self.nodes.items():
            node.gpu_free = tuple(self.free[name])


def _common(
    v: Validator, w: dict, path: str, queues: dict[str, ClusterQueue]
) -> tuple[str | None, str, ClusterQueue | None]:
    name = v.string(w.get("name"), f"{path}.name", required=True)
    ns = v.string(w.get("namespace", "default"), f"{path}.namespace") or "default"
    qname = v.string(w.get("queue"), f"{path}.queue", required=True)
    queue = queues.get(qname) if qname else None
    if qname and queue is None:
        v.err(f"{path}.queue", "names an unknown cluster queue", qname, hint=f"queues: {', '.join(queues)}")
    return name, ns, queue


def _identity(
    v: Validator, w: dict, path: str, name: str, ns: str, queue: ClusterQueue, position: int
) -> dict[str, Any]:
    """Fields admitted and pending workloads share; the position is the default time."""
    return {
        "name": name,
        "queue": queue.name,
        "namespace": ns,
        "priority": v.integer(w.get("priority"), f"{path}.priority", 0) or 0,
        "creation_time": v.number(w.get("creationTime"), f"{path}.creationTime", float(position)),
    }


def _pod_sets(v: Validator, w: dict, path: str, allowed: tuple[str, ...]) -> Iterator[tuple]:
    """Each valid pod set: (path, raw mapping, name, count, (requests, GPUs, milli))."""
    names: list[str] = []
    for j, ps in enumerate(v.seq(w.get("podSets"), f"{path}.podSets", required=True)):
        pp = f"{path}.podSets[{j}]"
        ps = v.mapping(ps, pp)
        v.keys(ps, pp, allowed)
        psname = v.string(ps.get("name", "main"), f"{pp}.name", required=True) or "main"
        names.append(psname)
        count = v.integer(ps.get("count"), f"{pp}.count", minimum=1)
        if count is None:
            v.err(f"{pp}.count", "required field is missing")
            continue
        yield pp, ps, psname, count, v.requests(ps.get("requests"), f"{pp}.requests", ps.get("gpuMilli"))
    v.unique(names, f"{path}.podSets", "pod set")


def _admitted(
    v: Validator, w: Any, path: str, position: int, queues: dict[str, ClusterQueue], state: _NodeState | None
) -> AdmittedWorkload | None:
    w = v.mapping(w, path)
    v.keys(w, path, _ADMITTED)
    name, ns, queue = _common(v, w, path, queues)
    flavors_given = v.labels(w.get("flavors"), f"{path}.flavors")
    pod_sets = []
    grow = []  # an elastic pod set (maxCount) may grow to its full size
    for pp, ps, psname, count, (requests, gpus, milli) in _pod_sets(v, w, path, _ADMITTED_PS):
        flavors = _flavors(v, queue, requests, gpus, flavors_given, path) if queue else {}
        pods = _bindings(v, ps.get("placement"), f"{pp}.placement", count, requests, gpus, milli, state)
        pod_sets.append(AdmittedPodSet(psname, count, requests, gpus, milli, flavors, pods))
        most = v.integer(ps.get("maxCount"), f"{pp}.maxCount", minimum=1)
        if most is not None and most < count:
            v.err(f"{pp}.maxCount", f"must be >= count ({count})", most)
        elif most is not None:
            grow.append(PodSet(psname, most, requests, gpus, milli, min_count=count))
    if not name or queue is None:
        return None
    return AdmittedWorkload(
        **_identity(v, w, path, name, ns, queue, position),
        pod_sets=pod_sets,
        grow=tuple(grow),
        admission_time=v.number(w.get("admissionTime"), f"{path}.admissionTime", float(position)),
        preemptible=v.boolean(w.get("preemptible"), f"{path}.preemptible", True),
    )


def _flavors(
    v: Validator, queue: ClusterQueue, requests: dict[str, int], gpus: int, given: dict[str, str], path: str
) -> dict[str, str]:
    """resource -> flavor for an admitted pod set: as given, else the queue's first flavor."""
    out = {}
    wanted = list(requests) + ([GPU] if gpus else [])
    for res in wanted:
        group = next((g for g in queue.resource_groups if res in g.covered_resources), None)
        if group is None:
            v.err(f"{path}.podSets", f"requests {res}, which cluster queue {queue.name} has no quota for")
            continue
        choices = [f.name for f in group.flavors]
        flavor = given.get(res, choices[0])
        if flavor not in choices:
            v.err(
                f"{path}.flavors.{res}",
                f"must be a flavor of cluster queue {queue.name} for {res}",
                flavor,
                hint=", ".join(choices),
            )
            continue
        out[res] = flavor
    return out


def _bindings(
    v: Validator,
    placement: Any,
    path: str,
    count: int,
    requests: dict[str, int],
    gpus: int,
    milli: int,
    state: _NodeState | None,
) -> tuple[PodBinding, ...]:
    if state is None:
        if placement is not None:
            v.err(path, "needs nodes: a scenario without nodes places nothing")
        return ()
    if placement is None:
        v.err(path, "required when the scenario has nodes")
        return ()
    pods: list[PodBinding] = []
    for k, entry in enumerate(v.seq(placement, path)):
        ep = f"{path}[{k}]"
        entry = v.mapping(entry, ep)
        v.keys(entry, ep, ("node", "pods", "gpus"))
        node_name = v.string(entry.get("node"), f"{ep}.node", required=True)
        node = state.nodes.get(node_name or "")
        if node_name and node is None:
            v.err(f"{ep}.node", "names an unknown node", node_name)
            continue
        n = v.integer(entry.get("pods"), f"{ep}.pods", 1, minimum=1) or 0
        devices = v.seq(entry.get("gpus"), f"{ep}.gpus")
        if devices and len(devices) != n:
            v.err(f"{ep}.gpus", f"must list device indices for each of the {n} pods", len(devices))
            continue
        if node is None:
            continue
        for i in range(n):
            if devices:
                devs = devices[i]
                if (
                    not isinstance(devs, list)
                    or not all(isinstance(d, int) for d in devs)
                    or len(devs) != gpus
                ):
                    v.err(f"{ep}.gpus[{i}]", f"must list {gpus} device indices", devs)
                    continue
                chosen: tuple[int, ...] | None = tuple(devs)
            else:
                chosen = state.lowest_free(node, gpus, milli) if gpus else ()
                if chosen is None:
                    v.err(ep, f"node {node.name} has no free GPUs left for pod {i}")
                    continue
            state.charge(v, ep, node, requests, chosen, milli)  # type: ignore[arg-type]
            pods.append(PodBinding(node.name, chosen))  # type: ignore[arg-type]
    if len(pods) != count and not v.errors:
        v.err(path, f"places {len(pods)} pods but the pod set has count {count}")
    return tuple(pods)


def _pending(
    v: Validator, w: Any, path: str, position: int, queues: dict[str, ClusterQueue]
) -> PendingWorkload | None:
    w = v.mapping(w, path)
    v.keys(w, path, _PENDING)
    name, ns, queue = _common(v, w, path, queues)
    pod_sets = []
    for pp, ps, psname, count, (requests, gpus, milli) in _pod_sets(v, w, path, _PENDING_PS):
        min_count = v.integer(ps.get("minCount"), f"{pp}.minCount", minimum=1)
        if min_count is not None and min_count > count:
            v.err(f"{pp}.minCount", f"must be <= count ({count})", min_count)
        models = v.seq(ps.get("gpuModels"), f"{pp}.gpuModels")
        for k, m in enumerate(models):
            v.string(m, f"{pp}.gpuModels[{k}]", required=True)
        topo = v.mapping(ps.get("topology"), f"{pp}.topology")
        v.keys(topo, f"{pp}.topology", ("required", "preferred"))
        if len(topo) > 1:
            v.err(f"{pp}.topology", "set either required or preferred, not both")
        required = v.string(topo.get("required"), f"{pp}.topology.required")
        preferred = v.string(topo.get("preferred"), f"{pp}.topology.preferred")
        pod_sets.append(
            PodSet(
                name=psname,
                count=count,
                requests=requests,
                gpus=gpus,
                gpu_milli=milli,
                min_count=min_count,
                gpu_models=tuple(str(m) for m in models),
                node_selector=v.labels(ps.get("nodeSelector"), f"{pp}.nodeSelector"),
                tolerations=v.tolerations(ps.get("tolerations"), f"{pp}.tolerations"),
                topology_required=required,
                topology_preferred=preferred,
            )
        )
    if not name or queue is None:
        return None
    return PendingWorkload(**_identity(v, w, path, name, ns, queue, position), pod_sets=pod_sets)


def check_expect_block(v: Validator, expect: Any) -> None:
    """Validate the shape of ``expect`` (its names are checked against the decisions)."""
    e = v.mapping(expect, "expect")
    v.keys(e, "expect", EXPECT_KEYS)
    for key in ("admitted", "preempted", "pending"):
        for i, n in enumerate(v.seq(e.get(key), f"expect.{key}")):
            v.string(n, f"expect.{key}[{i}]", required=True)
    for name, code in v.mapping(e.get("reasons"), "expect.reasons").items():
        v.choice(code, f"expect.reasons.{name}", CODES, "")
    for name, code in v.mapping(e.get("preemptionReasons"), "expect.preemptionReasons").items():
        v.choice(code, f"expect.preemptionReasons.{name}", PREEMPTION_REASONS, "")
    for name, code in v.mapping(e.get("held"), "expect.held").items():
        v.string(code, f"expect.held.{name}", required=True)
    for key, depth in (
        ("counts", 2),
        ("nodes", 3),
        ("domains", 4),
        ("devices", 3),
        ("resized", 2),
        ("resizedNodes", 3),
    ):
        _nested(v, e.get(key), f"expect.{key}", depth, devices=key == "devices")


def _nested(v: Validator, d: Any, path: str, depth: int, devices: bool) -> None:
    if depth == 0:
        if devices:
            ok = isinstance(d, list) and all(
                isinstance(x, list) and all(isinstance(i, int) for i in x) for x in d
            )
            if not ok:
                v.err(path, "must be a list of device index lists, one per pod", d)
        elif isinstance(d, bool) or not isinstance(d, int):
            v.err(path, "must be an integer", d)
        return
    for k, sub in v.mapping(d, path).items():
        _nested(v, sub, f"{path}.{k}", depth - 1, devices)
