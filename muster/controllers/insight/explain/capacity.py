"""A waiting Workload and the nodes coming up for it: "waiting for node X of pool Y (ETA 45s)".

The autoscaler writes, on every NodeClaim, the pending Workloads it planned onto that node
(``status.workloads``); this module reads them back, with the claim's phase, the time the node
should be Ready and, when the provider failed, its error and the next attempt.
"""

from __future__ import annotations

from muster.api.conditions import epoch
from muster.controllers.insight.explain.facts import CapacityFacts, NodeWait, Obj, WhyContext

__all__ = ["capacity_facts"]


def capacity_facts(wl: Obj, ctx: WhyContext) -> CapacityFacts | None:
    """The nodes coming up for ``wl``, or None when it waits for none."""
    key = f"{wl['metadata'].get('namespace') or 'default'}/{wl['metadata']['name']}"
    now = ctx.now
    waits = []
    for claim in sorted(ctx.node_claims, key=lambda c: c["metadata"]["name"]):
        status = claim.get("status") or {}
        if key not in (status.get("workloads") or []) or status.get("phase") not in ("Pending", "Launched"):
            continue
        ready = epoch(status.get("expectedReadyAt"))
        retry = epoch(status.get("nextAttemptAt"))
        waits.append(
            NodeWait(
                claim=claim["metadata"]["name"],
                pool=claim["spec"]["nodePool"],
                phase=status.get("phase") or "Pending",
                eta_seconds=None if ready is None or now is None else max(0.0, ready - now),
                error=status.get("lastError") or "",
                next_attempt_seconds=None if retry is None or now is None else max(0.0, retry - now),
            )
        )
    if not waits:
        return None
    return CapacityFacts(waits, "; ".join(_sentence(w) for w in waits))


def _sentence(w: NodeWait) -> str:
    text = f"waiting for node {w.claim} of pool {w.pool}"
    if w.error:
        text += f": {w.error}"
        if w.next_attempt_seconds is not None:
            text += f"; asking again in {w.next_attempt_seconds:.0f}s"
        return text
    if w.eta_seconds is not None:
        text += f" (ETA {w.eta_seconds:.0f}s)" if w.eta_seconds > 0 else " (due now)"
    return text
