"""The NodeClaim lifecycle, as one transition table.

::

    Pending ──accepted──► Launched ──node Ready──► Ready ──idle, under-used, spot notice──► Draining
      │  ▲ provider          │                      │                                        │
      │  └ failed: retry     │ timeout, machine     │ node lost                  empty, or   │
      │    after backoff     │ failed               ▼                            deadline    │
      └──────────────────────┴──────────────────► Failed ──► Terminating ◄──────────────────┘
                                                                 │ machine gone
                                                                 ▼
                                                             Terminated

Every change goes through :func:`move_claim`, which checks the edge against
:data:`CLAIM_TRANSITIONS` and returns the Event to record.
"""

from __future__ import annotations

from typing import Any

from muster.api.conditions import iso
from muster.api.lifecycle import EventSpec, check

__all__ = ["CLAIM_TRANSITIONS", "move_claim"]

Obj = dict[str, Any]

CLAIM_TRANSITIONS: dict[tuple[str, str], str] = {
    ("Pending", "Launched"): "the provider accepted the request and is making the machine",
    ("Pending", "Failed"): "the provider will never make it (its pool is gone)",
    ("Pending", "Terminating"): "no longer needed before the provider made it",
    ("Launched", "Pending"): "the provider lost the machine before it came up: ask again",
    ("Launched", "Ready"): "the node registered, Ready, with its GPUs",
    ("Launched", "Failed"): "the machine failed or did not become Ready in time",
    ("Launched", "Terminating"): "no longer needed, or interrupted, before it was Ready",
    ("Ready", "Draining"): "idle, under-used, or a spot notice: its work is moved off",
    ("Ready", "Terminating"): "empty and idle past the pool's TTL, or its deadline passed",
    ("Ready", "Failed"): "its node was lost",
    ("Draining", "Terminating"): "no pod is left, or the interruption deadline came",
    ("Draining", "Failed"): "its node was lost while draining",
    ("Failed", "Terminating"): "the machine is given back",
    ("Terminating", "Terminated"): "the provider gave the machine back",
}

_EVENTS = {
    "Launched": ("Normal", "Launched"),
    "Ready": ("Normal", "NodeReady"),
    "Draining": ("Normal", "Draining"),
    "Failed": ("Warning", "NodeClaimFailed"),
    "Terminating": ("Normal", "Terminating"),
    "Terminated": ("Normal", "Terminated"),
    "Pending": ("Warning", "Relaunching"),
}


def move_claim(claim: Obj, to: str, message: str, now: float) -> EventSpec:
    """Move ``claim`` (edited in place) to phase ``to`` with ``message``; the Event to record."""
    status = claim.setdefault("status", {})
    frm = status.get("phase") or "Pending"
    check(CLAIM_TRANSITIONS, frm, to, f"NodeClaim {claim['metadata']['name']}")
    status["phase"] = to
    status["message"] = message
    stamp = {"Launched": "launchedAt", "Ready": "readyAt", "Terminated": "terminatedAt"}.get(to)
    if stamp:
        status[stamp] = iso(now)
    kind, reason = _EVENTS[to]
    return EventSpec(kind, reason, message)  # type: ignore[arg-type]
