"""Where could a waiting Workload run, and what would let it?

From the cluster's objects (the scheduler's own snapshot of them, built as the scheduler
loop builds it) this module answers, for a Workload that is not admitted:

* **per node**, the first thing that keeps one of its pods off the node, with the node's
  numbers (:func:`node_verdicts`): not ready, cordoned, a taint, labels or GPU model, too few
  GPUs in all, too little CPU or memory, too few free GPUs (and who holds them), or fits;
* **fragmentation** (:func:`fragmentation`): the free GPUs of the nodes that could host its
  pods, how they are spread, the largest free block and where;
* **what would let it in** (:func:`fits_when`): the scheduler core run on the snapshot
  with only this Workload waiting, first as it is, then with running Workloads taken away one
  at a time (those with a deadline soonest first, then the lowest priority, the oldest
  admission), until it is admitted; the set is then pruned to the ones that matter. "fits
  when default/small finishes", or "cannot fit even on an empty cluster".

Everything is computed from objects the caller fetched (:class:`WhyContext`); the scheduler
package is imported on first use (it loads NumPy, which ``muster`` commands that never ask
why should not pay for).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from muster.api.conditions import is_true
from muster.controllers.insight.explain.facts import (
    FitsWhen,
    Fragmentation,
    NodeVerdict,
    Obj,
    Placement,
    WhyContext,
)
from muster.controllers.insight.usage import holds_quota, is_pending

if TYPE_CHECKING:
    from muster.controllers.scheduling.snapshot import Built
    from muster.scheduler import Flavor, Node, PodSet

__all__ = [
    "WhatIf",
    "fits_when",
    "fragmentation",
    "node_verdicts",
    "placement",
    "snapshot_of",
    "workload_ref",
]

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_CANDIDATES = 8  # running Workloads the what-if tries taking away
_BLOCKING = ("NoSchedule", "NoExecute")
# Verdict codes in the order the filters apply (a later one means the node got further).
_ORDER = (
    "NotReady",
    "Cordoned",
    "Taint",
    "Labels",
    "GPUModel",
    "NoGPU",
    "GPUCount",
    "GPUMemory",
    "Resources",
    "FreeGPUs",
    "Fits",
)


def placement(wl: Obj, ctx: WhyContext, simulate: bool = True) -> Placement | None:
    """Per-node verdicts, fragmentation and (with ``simulate``) what would let ``wl`` in;
    None when the context carries no cluster, or the scheduler would not consider ``wl``."""
    if not ctx.nodes:
        return None
    built = snapshot_of(ctx, workload_ref(wl))
    mine = _pending(built, workload_ref(wl))
    if mine is None:
        return None
    cq = next((q for q in built.snapshot.cluster_queues if q.name == mine.queue), None)
    pod_set = max(mine.pod_sets, key=lambda ps: (ps.gpus * ps.gpu_milli, sum(ps.requests.values())))
    flavors = _flavors(built, cq, pod_set)
    holders = _gpu_holders(ctx.workloads)
    verdicts = node_verdicts(built.snapshot.nodes, pod_set, flavors, holders, _held_by_others(ctx.nodes))
    frag = fragmentation(built.snapshot.nodes, mine.pod_sets, verdicts)
    return Placement(verdicts, frag, fits_when(wl, ctx, built) if simulate else None)


def node_verdicts(
    nodes: Iterable[Node],
    pod_set: PodSet,
    flavors: Sequence[Flavor],
    holders: dict[tuple[str, int], str],
    others: Mapping[str, str] | None = None,
) -> list[NodeVerdict]:
    """Per node, the verdict of the flavor under which the node got furthest. ``others``: per
    node, what pods Muster did not create hold there (said where resources fall short)."""
    out = []
    for node in sorted(nodes, key=lambda n: n.name):
        best = max(
            (_verdict(node, pod_set, f, holders, (others or {}).get(node.name)) for f in flavors or [None]),
            key=lambda v: _ORDER.index(v.reason),
        )
        out.append(best)
    return out


def fragmentation(
    nodes: Iterable[Node], pod_sets: Sequence[PodSet], verdicts: Sequence[NodeVerdict]
) -> Fragmentation | None:
    """How the whole free GPUs of the nodes that could host a pod are spread, against the whole
    gang: every pod of every pod set that asks for whole GPUs (a Master and its Workers alike)."""
    from muster.scheduler import GPU_MILLI

    gpu_sets = [ps for ps in pod_sets if ps.gpus]
    if not gpu_sets or any(ps.gpu_milli < GPU_MILLI or ps.gpu_memory for ps in gpu_sets):
        return None
    sizes = sorted((ps.gpus for ps in gpu_sets for _ in range(ps.count)), reverse=True)
    need, pods = sizes[0], len(sizes)
    eligible = {v.node for v in verdicts if v.reason in ("FreeGPUs", "Fits")}
    free = {n.name: _full_free(n) for n in nodes if n.name in eligible}
    total = sum(free.values())
    spread = sum(1 for f in free.values() if f)
    block_node = max(sorted(free), key=lambda n: free[n], default=None)
    block = free[block_node] if block_node else 0
    room = _room(free, sizes)
    fragmented = total >= sum(sizes) and room < pods
    what = _gpu_words(max(gpu_sets, key=lambda ps: ps.gpus))
    where = f"{total} free {what} spread over {spread} node{'s' if spread != 1 else ''}"
    largest = f"the largest free block is {block} on {block_node}" if block_node and block else "none is free"
    gang = _gang_words(sizes)
    if not eligible:
        message = f"no node can host a pod of {need} {what} whatever is free (see the per-node reasons)"
    elif block < need:
        message = f"no node has {need} free {what}; {largest} ({where})"
    elif room < pods:
        message = f"the free {what} take {room} of its {gang} ({where}; {largest})"
    else:
        message = f"the free {what} can take all its {gang} now ({where})"
    return Fragmentation(need, pods, total, spread, block, block_node, room, fragmented, message)


def fits_when(wl: Obj, ctx: WhyContext, built: Built | None = None) -> FitsWhen:
    """What has to finish for ``wl`` to be admitted (the scheduler core decides each what-if).
    ``built`` is the snapshot of the context when the caller has one."""
    me = workload_ref(wl)
    what_if = WhatIf(built or snapshot_of(ctx, me), me)
    if what_if.admits(set()):
        return FitsWhen(
            fits_now=True,
            message="it fits as the cluster is now: the scheduler admits it once the workloads "
            "ahead of it in the queue are served",
        )
    admitted = [w for w in ctx.workloads if holds_quota(w) and workload_ref(w) != me]
    candidates = sorted(admitted, key=lambda w: _finish_order(w, ctx.jobs))[:_CANDIDATES]
    removed: list[str] = []
    for w in candidates:
        removed.append(workload_ref(w))
        if what_if.admits(set(removed)):
            break
    else:
        everyone = {workload_ref(w) for w in admitted}
        if not what_if.admits(everyone):
            return FitsWhen(never=True, message=_never(ctx, wl))
        return FitsWhen(
            message=f"it fits only once more than the {_CANDIDATES} running workloads likeliest to "
            "finish are gone"
        )
    # Prune: keep only the workloads whose finishing is needed.
    needed = list(removed)
    for key in removed[:-1]:
        if what_if.admits(set(needed) - {key}):
            needed.remove(key)
    names = " and ".join(needed) if len(needed) <= 2 else ", ".join(needed[:-1]) + f" and {needed[-1]}"
    return FitsWhen(finishing=needed, message=f"fits when {names} finish{'es' if len(needed) == 1 else ''}")


def snapshot_of(ctx: WhyContext, me: str | None) -> Built:
    """The scheduler's snapshot of the cluster with ``me`` waiting (None: every pending
    Workload, a snapshot any of them can be explained against), built once per context."""
    import time

    from muster.controllers.scheduling.snapshot import build_snapshot

    cached = ctx.snapshots.get(me or "*") or ctx.snapshots.get("*")
    if cached is not None:
        return cached
    considered = [
        w for w in ctx.workloads if holds_quota(w) or (is_pending(w) if me is None else workload_ref(w) == me)
    ]
    built = build_snapshot(
        nodes=ctx.nodes,
        flavors=ctx.flavors,
        topologies=ctx.topologies,
        cluster_queues=list(ctx.cluster_queues),
        cohorts=ctx.cohorts,
        local_queues=ctx.local_queues,
        priority_classes=ctx.priority_classes,
        workloads=[dict(w) for w in considered],
        pods=[dict(p) for p in ctx.all_pods],
        now=ctx.now if ctx.now is not None else time.time(),
    )
    ctx.snapshots[me or "*"] = built
    return built


def workload_ref(obj: Obj) -> str:
    """``namespace/name``: how the what-if names a Workload."""
    return _key_of(obj["metadata"].get("namespace"), obj["metadata"]["name"])


# -- the what-if -----------------------------------------------------------------------------


class WhatIf:
    """The snapshot with ``me`` alone waiting; :meth:`admits` asks the scheduler core whether it
    is admitted, without preempting, once some admitted Workloads are gone (their placements
    released from the nodes, their quota from the queues)."""

    def __init__(self, built: Built, me: str) -> None:
        self.base = built.snapshot
        self.mine = _pending(built, me)
        self.me = me

    def everyone(self) -> set[str]:
        """namespace/name of every admitted Workload: all of them gone is an empty cluster."""
        return {_key_of(a.namespace, a.name) for a in self.base.admitted}

    def admits(self, removed: set[str]) -> bool:
        from muster.scheduler import Policy, schedule

        if self.mine is None:
            return False
        gone = [a for a in self.base.admitted if _key_of(a.namespace, a.name) in removed]
        snapshot = dataclasses.replace(
            self.base,
            admitted=[a for a in self.base.admitted if _key_of(a.namespace, a.name) not in removed],
            nodes=_released(self.base.nodes, gone),
            pending=[dataclasses.replace(self.mine, can_preempt=False)],
        )
        decisions = schedule(snapshot, Policy())
        return any(_key_of(a.namespace, a.name) == self.me for a in decisions.admitted)


def _released(nodes: Sequence[Node], gone: Sequence[Any]) -> list[Node]:
    """Copies of the nodes the ``gone`` Workloads' pods ran on, with their charges released."""
    from muster.scheduler import GPU_MILLI

    by_name = {n.name: n for n in nodes}
    changed: dict[str, tuple[Node, list[int]]] = {}
    for a in gone:
        for ps in a.pod_sets:
            for pod in ps.pods:
                if pod.node not in by_name:
                    continue
                if pod.node not in changed:
                    old = by_name[pod.node]
                    free = list(old.gpu_free) or [GPU_MILLI] * old.gpus
                    changed[pod.node] = (dataclasses.replace(old, used=dict(old.used)), free)
                node, free = changed[pod.node]
                for resource, amount in ps.requests.items():
                    node.used[resource] = node.used.get(resource, 0) - amount
                milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                for g in pod.gpus:
                    if 0 <= g < len(free):
                        free[g] = min(GPU_MILLI, free[g] + milli)
    for node, free in changed.values():
        node.gpu_free = tuple(free)
    return [changed[n.name][0] if n.name in changed else n for n in nodes]


def _never(ctx: WhyContext, wl: Obj) -> str:
    text = "the gang can never fit, not even with every running workload gone"
    gpus = sum(
        _pod_gpus(ps) * int(ps.get("count") or 0) for ps in (wl.get("spec") or {}).get("podSets") or []
    )
    if not gpus:
        return text + ": it asks for more than its quota or any node can give"
    usable = sum(
        1
        for n in ctx.nodes
        if _in_service(n)
        for g in (n.get("status") or {}).get("gpus") or []
        if g.get("health", "Healthy") == "Healthy"
    )
    return (
        text + f": it asks for {gpus} GPUs in all, and its quota or the nodes ({usable} usable GPUs) "
        "cannot hold its pods at once"
    )


def _in_service(node: Obj) -> bool:
    """Ready and not cordoned: a node that takes new pods."""
    return is_true(node, "Ready") and not (node.get("spec") or {}).get("unschedulable")


def _finish_order(wl: Obj, jobs: Sequence[Obj]) -> tuple[float, int, str, str]:
    """Likeliest to finish first: a known deadline soonest, then lowest priority, then the
    oldest admission."""
    deadline = math.inf
    owner = next(iter(wl["metadata"].get("ownerReferences") or []), None)
    if owner and owner.get("kind") == "TrainingJob":
        job = next(
            (
                j
                for j in jobs
                if j["metadata"]["name"] == owner.get("name")
                and (j["metadata"].get("namespace") or "default")
                == (wl["metadata"].get("namespace") or "default")
            ),
            None,
        )
        if job is not None:
            deadline = _deadline(job)
    admitted = next(
        (
            c.get("lastTransitionTime") or ""
            for c in (wl.get("status") or {}).get("conditions") or []
            if c.get("type") == "QuotaReserved"
        ),
        "",
    )
    return (deadline, int((wl.get("spec") or {}).get("priority") or 0), admitted, workload_ref(wl))


def _deadline(job: Obj) -> float:
    from muster.api.conditions import epoch

    limit = ((job.get("spec") or {}).get("runPolicy") or {}).get("activeDeadlineSeconds")
    started = epoch((job.get("status") or {}).get("startTime"))
    return started + float(limit) if limit is not None and started is not None else math.inf


# -- per node --------------------------------------------------------------------------------


def _verdict(
    node: Node, ps: PodSet, flavor: Flavor | None, holders: dict[tuple[str, int], str], others: str | None
) -> NodeVerdict:
    """The first filter that keeps a pod of ``ps`` (under ``flavor``) off ``node``."""
    found = _static(node, ps, flavor) or _gpu_shape(node, ps)
    if isinstance(found, NodeVerdict):
        return found
    if found is None:
        short = _resources(node, ps) or _free_gpus(node, ps, holders)
        if short is not None and others:
            short = (short[0], f"{short[1]}; {others}")
        found = short
    if found is not None:
        return NodeVerdict(node.name, False, *found)
    room = f" ({_full_free(node)} GPUs free)" if ps.gpus else ""
    return NodeVerdict(node.name, True, "Fits", f"can host a pod now{room}")


def _static(node: Node, ps: PodSet, flavor: Flavor | None) -> tuple[str, str] | NodeVerdict | None:
    if not node.ready:
        return "NotReady", "not ready"
    if node.unschedulable:
        return "Cordoned", "cordoned (spec.unschedulable)"
    tolerations = ps.tolerations + (flavor.tolerations if flavor else ())
    for taint in node.taints:
        if taint.effect in _BLOCKING and not any(t.tolerates(taint) for t in tolerations):
            return NodeVerdict(node.name, False, "Taint", f"untolerated taint {taint}", have=str(taint))
    wanted = {**(flavor.node_labels if flavor else {}), **ps.node_selector}
    for key, value in wanted.items():
        have = node.labels.get(key)
        if have == value:
            continue
        if key == GPU_PRODUCT_LABEL:
            return _model(node, have or "none", value)
        source = f"flavor {flavor.name}" if flavor and key in flavor.node_labels else "nodeSelector"
        return "Labels", f"label {key}={have if have is not None else '(none)'}, {source} wants {value}"
    if ps.node_affinity and not any(t.matches(node.labels) for t in ps.node_affinity):
        return "Labels", "does not match the required node affinity"
    return None


def _model(node: Node, have: str, want: str) -> NodeVerdict:
    return NodeVerdict(node.name, False, "GPUModel", f"GPU model {have}, the pods want {want}", have, want)


def _gpu_shape(node: Node, ps: PodSet) -> tuple[str, str] | NodeVerdict | None:
    from muster.scheduler import format_units

    if not ps.gpus:
        return None
    if not node.gpus:
        return "NoGPU", "has no GPU"
    if ps.gpu_models and node.gpu_model not in ps.gpu_models:
        return _model(node, node.gpu_model or "unknown", "|".join(ps.gpu_models))
    healthy = _healthy(node)
    if healthy < ps.gpus:
        sick = node.gpus - healthy
        return (
            "GPUCount",
            f"{healthy} usable GPU(s){f' ({sick} unhealthy)' if sick else ''}, a pod needs {ps.gpus}",
        )
    if ps.gpu_memory and node.gpu_memory < ps.gpu_memory:
        have, need = format_units("memory", node.gpu_memory), format_units("memory", ps.gpu_memory)
        return "GPUMemory", f"{have} per GPU, a pod needs {need}"
    return None


def _resources(node: Node, ps: PodSet) -> tuple[str, str] | None:
    from muster.scheduler import format_units

    for resource, amount in ps.requests.items():
        if resource not in node.allocatable:
            return "Resources", f"has no {resource}"
        free = node.allocatable[resource] - node.used.get(resource, 0)
        if free < amount:
            have, need = format_units(resource, max(free, 0)), format_units(resource, amount)
            return "Resources", f"{have} {resource} free, a pod needs {need}"
    return None


def _free_gpus(node: Node, ps: PodSet, holders: dict[tuple[str, int], str]) -> tuple[str, str] | None:
    from muster.scheduler import GPU, GPU_MILLI, format_units

    if not ps.gpus:
        return None
    if ps.gpu_milli < GPU_MILLI or ps.gpu_memory:
        best = max((f for f, ok in _devices(node) if ok), default=0)
        if best < ps.gpu_milli:
            want, have = format_units(GPU, ps.gpu_milli), format_units(GPU, max(best, 0))
            return "FreeGPUs", f"no GPU has a free share of {want} (largest free share {have})"
        return None
    free = _full_free(node)
    if free >= ps.gpus:
        return None
    held = sorted({holders[(node.name, i)] for i in range(node.gpus) if (node.name, i) in holders})
    by = f"; held by {', '.join(held)}" if held else ""
    return "FreeGPUs", f"{free} of {_healthy(node)} GPUs free, a pod needs {ps.gpus}{by}"


def _devices(node: Node) -> list[tuple[int, bool]]:
    from muster.scheduler import GPU_MILLI

    free = list(node.gpu_free) or [GPU_MILLI] * node.gpus
    healthy = list(node.gpu_healthy) or [True] * node.gpus
    return list(zip(free, healthy, strict=False))


def _healthy(node: Node) -> int:
    return sum(1 for _f, ok in _devices(node) if ok)


def _full_free(node: Node) -> int:
    from muster.scheduler import GPU_MILLI

    return sum(1 for f, ok in _devices(node) if ok and f >= GPU_MILLI)


def _room(free: Mapping[str, int], sizes: Sequence[int]) -> int:
    """How many of the gang's pods (GPUs per pod, largest first) the free blocks take, each
    pod on the node with the smallest block that holds it."""
    left = dict(free)
    placed = 0
    for size in sizes:
        fits = [n for n, f in left.items() if f >= size]
        if not fits:
            continue
        node = min(fits, key=lambda n: (left[n], n))
        left[node] -= size
        placed += 1
    return placed


def _gang_words(sizes: Sequence[int]) -> str:
    """``2 pods of 1``, or ``3 pods (1 of 2, 2 of 1)`` for a gang of mixed sizes."""
    if len(set(sizes)) == 1:
        return f"{len(sizes)} pod{'s' if len(sizes) != 1 else ''} of {sizes[0]}"
    counts = {s: sizes.count(s) for s in sorted(set(sizes), reverse=True)}
    return f"{len(sizes)} pods (" + ", ".join(f"{n} of {s}" for s, n in counts.items()) + ")"


def _gpu_words(ps: PodSet) -> str:
    models = "|".join(ps.gpu_models) or ps.node_selector.get(GPU_PRODUCT_LABEL, "")
    return f"{models} GPUs" if models else "GPUs"


def _held_by_others(nodes: Iterable[Obj]) -> dict[str, str]:
    """Node name -> what pods Muster did not create hold there (``status.usedByOthers``)."""
    out = {}
    for node in nodes:
        used = (node.get("status") or {}).get("usedByOthers") or {}
        held = ", ".join(
            f"{resource} {amount}" for resource, amount in sorted(used.items()) if resource != "pods"
        )
        if held:
            out[node["metadata"]["name"]] = (
                f"pods Muster did not create (kube-scheduler's, daemonsets) hold {held}"
            )
    return out


def _gpu_holders(workloads: Iterable[Obj]) -> dict[tuple[str, int], str]:
    """(node, GPU index) -> namespace/name of the Workload whose admission holds it."""
    out = {}
    for wl in workloads:
        if not holds_quota(wl):
            continue
        for assignment in wl["status"]["admission"].get("podSetAssignments") or []:
            for pod in assignment.get("pods") or []:
                for index in pod.get("gpus") or []:
                    out[(pod.get("node"), int(index))] = workload_ref(wl)
    return out


# -- the snapshot ----------------------------------------------------------------------------


def _pending(built: Built, me: str) -> Any:
    return next((p for p in built.snapshot.pending if _key_of(p.namespace, p.name) == me), None)


def _flavors(built: Built, cq: Any, ps: PodSet) -> list[Flavor]:
    """The flavors of the ClusterQueue that could carry the pod set (those of the resource
    group covering its GPUs, or its first resource), in the queue's order."""
    if cq is None:
        return []
    wanted = "nvidia.com/gpu" if ps.gpus else next(iter(ps.requests), "")
    by_name = {f.name: f for f in built.snapshot.flavors}
    for group in cq.resource_groups:
        if wanted in group.covered_resources or not wanted:
            return [by_name[f.name] for f in group.flavors if f.name in by_name]
    return []


def _pod_gpus(ps: Obj) -> int:
    from muster.api.resources import gpu_demand

    return gpu_demand(ps.get("requests") or {}).devices


def _key_of(namespace: str | None, name: str) -> str:
    return f"{namespace or 'default'}/{name}"
