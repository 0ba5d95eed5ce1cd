"""The fact behind a waiting Workload's blocker, when the constraint the scheduler names is
only its consequence.

The scheduler names what binds: quota (``ExceedsMaxQuota``, ``QuotaExhausted``) or room on
the nodes (``InsufficientResources``, ...). What set that constraint is often one step
further: the ``default`` ClusterQueue's quota follows the nodes' healthy GPUs, so a GPU that
failed shows up as too little quota; the borrowing limit of the Workload's own queue, or the
lending limit of another queue of its cohort, keeps idle quota out of its reach; a cordoned
or lost node takes no pods. :func:`root_cause` walks that step and names the fact:

* a Workload that asks for GPUs where no node has any: nothing can be repaired, GPUs must
  be added (or declared: ``muster up --fake-gpus``);
* otherwise every fact that could be set right is a candidate: an unhealthy GPU repaired
  (its node's taint gone, its allocatable back, the default queue's quota recomputed from
  the nodes as the Node controller does), a node back or uncordoned, a queue's borrowing or
  lending limit lifted. The scheduler core decides, as for "fits when", whether the Workload
  is admitted once they are: now, or on an otherwise empty cluster when it can never fit as
  things are. When all of them together let it in, the set is pruned to the facts that
  matter, hardware first, then nodes, then limits; the first is the root cause, the others
  follow in ``also``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from muster.api.conditions import condition, is_true
from muster.api.labels import DRAIN_ANNOTATION
from muster.api.quantity import parse_quantity
from muster.api.resources import gpu_demand
from muster.controllers.insight.explain.facts import Explanation, Obj, RootCause, WhyContext
from muster.controllers.insight.explain.placement import WhatIf, snapshot_of, workload_ref
from muster.controllers.insight.usage import scheduler_amount, workload_requests
from muster.controllers.nodes.health import GPU_UNHEALTHY_TAINT
from muster.controllers.scheduling.defaults import MANAGED_ANNOTATION

if TYPE_CHECKING:
    from muster.scheduler import Node, ResourceGroup

__all__ = ["REASONS", "gpu_repair_action", "no_gpus", "quota_from_nodes", "root_cause", "uncordon_action"]

GPU = "nvidia.com/gpu"
# Pending reasons whose constraint a node fault or a quota limit can set.
REASONS = (
    "ExceedsMaxQuota",
    "QuotaExhausted",
    "InsufficientResources",
    "GangIncomplete",
    "TopologyUnsatisfiable",
)
_QUOTA_REASONS = ("ExceedsMaxQuota", "QuotaExhausted")
_MAX_NODES = 16  # node faults tried: unhealthy GPUs, then lost, then cordoned nodes, most GPUs first
_NODE_KINDS = ("GPUUnhealthy", "NodeNotReady", "NodeCordoned")
_XID = re.compile(r"\bXID (\d+)")


def root_cause(wl: Obj, ex: Explanation, ctx: WhyContext) -> RootCause | None:
    """The fact behind ``ex``'s blocker (``ex`` filled by :func:`.pending.fill_pending` with its
    reason, details and, for room on the nodes, the what-if), or None when the scheduler's own
    reason is the whole story."""
    if ex.reason not in REASONS or not ctx.nodes:
        return None
    if ex.fits_when is not None and ex.fits_when.fits_now:
        return None  # it waits only for the Workloads ahead of it
    if _asks_gpus(wl) and no_gpus(ctx.nodes) is not None:
        return _no_gpus(ex, ctx)
    never = ex.reason == "ExceedsMaxQuota" or (ex.fits_when is not None and ex.fits_when.never)
    trial = _Trial(wl, ctx, never)
    candidates = _candidates(wl, ex, ctx)
    if not candidates or not trial.admits(candidates):
        return None
    needed = next(([r] for r in candidates if len(candidates) > 1 and trial.admits([r])), None)
    if needed is None:  # no fact alone: prune the set, dropping the least concrete first
        needed = list(candidates)
        for repair in reversed(candidates):
            rest = [r for r in needed if r is not repair]
            if rest and trial.admits(rest):
                needed = rest
    first, *more = [_describe(r, needed, trial, ex, ctx) for r in needed]
    first.also = more
    return first


def gpu_repair_action(node: str, indices: Sequence[int]) -> str:
    """What repairs unhealthy GPUs (``muster doctor`` gives the same fix)."""
    return (
        f"repair or replace {_gpu_words(indices)} of node {node}: drain the node (muster node drain "
        f"{node}), reset the GPU (nvidia-smi -r) or reboot the machine, then restart muster up there"
    )


def no_gpus(nodes: Sequence[Obj]) -> RootCause | None:
    """``no node has GPUs`` (with why, as the nodes report it) when there are nodes and none
    has a GPU; ``muster up`` says it at start-up, ``why`` and ``doctor`` name it as the cause."""
    if not nodes or any(_gpu_count(n) for n in nodes):
        return None
    names = sorted(n["metadata"]["name"] for n in nodes)
    if len(names) == 1:
        # The local runtime says why it found none (no driver, no NVML) in its GPUHealthy condition.
        gpu = condition(nodes[0], "GPUHealthy") or {}
        why = str(gpu.get("message") or "").split("; ")[0] if gpu.get("reason") == "NoGPUs" else ""
        where = f"node {names[0]}: {why or 'it has none'}"
    else:
        where = f"none of its {len(names)} nodes has one"
    local = any((n.get("status") or {}).get("runtime") == "local" for n in nodes)
    action = (
        "run muster up on a machine with NVIDIA GPUs (and their driver), or declare fake GPUs to try "
        "Muster without: muster up --fake-gpus 4"
        if local
        else "add nodes with GPUs to the cluster (nvidia.com/gpu in their allocatable), or ask for no GPUs"
    )
    target = f"node/{names[0]}" if len(names) == 1 else "nodes"
    return RootCause(
        "NoGPUs", target, f"no node has GPUs ({where})", action, {"nodes": len(names), "gpus": 0}
    )


def quota_from_nodes(cq: Obj | None) -> bool:
    """Whether the ClusterQueue's quota follows the nodes (the managed ``default`` queue)."""
    return cq is not None and (cq["metadata"].get("annotations") or {}).get(MANAGED_ANNOTATION) == "true"


def uncordon_action(node: str) -> str:
    return f"muster node uncordon {node} once it is fit to take pods"


# -- the candidates --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Repair:
    """One fact set right: a node's (``kind`` in :data:`_NODE_KINDS`), or a limit of a
    ClusterQueue or Cohort (``owner``) on ``flavor``/``resource``, lifted (``value`` None) or
    raised to ``value``."""

    kind: str
    name: str
    owner: str = ""
    flavor: str = ""
    resource: str = ""
    value: str | None = None


def _candidates(wl: Obj, ex: Explanation, ctx: WhyContext) -> list[_Repair]:
    out: list[_Repair] = []
    for node in sorted(ctx.nodes, key=lambda n: (-_gpu_count(n), n["metadata"]["name"])):
        name = node["metadata"]["name"]
        if _unhealthy(node):
            out.append(_Repair("GPUUnhealthy", name))
        if not is_true(node, "Ready"):
            out.append(_Repair("NodeNotReady", name))
        if (node.get("spec") or {}).get("unschedulable"):
            out.append(_Repair("NodeCordoned", name))
    out = sorted(out, key=lambda r: _NODE_KINDS.index(r.kind))[:_MAX_NODES]
    cq = next((q for q in ctx.cluster_queues if q["metadata"]["name"] == _cq_name(ex)), None)
    if cq is None:
        return out
    asked = set(workload_requests(wl))
    if _asks_gpus(wl):
        asked.add(GPU)
    own = [("ClusterQueue", cq), *(("Cohort", c) for c in _ancestors(cq, ctx.cohorts))]
    for owner, obj in own:
        out += [
            _Repair("BorrowingLimit", obj["metadata"]["name"], owner, f, r)
            for f, r in _limits(obj, "borrowingLimit", asked)
        ]
    for owner, obj in _tree(cq, ctx.cluster_queues, ctx.cohorts):
        if obj is not cq:
            out += [
                _Repair("LendingLimit", obj["metadata"]["name"], owner, f, r)
                for f, r in _limits(obj, "lendingLimit", asked)
            ]
    return out


class _Trial:
    """Asks the scheduler core whether the Workload is admitted once some facts are set right:
    on the cluster as it is, or (``never``) with every admitted Workload gone. The facts are
    set right on copies of the snapshot's nodes and queues, built once."""

    def __init__(self, wl: Obj, ctx: WhyContext, never: bool) -> None:
        self.ctx, self.never = ctx, never
        self.me = workload_ref(wl)
        pending = (wl.get("status") or {}).get("pending") or {}
        self.shortfalls: list[Obj] = list((pending.get("details") or {}).get("shortfalls") or [])
        self.built = snapshot_of(ctx, self.me)
        self.objects = {n["metadata"]["name"]: n for n in ctx.nodes}
        self.from_nodes = {q["metadata"]["name"] for q in ctx.cluster_queues if quota_from_nodes(q)}
        self._tree: Any = None

    def admits(self, repairs: Sequence[_Repair]) -> bool:
        snapshot = self.built.snapshot
        nodes = {n.name: n for n in snapshot.nodes}
        queues = {q.name: q for q in snapshot.cluster_queues}
        cohorts = {c.name: c for c in snapshot.cohorts}
        repaired_gpus = 0
        for r in repairs:
            if r.kind in _NODE_KINDS and r.name in nodes:
                nodes[r.name], count = _repair_node(nodes[r.name], r.kind, self.objects[r.name])
                repaired_gpus += count
            elif r.owner == "ClusterQueue" and r.name in queues:
                queues[r.name] = dataclasses.replace(
                    queues[r.name], resource_groups=_with_limit(queues[r.name].resource_groups, r)
                )
            elif r.name in cohorts:
                cohorts[r.name] = dataclasses.replace(
                    cohorts[r.name], resource_groups=_with_limit(cohorts[r.name].resource_groups, r)
                )
        for name in self.from_nodes & set(queues) if repaired_gpus else ():
            # The default queue's quota is the nodes' allocatable GPUs: the repaired ones add to it.
            queues[name] = dataclasses.replace(
                queues[name], resource_groups=_more_gpus(queues[name].resource_groups, repaired_gpus)
            )
        changed = dataclasses.replace(
            snapshot,
            nodes=list(nodes.values()),
            cluster_queues=list(queues.values()),
            cohorts=list(cohorts.values()),
        )
        what_if = WhatIf(dataclasses.replace(self.built, snapshot=changed), self.me)
        return what_if.admits(what_if.everyone() if self.never else set())

    def tree(self) -> Any:
        """The quota tree of the cluster as it is (for the numbers of a limit)."""
        from muster.scheduler.quota import QuotaTree

        if self._tree is None:
            self._tree = QuotaTree(self.built.snapshot)
        return self._tree


def _repair_node(node: Node, kind: str, obj: Obj) -> tuple[Node, int]:
    """The node with the fact set right, and how many whole GPUs that gives back."""
    if kind == "NodeCordoned":
        return dataclasses.replace(node, unschedulable=False), 0
    if kind == "NodeNotReady":
        return dataclasses.replace(node, ready=True), 0
    healthy = list(node.gpu_healthy) or [True] * node.gpus
    repaired = 0
    for g in (obj.get("status") or {}).get("gpus") or []:
        index = int(g.get("index", -1))
        if g.get("health", "Healthy") != "Healthy" and not g.get("migMode") and 0 <= index < len(healthy):
            healthy[index] = True
            repaired += 1
    taint = (GPU_UNHEALTHY_TAINT["key"], GPU_UNHEALTHY_TAINT["value"], GPU_UNHEALTHY_TAINT["effect"])
    taints = tuple(t for t in node.taints if (t.key, t.value, t.effect) != taint)
    return dataclasses.replace(node, gpu_healthy=tuple(healthy), taints=taints), repaired


def _with_limit(groups: Sequence[ResourceGroup], r: _Repair) -> list[ResourceGroup]:
    """The resource groups with ``r``'s limit lifted (or set to ``r.value``)."""
    from muster.scheduler import to_units

    units = None if r.value is None else to_units(r.resource, r.value)
    field = "borrowing_limit" if r.kind == "BorrowingLimit" else "lending_limit"
    return _quotas(
        groups,
        lambda flavor, res, q: (
            dataclasses.replace(q, **{field: units}) if (flavor, res) == (r.flavor, r.resource) else q
        ),
    )


def _more_gpus(groups: Sequence[ResourceGroup], gpus: int) -> list[ResourceGroup]:
    from muster.scheduler import GPU_MILLI

    return _quotas(
        groups,
        lambda _f, res, q: dataclasses.replace(q, nominal=q.nominal + gpus * GPU_MILLI) if res == GPU else q,
    )


def _quotas(groups: Sequence[ResourceGroup], change: Callable[[str, str, Any], Any]) -> list[ResourceGroup]:
    from muster.scheduler import FlavorQuotas

    return [
        dataclasses.replace(
            g,
            flavors=[
                FlavorQuotas(f.name, {res: change(f.name, res, q) for res, q in f.resources.items()})
                for f in g.flavors
            ],
        )
        for g in groups
    ]


# -- the facts, described --------------------------------------------------------------------


def _describe(
    r: _Repair, needed: Sequence[_Repair], trial: _Trial, ex: Explanation, ctx: WhyContext
) -> RootCause:
    if r.kind in _NODE_KINDS:
        node = next(n for n in ctx.nodes if n["metadata"]["name"] == r.name)
        return _node_cause(r.kind, node, ex, ctx)
    return _limit_cause(r, [x for x in needed if x is not r], trial, ex)


def _node_cause(kind: str, node: Obj, ex: Explanation, ctx: WhyContext) -> RootCause:
    name = node["metadata"]["name"]
    status = node.get("status") or {}
    gpus = _gpu_count(node)
    if kind == "GPUUnhealthy":
        bad = [g for g in status.get("gpus") or [] if g.get("health", "Healthy") != "Healthy"]
        indices = [int(g.get("index", 0)) for g in bad]
        gpu_health = condition(node, "GPUHealthy") or {}
        since = gpu_health.get("lastTransitionTime") if gpu_health.get("status") == "False" else None
        why = "; ".join(sorted({(g.get("healthReason") or "unhealthy").split(": ")[0] for g in bad}))
        verb = "is" if len(bad) == 1 else "are"
        message = f"{_gpu_words(indices)} of node {name} {verb} unhealthy{_since(since)} ({why})"
        healthy = sum(1 for n in ctx.nodes for g in _whole_gpus(n) if g.get("health", "Healthy") == "Healthy")
        total = sum(len(_whole_gpus(n)) for n in ctx.nodes)
        if ex.reason in _QUOTA_REASONS and _managed(ctx, ex):
            follows = f"ClusterQueue {_cq_name(ex)}'s quota follows the nodes' healthy GPUs"
            message += f"; {follows} ({healthy} of {total})"
        elif GPU_UNHEALTHY_TAINT in ((node.get("spec") or {}).get("taints") or []):
            message += "; its taint nvidia.com/gpu=unhealthy:NoSchedule keeps new pods off the node"
        numbers: dict[str, Any] = {"node": name, "gpus": indices, "healthyGpus": healthy, "totalGpus": total}
        xids = sorted({int(m) for g in bad for m in _XID.findall(g.get("healthReason") or "")})
        if xids:
            numbers["xid"] = xids
        return RootCause(kind, f"node/{name}", message, gpu_repair_action(name, indices), numbers, since)
    if kind == "NodeNotReady":
        ready = condition(node, "Ready") or {}
        since = ready.get("lastTransitionTime")
        beat = status.get("lastHeartbeatTime")
        detail = f"{ready.get('reason') or 'NotReady'}" + (f", last heartbeat {beat}" if beat else "")
        return RootCause(
            kind,
            f"node/{name}",
            f"node {name} is not ready{_since(since)} ({detail}): its {gpus} GPU(s) take no pods",
            f"bring node {name} back: check the machine and the muster runtime on it (muster up there); "
            f"a node gone for good: muster delete node {name}",
            {"node": name, "gpus": gpus, "ready": ready.get("status", "Unknown")},
            since,
        )
    drained = ((node.get("metadata") or {}).get("annotations") or {}).get(DRAIN_ANNOTATION)
    return RootCause(
        kind,
        f"node/{name}",
        f"node {name} is cordoned (spec.unschedulable)"
        + (f", drained at {drained}" if drained else "")
        + f": its {gpus} GPU(s) take no new pods",
        uncordon_action(name),
        {"node": name, "gpus": gpus},
        drained,
    )


def _limit_cause(r: _Repair, others: list[_Repair], trial: _Trial, ex: Explanation) -> RootCause:
    tree = trial.tree()
    fr = (r.flavor, r.resource)
    node = tree.queues.get(r.name) if r.owner == "ClusterQueue" else tree.cohorts.get(r.name)
    res = r.resource
    amount = _amount(res)
    field = "borrowingLimit" if r.kind == "BorrowingLimit" else "lendingLimit"
    limit = (node.borrowing_limit if r.kind == "BorrowingLimit" else node.lending_limit).get(fr, 0)
    nominal, used = node.nominal.get(fr, 0), node.usage.get(fr, 0)
    parent = node.parent.name if node.parent is not None else "(none)"
    owner = f"{r.owner} {r.name}"
    numbers: dict[str, Any] = {
        r.owner[0].lower() + r.owner[1:]: r.name,
        "flavor": r.flavor,
        "resource": res,
        field: amount(limit),
        "nominal": amount(nominal),
        "used": amount(used),
    }
    if r.kind == "BorrowingLimit":
        # What the cohort holds for others: its available quota less this node's own unused part.
        local = node.local_quota(fr)
        stored = node.subtree.get(fr, 0) - local
        own_unused = max(0, stored - max(0, used - local))
        idle = max(0, tree.available(node.parent, fr) - own_unused) if node.parent is not None else 0
        numbers["idleInCohort"] = amount(idle)
        if idle:
            what = f"the {amount(idle)} idle in cohort {parent}"
        else:
            lendable = max(0, tree.potential_available(node.parent, fr) - stored) if node.parent else 0
            what = f"from cohort {parent}, which could lend {amount(lendable)}"
        asked = next((int(s["requested"]) for s in trial.shortfalls if _fr(s) == fr), None)
        message = (
            f"{owner}'s borrowingLimit of {amount(limit)} {res} (flavor {r.flavor}) forbids borrowing "
            f"{what}: it has nominal {amount(nominal)}"
            + (f" and the job asks for {amount(asked)}" if asked is not None else "")
        )
    else:
        kept = node.local_available(fr)
        numbers["keptIdle"] = amount(kept)
        message = (
            f"{owner} lends at most {amount(limit)} of its {amount(nominal)} {res} (flavor {r.flavor}, "
            f"lendingLimit) to cohort {parent}"
            + (f" and keeps the {amount(kept)} it leaves idle for itself" if kept else "")
        )
    raise_to = _enough(r, limit, others, trial)
    target = f"from {amount(limit)} to at least {raise_to} (or remove it)" if raise_to else "(or remove it)"
    if raise_to:
        numbers["needed"] = raise_to
    action = f"raise {field} of {res} in flavor {r.flavor} of {owner} {target}"
    return RootCause(r.kind, f"{r.owner.lower()}/{r.name}", message, action, numbers)


def _enough(r: _Repair, limit: int, others: list[_Repair], trial: _Trial) -> str | None:
    """The smallest limit the shortfall the scheduler reported calls for, when the scheduler
    core confirms it admits the Workload; None when that cannot be told."""
    from muster.scheduler import format_units

    short = _shortfall(trial.shortfalls, (r.flavor, r.resource), trial.never)
    if short is None or short <= 0:
        return None
    value = format_units(r.resource, limit + short)
    return value if trial.admits([*others, dataclasses.replace(r, value=value)]) else None


# -- helpers ---------------------------------------------------------------------------------


def _no_gpus(ex: Explanation, ctx: WhyContext) -> RootCause:
    cause = no_gpus(ctx.nodes)
    assert cause is not None  # the caller saw nodes and none with a GPU
    if ex.reason in _QUOTA_REASONS and _managed(ctx, ex):
        cause.message += f"; ClusterQueue {_cq_name(ex)}'s quota follows the nodes, so it holds no GPUs"
    return cause


def _managed(ctx: WhyContext, ex: Explanation) -> bool:
    """Whether the Workload's ClusterQueue takes its quota from the nodes."""
    return quota_from_nodes(
        next((q for q in ctx.cluster_queues if q["metadata"]["name"] == _cq_name(ex)), None)
    )


def _shortfall(shortfalls: Sequence[Obj], fr: tuple[str, str], never: bool) -> int | None:
    """How much more of ``fr`` the Workload needs than its queue can give (ever, or now)."""
    for s in shortfalls:
        most = s.get("maximum") if never else s.get("available")
        if _fr(s) == fr and most is not None:
            return int(s["requested"]) - max(int(most), 0)
    return None


def _fr(shortfall: Obj) -> tuple[str, str]:
    return shortfall.get("flavor", ""), shortfall.get("resource", "")


def _amount(resource: str) -> Any:
    return lambda units: scheduler_amount(resource, units)


def _limits(obj: Obj, field: str, asked: set[str]) -> list[tuple[str, str]]:
    """(flavor, resource) of the entries of ``obj``'s quota that set ``field``."""
    return [
        (f, item["name"])
        for f, item in _entries(obj)
        if item.get(field) is not None and item["name"] in asked
    ]


def _entries(obj: Obj) -> Iterable[tuple[str, Any]]:
    for group in (obj.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for item in flavor.get("resources") or []:
                yield flavor["name"], item


def _ancestors(cq: Obj, cohorts: Sequence[Obj]) -> list[Obj]:
    """The Cohort objects above the ClusterQueue, nearest first."""
    by_name = {c["metadata"]["name"]: c for c in cohorts}
    out: list[Obj] = []
    name = (cq.get("spec") or {}).get("cohort")
    while name and name in by_name and all(c is not by_name[name] for c in out):
        out.append(by_name[name])
        name = (by_name[name].get("spec") or {}).get("parentName")
    return out


def _tree(cq: Obj, queues: Sequence[Obj], cohorts: Sequence[Obj]) -> list[tuple[str, Obj]]:
    """The ClusterQueues and Cohort objects of the ClusterQueue's cohort tree."""
    cohort = (cq.get("spec") or {}).get("cohort")
    if not cohort:
        return []
    parent = {c["metadata"]["name"]: (c.get("spec") or {}).get("parentName") for c in cohorts}

    def root(name: str | None) -> str | None:
        seen: set[str] = set()
        while name and parent.get(name) and name not in seen:
            seen.add(name)
            name = parent[name]
        return name

    top = root(cohort)
    members: list[tuple[str, Obj]] = [
        ("ClusterQueue", q) for q in queues if root((q.get("spec") or {}).get("cohort")) == top
    ]
    return members + [("Cohort", c) for c in cohorts if root(c["metadata"]["name"]) == top]


def _asks_gpus(wl: Obj) -> bool:
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        demand = gpu_demand(ps.get("requests") or {})
        if demand.devices or demand.milli or demand.memory:
            return True
    return False


def _gpu_count(node: Obj) -> int:
    status = node.get("status") or {}
    if status.get("gpus"):
        return len(status["gpus"])
    capacity = (status.get("capacity") or {}).get(GPU)
    return int(parse_quantity(capacity).value) if capacity else 0


def _whole_gpus(node: Obj) -> list[Obj]:
    return [g for g in (node.get("status") or {}).get("gpus") or [] if not g.get("migMode")]


def _unhealthy(node: Obj) -> bool:
    return any(g.get("health", "Healthy") != "Healthy" for g in (node.get("status") or {}).get("gpus") or [])


def _gpu_words(indices: Sequence[int]) -> str:
    return f"GPU {indices[0]}" if len(indices) == 1 else "GPUs " + ", ".join(str(i) for i in indices)


def _since(when: str | None) -> str:
    return f" since {when}" if when else ""


def _cq_name(ex: Explanation) -> str | None:
    return ex.queue.cluster_queue if ex.queue else None
