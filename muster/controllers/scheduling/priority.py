"""The priority a job or workflow task queues at, from its priorityClassName (DESIGN §4)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["PriorityClassMissing", "priority_of"]

Obj = dict[str, Any]


class PriorityClassMissing(LookupError):
    """The named PriorityClass does not exist; the message says how to fix it."""


def priority_of(classes: Iterable[Obj], named: str | None) -> tuple[int, str | None]:
    """``(value, class name)`` of the class ``named``, or of the globalDefault class when it
    names none (``(0, None)`` without one)."""
    classes = list(classes)
    if named:
        found = next((pc for pc in classes if pc["metadata"]["name"] == named), None)
        if found is None:
            raise PriorityClassMissing(
                f"PriorityClass {named} does not exist; create it or change priorityClassName"
            )
        return int(found.get("value") or 0), named
    default = next((pc for pc in classes if pc.get("globalDefault")), None)
    if default is None:
        return 0, None
    return int(default.get("value") or 0), default["metadata"]["name"]
