"""Retries: a task's ``retryStrategy`` after a failed attempt, and ``muster retry`` of a
workflow that failed. Both follow Argo (reference/workloads.md §4).

**retryStrategy** ``{limit, retryPolicy, backoff {duration, factor, maxDuration}}``:

* ``limit`` is the number of retries after the first attempt; unset retries without limit;
* ``retryPolicy``: ``OnFailure`` (the default) retries an attempt that Failed (its process
  exited non-zero, was OOM-killed or timed out), ``OnError`` one that Errored (node lost, GPU
  unhealthy, declared outputs missing), ``Always`` both. An attempt that could not start at
  all is never retried: the next would fail the same way;
* the wait before retry *n* (n = 1 after the first failure) is
  ``duration × factor^(n−1)``; ``maxDuration`` bounds the whole: counted from the first
  attempt's start, a retry whose wait would end past it is not made. Without ``backoff`` the
  retry starts at once.

**muster retry** (Argo's ``argo retry``): allowed for a Failed or Errored workflow. Tasks that
Failed, Errored, were Skipped or Omitted are reset to Pending, and so is everything that
depends on them (directly or not) and the onExit task; Succeeded and Cached tasks keep their
outputs and do not run again. A reset fan-out keeps its runs that succeeded, unless it is
reset because something it depends on runs again (its items may change).
"""

from __future__ import annotations

from typing import Any

from muster.api.conditions import epoch
from muster.api.lifecycle import EventSpec
from muster.api.workflow import parse_duration
from muster.controllers.workflow.dag import base_task
from muster.controllers.workflow.lifecycle import TaskPhase, move_node, node_phase

__all__ = ["RESET_PHASES", "next_retry", "reset_for_retry"]

Obj = dict[str, Any]
RESET_PHASES = (TaskPhase.FAILED, TaskPhase.ERROR, TaskPhase.SKIPPED, TaskPhase.OMITTED)
_POLICY = {"OnFailure": ("failed",), "OnError": ("error",), "Always": ("failed", "error")}


def next_retry(
    strategy: Obj | None, state: str, attempts: int, started_at: str | None, now: float, permanent: bool
) -> tuple[float | None, str]:
    """After attempt ``attempts`` ended ``state`` (failed or error): ``(wait seconds, "")``
    when another attempt is allowed, else ``(None, why not)`` ("" without a retryStrategy)."""
    if strategy is None:
        return None, ""
    if permanent:
        return None, " (not retried: it could not start, so a retry would fail the same way)"
    policy = strategy.get("retryPolicy") or "OnFailure"
    if state not in _POLICY[policy]:
        return None, f" (not retried: retryPolicy {policy})"
    limit = strategy.get("limit")
    if limit is not None and attempts >= int(limit) + 1:
        return None, f" (after {attempts} attempt(s); retryStrategy.limit is {limit})"
    backoff = strategy.get("backoff") or {}
    wait = 0.0
    if backoff:
        base = parse_duration(backoff.get("duration") or "1s")
        wait = base * float(backoff.get("factor", 2.0)) ** (attempts - 1)
    if backoff.get("maxDuration"):
        window = parse_duration(backoff["maxDuration"])
        first = epoch(started_at) or now
        if now + wait > first + window:
            return None, (
                f" (after {attempts} attempt(s); the next would start past backoff.maxDuration "
                f"{backoff['maxDuration']} from the first)"
            )
    return wait, ""


def reset_for_retry(spec: Obj, nodes: dict[str, Obj], now: float) -> tuple[list[str], list[EventSpec]]:
    """Reset ``nodes`` (in place) for ``muster retry``; the top-level tasks reset and the
    events of every node moved."""
    tasks = {t["name"]: t for t in spec["tasks"]}
    exit_task = spec.get("onExit")
    direct = {
        name for name in tasks if name != exit_task and node_phase(nodes.get(name) or {}) in RESET_PHASES
    }
    downstream = _dependents(tasks, direct) - direct
    if exit_task is not None and exit_task in nodes:
        downstream.add(exit_task)
    events: list[EventSpec] = []
    for name in sorted(direct | downstream):
        node = nodes.get(name)
        if node is None:
            continue
        keep_runs = name in direct
        for child in list(node.get("children") or []):
            cnode = nodes.get(child) or {}
            if keep_runs and node_phase(cnode) not in RESET_PHASES:
                continue  # a run that succeeded keeps its outputs
            if keep_runs:
                events.append(_reset(cnode, child, now))
            else:
                nodes.pop(child, None)
        if not keep_runs:
            node.pop("children", None)
        events.append(_reset(node, name, now))
    return sorted(direct | downstream), events


def _reset(node: Obj, name: str, now: float) -> EventSpec:
    why = "runs again (muster retry)"
    if node_phase(node) is TaskPhase.PENDING:
        event = EventSpec("Normal", "TaskRetried", f"{name}: {why}")
    else:
        event = move_node(node, name, TaskPhase.PENDING, "Retried", why, now)
    for key in ("startedAt", "finishedAt", "cacheKey", "retryAt", "outputs"):
        node.pop(key, None)
    # Attempts keep counting (they name the attempts' objects); the limit counts from here.
    node["attemptsBeforeRetry"] = int(node.get("attempts") or 0)
    node["cacheHit"] = False
    return event


def _dependents(tasks: dict[str, Obj], roots: set[str]) -> set[str]:
    found = set(roots)
    changed = True
    while changed:
        changed = False
        for name, task in tasks.items():
            if name not in found and any(base_task(d) in found for d in task.get("dependencies") or []):
                found.add(name)
                changed = True
    return found
