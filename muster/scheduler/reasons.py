"""Pending reason codes (stable API, DESIGN §5) and the sentences that explain them.

Every message names the constraint, the numbers, and what would unblock the workload.
"""

from __future__ import annotations

from collections.abc import Sequence

from muster.scheduler.flavors import Shortfall
from muster.scheduler.snapshot import PreemptionConfig, format_units

__all__ = [
    "CODES",
    "EXCEEDS_MAX_QUOTA",
    "GANG_INCOMPLETE",
    "INADMISSIBLE",
    "INSUFFICIENT_RESOURCES",
    "NO_MATCHING_FLAVOR",
    "QUEUE_STOPPED",
    "QUOTA_EXHAUSTED",
    "RESOURCE_QUOTA_EXCEEDED",
    "STRICT_FIFO_BLOCKED",
    "TOPOLOGY_UNSATISFIABLE",
    "WAITING_FOR_PREEMPTION",
    "exceeds_max_message",
    "quota_message",
    "waiting_message",
]

QUOTA_EXHAUSTED = "QuotaExhausted"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
WAITING_FOR_PREEMPTION = "WaitingForPreemption"
INSUFFICIENT_RESOURCES = "InsufficientResources"
TOPOLOGY_UNSATISFIABLE = "TopologyUnsatisfiable"
GANG_INCOMPLETE = "GangIncomplete"
STRICT_FIFO_BLOCKED = "StrictFIFOBlocked"
QUEUE_STOPPED = "QueueStopped"
INADMISSIBLE = "Inadmissible"
RESOURCE_QUOTA_EXCEEDED = "ResourceQuotaExceeded"  # a ResourceQuota of the namespace is full

CODES = (
    QUOTA_EXHAUSTED,
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    WAITING_FOR_PREEMPTION,
    INSUFFICIENT_RESOURCES,
    TOPOLOGY_UNSATISFIABLE,
    GANG_INCOMPLETE,
    STRICT_FIFO_BLOCKED,
    QUEUE_STOPPED,
    INADMISSIBLE,
    RESOURCE_QUOTA_EXCEEDED,
)


def _amount(res: str, v: float) -> str:
    return "unlimited" if v == float("inf") else format_units(res, int(v))


def _shortfall_facts(s: Shortfall) -> dict:
    flavor, res = s.fr
    return {
        "flavor": flavor,
        "resource": res,
        "requested": s.need,
        "available": s.available,
        "nominal": s.nominal,
        "used": s.used,
        "maximum": None if s.potential == float("inf") else int(s.potential),
    }


def quota_message(
    cq: str, shortfalls: Sequence[Shortfall], preemption: PreemptionConfig, can_preempt: bool
) -> tuple[str, dict]:
    """QuotaExhausted: which flavor-resources lack quota, and why nothing was preempted."""
    parts = []
    for s in shortfalls:
        flavor, res = s.fr
        free = _amount(res, max(s.available, 0))
        parts.append(
            f"{_amount(res, s.need)} {res} in flavor {flavor} needed, {free} available "
            f"(nominal {_amount(res, s.nominal)}, {_amount(res, s.used)} in use by the queue)"
        )
    if not can_preempt:
        why = "its priority class never preempts"
    else:
        p = preemption
        why = (
            f"no running workload may be preempted for it (withinClusterQueue {p.within_cluster_queue}, "
            f"reclaimWithinCohort {p.reclaim_within_cohort}, borrowWithinCohort {p.borrow_within_cohort})"
        )
    first = shortfalls[0] if shortfalls else None
    unblock = ""
    if first is not None:
        flavor, res = first.fr
        missing = first.need - max(first.available, 0)
        more = _amount(res, missing)
        unblock = f"; it waits until {more} more {res} of flavor {flavor} is free in {cq} or its cohort"
    msg = f"cluster queue {cq} has too little quota: " + "; ".join(parts) + f"; {why}{unblock}"
    return msg, {"clusterQueue": cq, "shortfalls": [_shortfall_facts(s) for s in shortfalls]}


def exceeds_max_message(cq: str, shortfalls: Sequence[Shortfall]) -> tuple[str, dict]:
    """ExceedsMaxQuota: the request exceeds what the queue could ever get, even borrowing."""
    over = [s for s in shortfalls if s.need > s.potential] or list(shortfalls)
    parts = []
    for s in over:
        flavor, res = s.fr
        most = _amount(res, s.potential)
        parts.append(
            f"{_amount(res, s.need)} {res} in flavor {flavor} requested but at most {most} "
            f"can ever be available (nominal {_amount(res, s.nominal)} plus what the cohort may lend)"
        )
    msg = (
        f"cluster queue {cq} can never admit it: "
        + "; ".join(parts)
        + "; lower the request (or set minCount for partial admission) or raise the quota"
    )
    return msg, {"clusterQueue": cq, "shortfalls": [_shortfall_facts(s) for s in over]}


def waiting_message(victims: Sequence[tuple[str, str]], cq: str) -> tuple[str, dict]:
    """WaitingForPreemption: the victims it waits for (name, reason)."""
    names = ", ".join(f"{n} ({r})" for n, r in victims)
    msg = (
        f"waiting for {len(victims)} preempted workload{'s' if len(victims) != 1 else ''} to release "
        f"their resources: {names}; it keeps its claim on quota of {cq} and on the nodes meanwhile "
        "and is admitted once they are gone"
    )
    return msg, {"clusterQueue": cq, "victims": [{"name": n, "reason": r} for n, r in victims]}
