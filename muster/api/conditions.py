"""Status conditions on wire dicts: read, set (moving ``lastTransitionTime`` only when the
status flips, as Kubernetes does), and time conversions for the timestamps they carry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = [
    "condition",
    "epoch",
    "is_true",
    "iso",
    "latest_condition",
    "set_condition",
    "transition_time",
    "wire_time",
]

Obj = dict[str, Any]


def condition(obj: Obj, type_: str) -> Obj | None:
    """The condition ``type_`` of ``obj``'s status, or None."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def latest_condition(obj: Obj) -> Obj | None:
    """The most recent True condition (how STATE columns show a job), or None."""
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    if not conditions:
        return None
    return max(enumerate(conditions), key=lambda ic: (ic[1].get("lastTransitionTime") or "", ic[0]))[1]


def is_true(obj: Obj, type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


def transition_time(obj: Obj, type_: str) -> float | None:
    """When condition ``type_`` last changed status (epoch seconds), or None."""
    c = condition(obj, type_)
    return epoch(c.get("lastTransitionTime")) if c else None


def set_condition(obj: Obj, type_: str, status: str, reason: str, message: str, now: float) -> bool:
    """Set a condition on ``obj`` (in place); True when anything changed.

    ``lastTransitionTime`` moves only when ``status`` flips, so it says since when a condition
    holds, not when its message was last reworded.
    """
    conditions: list[Obj] = obj.setdefault("status", {}).setdefault("conditions", [])
    for c in conditions:
        if c.get("type") != type_:
            continue
        if (c.get("status"), c.get("reason", ""), c.get("message", "")) == (status, reason, message):
            return False
        if c.get("status") != status:
            c["lastTransitionTime"] = iso(now)
        c.update(status=status, reason=reason, message=message)
        return True
    conditions.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": iso(now),
        }
    )
    return True


def wire_time(moment: datetime) -> str:
    """A UTC ``moment`` as the wire writes times: RFC 3339, microseconds, a Z suffix
    (isoformat: strftime took half as long again, and every write stamps a time or two)."""
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def iso(ts: float) -> str:
    """Epoch seconds as the wire's RFC 3339 UTC form (with a Z suffix)."""
    return wire_time(datetime.fromtimestamp(ts, UTC))


def epoch(value: str | None) -> float | None:
    """A wire timestamp as epoch seconds (None stays None; a malformed one is None too)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return None
