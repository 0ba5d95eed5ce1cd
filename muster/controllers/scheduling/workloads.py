"""The Workload controller: the eviction handshake, for every owner kind alike.

An admitted Workload whose owner deactivated it (``spec.active=false``: a suspended job) is
evicted here (Evicted=True, reason Deactivated); the scheduler loop evicts preemption victims
itself, the health controller those on failed GPUs, lost or drained nodes, the pod executor
those whose pods the runtime failed for reasons outside the job (GangStartFailed, NodeLost).
For an evicting Workload this controller asks every unfinished pod to stop (reason Preempted,
GPUUnhealthy, NodeLost, Evicted or Suspended: SIGTERM, the grace period, SIGKILL), and once
every pod is terminal or gone it clears the admission and requeues the Workload
(:func:`muster.api.lifecycle.requeue_workload`). Its quota is held until then, so
whatever replaces it never over-commits GPUs (docs/control-plane.md, "Workload lifecycle").
"""

from __future__ import annotations

import copy
from typing import Any

from muster.api.conditions import condition
from muster.api.labels import WORKLOAD_LABEL
from muster.api.lifecycle import WorkloadState, evict_workload, is_final, requeue_workload, workload_state
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, stop_requested, stop_requested_object
from muster.runtime.base import PodReason

__all__ = [
    "DEACTIVATED",
    "EVICTION_STOP_REASONS",
    "REQUEUE_EVICTIONS",
    "WorkloadController",
    "workload_pods",
]

Obj = dict[str, Any]
DEACTIVATED = "Deactivated"
# The stop reason of the pods of a Workload evicted for each reason (anything else: Suspended).
EVICTION_STOP_REASONS = {
    "Preempted": StopReasons.PREEMPTED,
    "GPUUnhealthy": StopReasons.GPU_UNHEALTHY,
    "NodeLost": StopReasons.NODE_LOST,
    "NodeDrained": StopReasons.EVICTED,
    "SpotInterrupted": StopReasons.EVICTED,
}
# The one place that decides which evictions count toward a job's backoffLimit: these are the
# infrastructure's doing (a GPU or node failed, a node is drained, the runtime could not place
# the gang), so the job is requeued to run elsewhere and nothing is counted. A preemption is
# not counted either, but is recorded and checkpointed as one; a suspension is its owner's.
REQUEUE_EVICTIONS = frozenset(
    {"GPUUnhealthy", "NodeLost", "NodeDrained", "SpotInterrupted", PodReason.GANG_START_FAILED.value}
)


def workload_pods(ctx: Context, wl: Obj) -> list[Obj]:
    """The pods of ``wl``: its namespace's pods labelled ``muster.dev/workload=<name>``."""
    return ctx.cache.pods_labelled(
        WORKLOAD_LABEL, wl["metadata"]["name"], wl["metadata"].get("namespace") or ""
    )


class WorkloadController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reconcile(self, wl: Obj) -> None:
        state = workload_state(wl)
        if state is WorkloadState.ADMITTED and not wl["spec"].get("active", True):
            updated = copy.deepcopy(wl)
            event = evict_workload(
                updated, DEACTIVATED, "deactivated by its owner (suspended)", self.ctx.now()
            )
            stored = self.ctx.update_status(updated)
            if stored is None:
                return
            self.ctx.event(stored, event)
            self.ctx.metrics.evictions.labels(DEACTIVATED).inc()
            wl, state = stored, WorkloadState.EVICTING
        if state is WorkloadState.EVICTING:
            self._evict(wl)

    def _evict(self, wl: Obj) -> None:
        evicted = condition(wl, "Evicted") or {}
        reason = EVICTION_STOP_REASONS.get(evicted.get("reason") or "", StopReasons.SUSPENDED)
        live = [p for p in workload_pods(self.ctx, wl) if not is_final(p)]
        now = self.ctx.now()
        for pod in live:
            if not stop_requested(pod):
                self.ctx.update(stop_requested_object(pod, reason, now))
        if live:
            return  # the executor reports each stop; this runs again when they are gone
        updated = copy.deepcopy(wl)
        event = requeue_workload(updated, now)
        stored = self.ctx.update_status(updated)
        if stored is not None:
            self.ctx.event(stored, event)
