"""Stopping pods: the stop request that controllers write and the pod executor carries out.

A stop is requested by setting ``metadata.deletionTimestamp`` and the annotation
:data:`STOP_REASON_ANNOTATION`; the pod executor of the pod's node stops the process group
(SIGTERM, the grace period, SIGKILL), stores the final status with that reason, records an
Event and deletes the Pod object (docs/control-plane.md, "Pod lifecycle").
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from muster.api.conditions import iso
from muster.api.labels import STOP_GRACE_ANNOTATION, STOP_REASON_ANNOTATION
from muster.api.lifecycle import is_final
from muster.runtime.base import StopReason
from muster.store.base import Conflict, NotFound, Obj, Store

if TYPE_CHECKING:
    from muster.controllers.context import Context

__all__ = [
    "StopReasons",
    "clear_pods",
    "ended_by_stop",
    "request_stop",
    "stop_grace",
    "stop_reason",
    "stop_requested",
    "stop_requested_object",
]

_RUNTIME_STOP_REASONS = frozenset(r.value for r in StopReason)


class StopReasons:
    """Why a controller stops a pod (the pod's final reason when the stop ended it)."""

    PREEMPTED = "Preempted"  # the scheduler chose its Workload as a victim; the job is requeued
    SUSPENDED = "Suspended"  # its job was suspended (its Workload deactivated)
    DEADLINE_EXCEEDED = "DeadlineExceeded"  # the job's activeDeadlineSeconds ran out
    GANG_RESTART = "GangRestart"  # another replica failed: the whole gang restarts
    RESIZED = "Resized"  # its elastic job was resized: the gang restarts at the new size
    JOB_FINISHED = "JobFinished"  # the job ended and its cleanPodPolicy stops what still runs
    DELETED = "Deleted"  # its owner is gone (garbage collection)
    GPU_UNHEALTHY = "GPUUnhealthy"  # a GPU of its Workload's placement went unhealthy
    NODE_LOST = "NodeLost"  # a node of its Workload's placement stopped answering
    EVICTED = "Evicted"  # its node is being drained


def stop_requested(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def stop_reason(pod: Obj) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get(STOP_REASON_ANNOTATION)


def ended_by_stop(pod: Obj) -> bool:
    """Whether the pod's final status is the stop's doing (its reason is the stop's), not an
    end of its own that came first."""
    reason = (pod.get("status") or {}).get("reason")
    return reason is not None and (reason == stop_reason(pod) or reason in _RUNTIME_STOP_REASONS)


def stop_requested_object(pod: Obj, reason: str, now: float, grace: float | None = None) -> Obj:
    """A copy of ``pod`` carrying the stop request (the first reason stays); ``grace``
    overrides the pod's own grace period for this stop."""
    out = copy.deepcopy(pod)
    meta = out["metadata"]
    annotations = meta.setdefault("annotations", {})
    annotations.setdefault(STOP_REASON_ANNOTATION, reason)
    if grace is not None and not meta.get("deletionTimestamp"):
        annotations[STOP_GRACE_ANNOTATION] = f"{grace:g}"
    meta.setdefault("deletionTimestamp", iso(now))
    return out


def clear_pods(ctx: Context, pods: list[Obj], reason: str, now: float) -> bool:
    """Ask the unfinished ``pods`` to stop and delete the finished ones (an owner making way
    for a new run); True while any remain."""
    remaining = False
    for p in pods:
        if is_final(p):
            remaining |= not ctx.delete(p)
        else:
            remaining = True
            if not stop_requested(p):
                ctx.update(stop_requested_object(p, reason, now))
    return remaining


def stop_grace(pod: Obj) -> float | None:
    """The grace period of the pod's stop: the stop's own, else the pod's (None: the default)."""
    asked = (pod["metadata"].get("annotations") or {}).get(STOP_GRACE_ANNOTATION)
    if asked is not None:
        try:
            return max(0.0, float(asked))
        except ValueError:
            pass
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return None if grace is None else float(grace)


def request_stop(store: Store, pod: Obj, reason: str, now: float | None = None) -> Obj | None:
    """Ask the pod's executor to stop ``pod`` for ``reason``; returns the stored pod, or None
    when it is gone. Idempotent: a pod already asked to stop keeps its first reason."""
    import time

    when = time.time() if now is None else now
    current = pod
    for _ in range(10):
        if stop_requested(current):
            return current
        try:
            return store.update(stop_requested_object(current, reason, when))
        except NotFound:
            return None
        except Conflict:
            try:
                current = store.get("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
            except NotFound:
                return None
            if current["metadata"].get("uid") != pod["metadata"].get("uid"):
                return None  # a new pod of the same name: not the one asked about
    raise Conflict(f"could not request a stop of pod {pod['metadata']['name']}: it keeps changing")
