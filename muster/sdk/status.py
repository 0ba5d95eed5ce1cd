"""A Workflow's tasks as rows for people: phase, duration, attempts, cache hit or miss and
key. ``muster get workflow NAME``, ``muster describe workflow`` and the SDK's progress
display print the same rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from muster.api.workflow import order

__all__ = ["HEADERS", "WIDE_HEADERS", "TaskRow", "duration", "task_rows"]

Obj = dict[str, Any]
_KEY_CHARS = 12


@dataclass(frozen=True)
class TaskRow:
    task: str  # the node name, runs of a fan-out indented under their task
    phase: str
    reason: str
    duration: str
    attempts: str
    cache: str  # hit, miss, or - when the task is not cached
    key: str  # the first characters of the cache key
    message: str

    def cells(self, wide: bool = False) -> list[str]:
        base = [self.task, self.phase, self.duration, self.attempts, self.cache, self.key]
        return [*base, self.reason, self.message] if wide else base


HEADERS = ["TASK", "PHASE", "DURATION", "ATTEMPTS", "CACHE", "KEY"]
WIDE_HEADERS = [*HEADERS, "REASON", "MESSAGE"]


def task_rows(wf: Obj, now: datetime | None = None) -> list[TaskRow]:
    """One row per task (in dependency order, the onExit task last), each fan-out followed by
    its runs."""
    now = now or datetime.now(UTC)
    nodes: dict[str, Obj] = (wf.get("status") or {}).get("nodes") or {}
    spec = wf.get("spec") or {}
    tasks = [t["name"] for t in spec.get("tasks") or []]
    exit_task = spec.get("onExit")
    ordered = order(spec.get("tasks") or [])
    ordered = [t for t in ordered if t != exit_task] + ([exit_task] if exit_task in tasks else [])
    rows = []
    for name in ordered:
        node = nodes.get(name) or {}
        rows.append(_row(name, node, now))
        for child in node.get("children") or []:
            rows.append(_row(f"  {child}", nodes.get(child) or {}, now))
    return rows


def duration(node: Obj, now: datetime) -> str:
    """How long the task ran (so far, while it runs); - before it started."""
    start = _time(node.get("startedAt"))
    if start is None:
        return "-"
    end = _time(node.get("finishedAt")) or now
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _row(name: str, node: Obj, now: datetime) -> TaskRow:
    key = node.get("cacheKey") or ""
    cache = ("hit" if node.get("cacheHit") else "miss") if key else "-"
    attempts = int(node.get("attempts") or 0)
    return TaskRow(
        task=name,
        phase=node.get("phase") or "Pending",
        reason=node.get("reason") or "",
        duration=duration(node, now),
        attempts=str(attempts) if attempts else "-",
        cache=cache,
        key=key[:_KEY_CHARS] or "-",
        message=node.get("message") or "",
    )


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
