"""Finished pods beyond a threshold go, oldest first (Kubernetes' terminated-pod garbage
collection, ``--terminated-pod-gc-threshold``), so a server that runs a million short jobs
does not keep a million pods in its store and its cache.

Only a pod whose part is over is removed: it has ended (Succeeded or Failed) and its
Workload has finished or is gone (a pod without one counts as done). A pod of a job that still
runs, whose outcome its controller still reads, is never removed, whatever the count.
"""

from __future__ import annotations

from muster.api.labels import WORKLOAD_LABEL
from muster.api.lifecycle import WorkloadState, is_final, workload_state
from muster.controllers.context import Context
from muster.store.base import Obj

__all__ = ["collect_finished_pods"]


def collect_finished_pods(ctx: Context, limit: int) -> int:
    """Delete the oldest finished pods beyond ``limit`` (0: keep all); how many went."""
    if limit <= 0:
        return 0
    finished = [p for p in ctx.cache.list("Pod") if is_final(p)]
    if len(finished) <= limit:
        return 0
    done = [p for p in finished if _owner_done(ctx, p)]
    done.sort(key=_finished_at)
    removed = 0
    for pod in done[: len(finished) - limit]:
        removed += ctx.delete(pod)
    return removed


def _owner_done(ctx: Context, pod: Obj) -> bool:
    name = (pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
    if not name:
        return True
    wl = ctx.cache.get("Workload", name, pod["metadata"].get("namespace") or None)
    return wl is None or workload_state(wl) is WorkloadState.FINISHED


def _finished_at(pod: Obj) -> str:
    status = pod.get("status") or {}
    return status.get("finishTime") or pod["metadata"].get("creationTimestamp") or ""
