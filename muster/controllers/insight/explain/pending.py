"""A waiting Workload: its pending reason, its place in the queue, and what would unblock it.

The scheduler writes ``status.pending {reason, message, details}``: the message already names
the numbers and the unblocking condition; the details hold the same facts as numbers (in
the scheduler's units, see :func:`muster.scheduler.snapshot.to_units`). This module adds
what only the objects around it can tell: who holds the quota it needs, how many wait
ahead of it, and which change to the queue or the job would let it in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from muster.api.conditions import condition
from muster.api.quantity import fmt_amount
from muster.controllers.insight.explain.facts import (
    Explanation,
    NodeVerdict,
    Obj,
    PodFacts,
    QueueFacts,
    WhyContext,
)
from muster.controllers.insight.explain.placement import placement
from muster.controllers.insight.explain.rootcause import quota_from_nodes, root_cause
from muster.controllers.insight.usage import (
    cluster_queue_of,
    holds_quota,
    is_pending,
    local_queue_map,
    scheduler_amount,
    workload_usage,
)

__all__ = ["admitted_places", "fill_pending", "queue_facts", "queue_time"]

_AHEAD_SHOWN = 5
_NODES_SHOWN = 4
# Reasons that are about room on the nodes: the per-node verdicts and the what-if explain them.
_CAPACITY = ("InsufficientResources", "GangIncomplete", "TopologyUnsatisfiable", "QuotaExhausted")
_HOLDERS_SHOWN = 5
_NEVER_HINT = (
    "it can never fit as the cluster is: ask for less per pod or fewer pods, or add nodes that can hold "
    "its pods (see the per-node reasons)"
)


def queue_facts(wl: Obj, ctx: WhyContext, admitted: bool = False) -> QueueFacts:
    """The Workload's queues and, while it waits, its position among the pending Workloads
    of its ClusterQueue in queue order (higher priority first, then older queue time)."""
    lq_map = local_queue_map(ctx.local_queues)
    cq_name = cluster_queue_of(wl, lq_map)
    cq = _find(ctx.cluster_queues, cq_name)
    facts = QueueFacts(
        local_queue=(wl.get("spec") or {}).get("queueName") or "default",
        cluster_queue=cq_name,
        strategy=((cq or {}).get("spec") or {}).get("queueingStrategy", "BestEffortFIFO") if cq else None,
    )
    if cq_name is None:
        return facts
    waiting = sorted(
        (w for w in ctx.workloads if is_pending(w) and cluster_queue_of(w, lq_map) == cq_name),
        key=_queue_key,
    )
    facts.pending = len(waiting)
    if admitted:
        return facts
    me = _key_of(wl)
    keys = [_key_of(w) for w in waiting]
    if me not in keys:  # the caller's copy is newer than the list: place it by its own key
        waiting = sorted([*waiting, wl], key=_queue_key)
        keys = [_key_of(w) for w in waiting]
        facts.pending += 1
    position = keys.index(me)
    facts.position = position + 1
    facts.ahead = [f"{ns}/{name}" for ns, name in keys[:position][:_AHEAD_SHOWN]]
    return facts


def queue_time(wl: Obj) -> str:
    """When the Workload (re-)entered its queue: the last eviction's time after a requeue
    (the back of the queue, as Kueue orders requeued workloads), else its creation."""
    times = [
        c.get("lastTransitionTime") or ""
        for c in (wl.get("status") or {}).get("conditions") or []
        if c.get("type") in ("Evicted", "Requeued")
    ]
    return max([t for t in times if t], default=wl["metadata"].get("creationTimestamp") or "")


def admitted_places(wl: Obj) -> list[PodFacts]:
    """The placements of an admitted Workload whose pods do not exist yet."""
    out = []
    for assignment in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for i, pod in enumerate(assignment.get("pods") or []):
            replica = f"{str(assignment.get('name', 'main')).lower()}-{i}"
            out.append(
                PodFacts(
                    name=replica,
                    replica=replica,
                    phase="Pending",
                    node=pod.get("node"),
                    gpus=pod.get("gpus") or [],
                )
            )
    return out


def fill_pending(ex: Explanation, wl: Obj, cq: Obj | None, ctx: WhyContext) -> None:
    """Reason, message, queue position and what would unblock a Workload that is not admitted."""
    spec = wl.get("spec") or {}
    pending = (wl.get("status") or {}).get("pending") or {}
    ex.queue = queue_facts(wl, ctx)
    if not spec.get("active", True):
        ex.state = "Suspended"
        ex.reason = "Deactivated"
        ex.message = "spec.active is false: it is never admitted while deactivated"
        ex.summary = f"{ex.ref} is suspended"
        owner = _owner(wl)
        ex.unblock = [f"resume it: muster resume {owner}" if owner else "set spec.active to true"]
        return
    where = _place(ex.queue)
    if not pending:
        ex.reason = "NotYetScheduled"
        ex.message = "the scheduler has not considered it yet"
        ex.summary = f"{ex.ref} is queued{where}; the scheduler has not looked at it yet"
        ex.unblock = ["check that `muster up` is running (it runs the scheduler loop)"]
        _queue_hints(ex, wl, cq)
        return
    ex.reason = pending.get("reason") or "Pending"
    ex.message = pending.get("message") or ""
    details = pending.get("details") or {}
    ex.unblock = _unblock(ex, wl, cq, details, ctx)
    if ex.reason in _CAPACITY:
        found = placement(wl, ctx)
        if found is not None:
            ex.nodes, ex.fragmentation, ex.fits_when = found.nodes, found.fragmentation, found.fits_when
            generic = ex.reason == "InsufficientResources"  # the facts say it better
            ex.unblock = _placement_hints(ex) + ([] if generic else ex.unblock)
    ex.blocker = blocker(ex, details)
    ex.root_cause = root_cause(wl, ex, ctx)
    head = ex.reason
    if ex.root_cause is not None:
        # The fact first, the scheduler's reason after it as its consequence.
        cause = ex.root_cause
        head = f"{cause.message}; so {ex.reason}"
        rest = [h for h in ex.unblock if h != _NEVER_HINT]  # it fits once the cause is set right
        ex.unblock = [cause.action, *(c.action for c in cause.also), *rest]
    ex.summary = f"{ex.ref} is waiting{where}: {head}" + (f": {ex.blocker}" if ex.blocker else "")
    _queue_hints(ex, wl, cq)
    requeued = condition(wl, "Requeued")
    if requeued is not None and requeued.get("status") == "True":
        ex.summary += " (requeued after an eviction)"


# -- what would unblock it -------------------------------------------------------------------


def blocker(ex: Explanation, details: Mapping[str, Any]) -> str:
    """The one sentence that names what keeps the Workload out, with the numbers."""
    cq = ex.queue.cluster_queue if ex.queue else details.get("clusterQueue")
    reason = ex.reason
    if reason == "QuotaExhausted":
        for s in details.get("shortfalls") or []:
            missing = max(0, int(s["requested"]) - max(int(s["available"]), 0))
            res = s["resource"]
            return f"needs {scheduler_amount(res, missing)} more {res} of quota in ClusterQueue {cq}"
    if reason == "ExceedsMaxQuota":
        for s in details.get("shortfalls") or []:
            if s.get("maximum") is not None:
                res = s["resource"]
                asked, most = scheduler_amount(res, s["requested"]), scheduler_amount(res, s["maximum"])
                return (
                    f"asks for {asked} {res}, more than ClusterQueue {cq} can ever have "
                    f"({most} with what its cohort may lend)"
                )
    if reason in _CAPACITY:
        return _capacity_blocker(ex)
    if reason == "StrictFIFOBlocked":
        head = ex.queue.ahead[0] if ex.queue and ex.queue.ahead else "the head of the queue"
        return f"ClusterQueue {cq} is StrictFIFO and {head} is ahead of it"
    if reason == "WaitingForPreemption":
        victims = ", ".join(v.get("name", "?") for v in details.get("victims") or []) or "its victims"
        return f"preempting {victims}; admitted once their pods have stopped"
    return ex.message.split("; ")[0] if reason in ("QueueStopped", "Inadmissible", "NoMatchingFlavor") else ""


def _capacity_blocker(ex: Explanation) -> str:
    """For a Workload the nodes cannot take: no node at all, fragmentation, or who must finish."""
    fits, frag = ex.fits_when, ex.fragmentation
    usable = [v for v in ex.nodes if v.reason in ("FreeGPUs", "Fits")]
    if ex.nodes and not usable:
        return _no_node(ex.nodes)
    if fits is not None and fits.never:
        return fits.message
    if frag is not None and (frag.fragmented or frag.largest_block < frag.gpus_per_pod):
        return frag.message
    if fits is not None and fits.finishing:
        return fits.message
    return ex.message.split(": ", 1)[-1] if ex.message else ""


def _no_node(verdicts: Sequence[NodeVerdict]) -> str:
    """``no node can host a pod: n1 untolerated taint ...; n2 GPU model H100, ...``."""
    codes = {v.reason for v in verdicts}
    if codes == {"Taint"}:
        taints = sorted({v.have for v in verdicts})
        return f"every node has a taint its pods do not tolerate: {', '.join(taints)}"
    if codes == {"GPUModel"}:
        models = ", ".join(sorted({v.have for v in verdicts}))
        return f"no node has {verdicts[0].want} GPUs, which its pods ask for (the nodes have {models})"
    shown = "; ".join(f"{v.node}: {v.message}" for v in verdicts[:_NODES_SHOWN])
    more = len(verdicts) - _NODES_SHOWN
    return f"no node can host a pod: {shown}" + (f"; and {more} more" if more > 0 else "")


def _placement_hints(ex: Explanation) -> list[str]:
    hints = []
    if ex.fits_when is not None and ex.fits_when.message and not ex.fits_when.never:
        hints.append(ex.fits_when.message)
    if ex.fits_when is not None and ex.fits_when.never:
        hints.append(_NEVER_HINT)
    if ex.fragmentation is not None and ex.fragmentation.fragmented:
        frag = ex.fragmentation
        hints.append(
            f"the free GPUs are fragmented: pods of at most {frag.largest_block} GPUs would fit them; a "
            "packing placement policy (muster up --placement binpack or fgd) keeps blocks whole"
        )
    return hints


def _unblock(
    ex: Explanation, wl: Obj, cq: Obj | None, details: Mapping[str, Any], ctx: WhyContext
) -> list[str]:
    reason = ex.reason
    cq_name = ex.queue.cluster_queue if ex.queue else None
    if reason == "QuotaExhausted":
        return _quota_hints(wl, cq, details, ctx)
    if reason == "ExceedsMaxQuota":
        return [
            _exceeds_hint(s, cq_name, quota_from_nodes(cq))
            for s in details.get("shortfalls") or []
            if s.get("maximum") is not None
        ] or ["lower the request, or raise the ClusterQueue's quota"]
    if reason == "WaitingForPreemption":
        victims = ", ".join(v.get("name", "?") for v in details.get("victims") or []) or "its victims"
        return [f"nothing to do: it is admitted once {victims} have stopped (within their grace period)"]
    if reason == "InsufficientResources":
        return [
            "the quota fits but no node can take a pod now: see `muster top gpus` for who holds the GPUs",
            "it is admitted when those pods end; or lower the per-pod request, or add nodes",
        ]
    if reason == "StrictFIFOBlocked":
        head = ex.queue.ahead[0] if ex.queue and ex.queue.ahead else "the head of the queue"
        return [f"ClusterQueue {cq_name} is StrictFIFO: {head} must be admitted first (`muster why` it)"]
    if reason == "QueueStopped":
        return [f"set spec.stopPolicy to None on ClusterQueue {cq_name} and on its LocalQueue"]
    if reason == "NoMatchingFlavor":
        return [
            f"make the pods' nodeSelector, tolerations or GPU model match a flavor of ClusterQueue "
            f"{cq_name}, or add a flavor that covers them"
        ]
    if reason == "TopologyUnsatisfiable":
        return ["relax the topology request (preferred instead of required), or free a whole domain"]
    if reason == "GangIncomplete":
        return ["the gang needs more distinct nodes: add nodes or drop the pod anti-affinity"]
    return []


def _exceeds_hint(s: Mapping[str, Any], cq_name: str | None, from_nodes: bool) -> str:
    """Lower the request or raise the quota; a queue whose quota follows the nodes grows with
    nodes only, and lowering a request to nothing is no advice."""
    res = s["resource"]
    if from_nodes:
        more = f"add nodes with {res}: ClusterQueue {cq_name}'s quota is what the nodes have"
    else:
        more = f"raise the quota of flavor {s['flavor']} in ClusterQueue {cq_name} or its cohort"
    if not int(s["maximum"]):
        return f"{more} (no {res} now)"
    most, asked = scheduler_amount(res, s["maximum"]), scheduler_amount(res, s["requested"])
    return f"lower its {res} request to at most {most} (it asks for {asked}), or {more}"


def _quota_hints(wl: Obj, cq: Obj | None, details: Mapping[str, Any], ctx: WhyContext) -> list[str]:
    cq_name = (cq or {}).get("metadata", {}).get("name") or details.get("clusterQueue")
    members = _cohort_members(cq, ctx.cluster_queues)
    hints = []
    priority = int((wl.get("spec") or {}).get("priority") or 0)
    own: list[Obj] = []  # holders in its own ClusterQueue: the ones priority can preempt
    for s in details.get("shortfalls") or []:
        res, flavor = s["resource"], s["flavor"]
        missing = max(0, int(s["requested"]) - max(int(s["available"]), 0))
        holders = _holders(ctx.workloads, members, flavor, res)
        own += [h for h in holders if _cq(h) == cq_name and h not in own]
        held = ", ".join(
            f"{_ref(h)} ({fmt_amount(res, amt)}, priority {_prio(h)}"
            + ("" if _cq(h) == cq_name else f", ClusterQueue {_cq(h)}")
            + ")"
            for h, amt in _held(holders, flavor, res)
        )
        amount = f"{scheduler_amount(res, missing)} more {res} of flavor {flavor}"
        hint = f"{amount} must be free in ClusterQueue {cq_name} or its cohort"
        hints.append(hint + (f"; held now by {held}" if held else ""))
        need = Fraction(int(s["used"]) + int(s["requested"]))
        hints.append(
            f"or raise nominalQuota of {res} in flavor {flavor} of ClusterQueue {cq_name} "
            f"from {scheduler_amount(res, s['nominal'])} to at least {scheduler_amount(res, need)}"
        )
    lower = [h for h in own if _prio(h) < priority]
    within = (((cq or {}).get("spec") or {}).get("preemption") or {}).get("withinClusterQueue", "Never")
    if lower and within == "Never":
        hints.append(
            f"{len(lower)} admitted workload(s) of lower priority hold that quota, but ClusterQueue "
            f"{cq_name} never preempts: set spec.preemption.withinClusterQueue: LowerPriority"
        )
    elif own and not lower:
        top = max(_prio(h) for h in own)
        hints.append(
            f"a priorityClassName with a value above {top} would let it preempt them"
            + ("" if within != "Never" else f" (once ClusterQueue {cq_name} allows preemption)")
        )
    return hints


def _cohort_members(cq: Obj | None, cluster_queues: Sequence[Obj]) -> set[str]:
    """The ClusterQueue and the others of its cohort (whose usage is quota it may borrow)."""
    if cq is None:
        return set()
    cohort = (cq.get("spec") or {}).get("cohort")
    names = {cq["metadata"]["name"]}
    if cohort:
        names |= {
            c["metadata"]["name"] for c in cluster_queues if (c.get("spec") or {}).get("cohort") == cohort
        }
    return names


def _queue_hints(ex: Explanation, wl: Obj, cq: Obj | None) -> None:
    if cq is not None or ex.queue is None:
        return
    ns = wl["metadata"].get("namespace") or "default"
    if ex.queue.cluster_queue is None:
        ex.unblock.append(
            f"no LocalQueue {ex.queue.local_queue} in namespace {ns}: create it, or set the job's queueName"
        )
    else:
        ex.unblock.append(
            f"LocalQueue {ex.queue.local_queue} points at ClusterQueue {ex.queue.cluster_queue}: create it"
        )


def _holders(workloads: Iterable[Obj], queues: set[str], flavor: str, res: str) -> list[Obj]:
    """Admitted Workloads of those ClusterQueues charged for (flavor, resource), the most
    likely to go first (lowest priority) first."""
    held = [
        w for w in workloads if holds_quota(w) and _cq(w) in queues and workload_usage(w).get((flavor, res))
    ]
    return sorted(held, key=lambda w: (_prio(w), _ref(w)))


def _cq(wl: Obj) -> str:
    return str(wl["status"]["admission"].get("clusterQueue"))


def _held(holders: Sequence[Obj], flavor: str, res: str) -> list[tuple[Obj, Fraction]]:
    return [(h, workload_usage(h)[(flavor, res)]) for h in holders[:_HOLDERS_SHOWN]]


# -- helpers ---------------------------------------------------------------------------------


def _place(queue: QueueFacts | None) -> str:
    if queue is None or queue.cluster_queue is None:
        return ""
    if queue.position is None:
        return f" in ClusterQueue {queue.cluster_queue}"
    return f" in ClusterQueue {queue.cluster_queue} (position {queue.position} of {queue.pending})"


def _owner(wl: Obj) -> str | None:
    for ref in wl["metadata"].get("ownerReferences") or []:
        return f"{str(ref.get('kind', '')).lower()}/{ref.get('name')}"
    return None


def _find(objs: Iterable[Obj], name: str | None) -> Obj | None:
    return next((o for o in objs if o["metadata"]["name"] == name), None) if name else None


def _queue_key(wl: Obj) -> tuple[int, str, str, str]:
    return (-_prio(wl), queue_time(wl), *_key_of(wl))


def _key_of(wl: Obj) -> tuple[str, str]:
    return (wl["metadata"].get("namespace") or "default", wl["metadata"]["name"])


def _prio(wl: Obj) -> int:
    return int((wl.get("spec") or {}).get("priority") or 0)


def _ref(wl: Obj) -> str:
    ns, name = _key_of(wl)
    return f"{ns}/{name}"
