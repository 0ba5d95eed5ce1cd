"""Writing one cycle's :class:`Decisions` back to the Workloads.

* admitted: ``status.admission`` (cluster queue, per pod set its flavors, quota charged and
  one ``pods[]`` entry per admitted pod: node, GPU indices, the share when shared),
  QuotaReserved and Admitted True, an Event;
* preempted: Evicted=True (reason Preempted) and Preempted=True (reason InClusterQueue, ...),
  ``preemptedBy``, an Event on the victim and one on the preemptor; the Workload controller
  then stops the victim's pods and requeues it;
* resized (an elastic workload grown): the grown pod sets' count, quota charged and the added
  pods appended to ``pods[]`` (the running ones keep theirs), ``status.elastic`` (resizes,
  last resize), an Event; the owner restarts its pods at the new size. Why an elastic workload
  is not larger (the core's GrowthHeld, the loop's cool-down) goes to ``status.elastic.held``
  when it changed;
* pending: ``status.pending {reason, message, details}`` and QuotaReserved=False with the
  same reason, written only when it changed (a new reason at once; a reworded message with
  new numbers at most every ``message_interval`` seconds, so a queue of a thousand waiting
  workloads does not rewrite itself every cycle). A pending reason is no lifecycle transition
  and records no Event: a backlog would write one per Workload, and the owner's condition
  (a job's Queued) carries the reason already.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from muster.api.conditions import set_condition
from muster.api.lifecycle import (
    EventSpec,
    WorkloadState,
    admit_workload,
    evict_workload,
    resize_workload,
    workload_state,
)
from muster.controllers.context import Context
from muster.controllers.scheduling.snapshot import Built, Unqueueable, workload_key
from muster.scheduler import Admission, Decisions, NodePlacement, Preemption, Resize, format_units
from muster.store import codec

__all__ = ["DecisionWriter", "admission_dict", "set_pending"]

Obj = dict[str, Any]


@dataclass
class DecisionWriter:
    """Applies decisions; remembers when each pending message was last written."""

    ctx: Context
    message_interval: float = 10.0
    _written: dict[tuple[str, str], float] = field(default_factory=dict)

    def write(self, built: Built, decisions: Decisions) -> list[Obj]:
        """Write every decision; returns the Workloads admitted or resized (as stored)."""
        admitted = []
        for a in decisions.admitted:
            stored = self._admit(built, a)
            if stored is not None:
                admitted.append(stored)
        for r in decisions.resized:
            stored = self._resize(built, r)
            if stored is not None:
                admitted.append(stored)
        for p in decisions.preempted:
            self._preempt(built, p)
        holds = [
            (built.workloads.get(workload_key(h.namespace, h.name)), h.reason, h.message)
            for h in decisions.held
        ]
        for wl, reason, message in [*holds, *built.held]:
            if wl is not None:
                self._held(wl, reason, message)
        self.ctx.metrics.decisions.labels("pending").inc(len(decisions.pending))
        for pending in decisions.pending:
            wl = built.workloads.get(workload_key(pending.namespace, pending.name))
            if wl is not None and self._pending_due(wl, pending.reason, pending.message):
                self._pending(wl, pending.reason, pending.message, _plain(pending.details))
        for u in built.unqueueable:
            self._unqueueable(u)
        return admitted

    def _admit(self, built: Built, a: Admission) -> Obj | None:
        wl = built.workloads.get(workload_key(a.namespace, a.name))
        if wl is None or workload_state(wl) is not WorkloadState.PENDING:
            return None
        updated = codec.copy(wl)
        event = admit_workload(updated, admission_dict(a), self.ctx.now())
        stored = self.ctx.update_status(updated)
        if stored is not None:
            self._written.pop(workload_key(a.namespace, a.name), None)
            self.ctx.event(stored, event)
            queued = a.workload.eviction_time or a.workload.creation_time
            wait = max(0.0, self.ctx.now() - queued)
            self.ctx.metrics.admission_wait.labels(a.cluster_queue).observe(wait)
            self.ctx.metrics.decisions.labels("admitted").inc()
        return stored

    def _resize(self, built: Built, r: Resize) -> Obj | None:
        wl = built.workloads.get(workload_key(r.namespace, r.name))
        if wl is None or workload_state(wl) is not WorkloadState.ADMITTED:
            return None
        updated = codec.copy(wl)
        grown = {psa.name: psa for psa in r.pod_sets}
        specs = {ps.name: ps for ps in r.workload.pod_sets}
        assignments = []
        for a in updated["status"]["admission"]["podSetAssignments"]:
            psa = grown.get(a["name"])
            if psa is not None:
                spec = specs[a["name"]]
                a = {
                    **a,
                    "count": psa.count,
                    "resourceUsage": _usage(spec.quota_requests(), psa.count),
                    "pods": [*(a.get("pods") or []), *_pods(psa.placements)],
                }
            assignments.append(a)
        event = resize_workload(updated, assignments, "CapacityReturned", "capacity returned", self.ctx.now())
        stored = self.ctx.update_status(updated)
        if stored is not None:
            self.ctx.event(stored, event)
            self.ctx.metrics.decisions.labels("resized").inc()
        return stored

    def _held(self, wl: Obj, reason: str, message: str) -> None:
        """Why an elastic Workload is not larger (``status.elastic.held``), when it changed."""
        elastic = (wl.get("status") or {}).get("elastic") or {}
        if elastic.get("held") == {"reason": reason, "message": message}:
            return
        updated = codec.copy(wl)
        updated["status"].setdefault("elastic", {})["held"] = {"reason": reason, "message": message}
        self.ctx.update_status(updated)

    def _preempt(self, built: Built, p: Preemption) -> None:
        wl = built.workloads.get(workload_key(p.namespace, p.name))
        if wl is None or workload_state(wl) is not WorkloadState.ADMITTED:
            return  # already being evicted (or gone): its pods are on their way out
        preemptor = f"{p.preemptor.namespace}/{p.preemptor.name}"
        message = (
            f"preempted by {preemptor} (priority {p.preemptor.priority}) to make room in its queue "
            f"({p.reason})"
        )
        updated = codec.copy(wl)
        event = evict_workload(
            updated, "Preempted", message, self.ctx.now(), preemption_reason=p.reason, preempted_by=preemptor
        )
        stored = self.ctx.update_status(updated)
        if stored is None:
            return
        self.ctx.event(stored, event)
        self.ctx.metrics.preemptions.labels(p.reason).inc()
        self.ctx.metrics.evictions.labels("Preempted").inc()
        self.ctx.metrics.decisions.labels("preempted").inc()
        target = built.workloads.get(workload_key(p.preemptor.namespace, p.preemptor.name))
        if target is not None:
            self.ctx.event(
                target, EventSpec("Normal", "Preempting", f"preempting {p.namespace}/{p.name} ({p.reason})")
            )

    def _unqueueable(self, u: Unqueueable) -> None:
        self._pending(u.workload, u.reason, u.message, {})

    def _pending_due(self, wl: Obj, reason: str, message: str) -> bool:
        """Whether the pending reason is to be written now (see the module docstring)."""
        current = (wl.get("status") or {}).get("pending") or {}
        same_reason = current.get("reason") == reason
        if same_reason and current.get("message") == message:
            return False
        key = workload_key(wl["metadata"].get("namespace"), wl["metadata"]["name"])
        if same_reason and self.ctx.now() - self._written.get(key, float("-inf")) < self.message_interval:
            # Reworded (new numbers) only: the next cycle after the interval writes it.
            self.ctx.wake_at(self._written[key] + self.message_interval, wl)
            return False
        return True

    def _pending(self, wl: Obj, reason: str, message: str, details: Obj) -> None:
        if not self._pending_due(wl, reason, message):
            return
        key = workload_key(wl["metadata"].get("namespace"), wl["metadata"]["name"])
        now = self.ctx.now()
        updated = codec.copy(wl)
        set_pending(updated, reason, message, details, now)
        stored = self.ctx.update_status(updated)
        if stored is None:
            return
        self._written[key] = now


def set_pending(wl: Obj, reason: str, message: str, details: Obj, now: float) -> None:
    """Why ``wl`` waits: ``status.pending`` and QuotaReserved=False with the same reason."""
    status = wl.setdefault("status", {})
    status["pending"] = {"reason": reason, "message": message, "details": details}
    set_condition(wl, "QuotaReserved", "False", reason, message, now)


def admission_dict(a: Admission) -> Obj:
    """``status.admission`` of an admission decision."""
    specs = {ps.name: ps for ps in a.workload.pod_sets}
    assignments = []
    for psa in a.pod_sets:
        spec = specs[psa.name]
        assignments.append(
            {
                "name": psa.name,
                "count": psa.count,
                "flavors": dict(psa.flavors),
                "resourceUsage": _usage(spec.quota_requests(), psa.count),
                "pods": _pods(psa.placements),
            }
        )
    return {"clusterQueue": a.cluster_queue, "podSetAssignments": assignments}


def _pods(placements: list[NodePlacement]) -> list[Obj]:
    """One ``pods[]`` entry per placed pod: node, GPU indices, the share when shared."""
    pods = []
    for pl in placements:
        for gpus in pl.gpus:
            pod: Obj = {"node": pl.node, "gpus": list(gpus)}
            if gpus and pl.gpu_milli < 1000:
                pod["gpuMilli"] = pl.gpu_milli
            pods.append(pod)
    return pods


def _usage(per_pod: dict[str, int], count: int) -> dict[str, str]:
    return {r: format_units(r, v * count) for r, v in per_pod.items()}


def _plain(details: dict[str, Any]) -> Obj:
    """``details`` as plain JSON (NumPy numbers, tuples and sets from the core included)."""

    def default(o: Any) -> Any:
        if hasattr(o, "item"):
            return o.item()
        if isinstance(o, (set, frozenset)):
            return sorted(o)
        return str(o)

    return json.loads(json.dumps(details, default=default))
