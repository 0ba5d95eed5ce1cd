"""Node and GPU health: what the control plane does when hardware fails or an operator drains.

Level-triggered, from the Node objects and the Workloads placed on them:

* **GPU health** (a critical XID or a lost GPU, as the runtime reports it in
  ``status.gpus[].health``): the node gets the taint ``nvidia.com/gpu=unhealthy:NoSchedule``
  (as Node Problem Detector would set it), removed again once every GPU is healthy; an
  admitted Workload holding an unhealthy GPU is evicted with reason ``GPUUnhealthy`` and its
  pods are stopped with that reason, so its job is requeued and placed elsewhere (not counted
  against ``backoffLimit``: the hardware failed, not the job);
* **heartbeats**: a node this manager's runtime no longer offers whose ``lastHeartbeatTime``
  is older than ``grace_seconds`` becomes ``Ready=Unknown`` (NodeStatusUnknown); its
  unfinished pods are failed with reason ``NodeLost`` (no runtime is left to stop them) and
  their Workloads evicted with reason ``NodeLost``, but an elastic Workload that keeps its
  ``minCount`` without the node, which is shrunk in place instead (its job restarts at the
  smaller size from its checkpoint; docs/trainingjob.md, "Elastic jobs"; a failed GPU, a drain
  and a spot interruption shrink it alike, without the pods they concern). A node
  its runtime still offers but
  reports ``Ready=False`` (a Kubernetes Node whose kubelet went quiet) has its Workloads
  evicted alike; its pods are the runtime's to fail (it reports them NodeLost);
* **drain** (``muster node drain``: ``spec.unschedulable`` plus the annotation
  :data:`DRAIN_ANNOTATION`): every Workload with a pod on the node is evicted with reason
  ``NodeDrained`` and its pods stopped with reason ``Evicted`` and the drain's grace period;
  pods no Workload owns are stopped alike;
* **spot interruption** (the annotation :data:`INTERRUPTION_ANNOTATION`, the termination
  time, written by the capacity controller on a notice): as a drain, with reason
  ``SpotInterrupted`` and the time left until termination as the grace period; the
  Workloads keep their place in the queue when requeued.

The eviction itself (pods gone, admission cleared, requeue) is the Workload controller's, as
for a preemption (docs/control-plane.md).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable
from typing import Any

from muster.api.conditions import condition, epoch, iso, set_condition
from muster.api.labels import (
    DRAIN_ANNOTATION,
    DRAIN_GRACE_ANNOTATION,
    INTERRUPTION_ANNOTATION,
    WORKLOAD_LABEL,
)
from muster.api.lifecycle import (
    EventSpec,
    WorkloadState,
    evict_workload,
    is_final,
    resize_workload,
    workload_state,
)
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, stop_requested, stop_requested_object
from muster.controllers.scheduling.elastic import shrunk
from muster.controllers.scheduling.workloads import EVICTION_STOP_REASONS

__all__ = [
    "GPU_UNHEALTHY",
    "GPU_UNHEALTHY_TAINT",
    "NODE_DRAINED",
    "NODE_LOST",
    "SPOT_INTERRUPTED",
    "HealthController",
]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
GPU_UNHEALTHY = "GPUUnhealthy"
NODE_LOST = "NodeLost"
NODE_DRAINED = "NodeDrained"
SPOT_INTERRUPTED = "SpotInterrupted"
GPU_UNHEALTHY_TAINT = {"key": "nvidia.com/gpu", "value": "unhealthy", "effect": "NoSchedule"}
_PRECEDENCE = (
    NODE_LOST,
    GPU_UNHEALTHY,
    SPOT_INTERRUPTED,
    NODE_DRAINED,
)  # the first one found explains an eviction
# What an elastic Workload that keeps its minCount without the pods concerned shrinks for.
_SHRINKS = frozenset(_PRECEDENCE)


class HealthController:
    """Taints, NotReady, NodeLost and drain evictions (module docstring); one thread calls it."""

    def __init__(
        self, ctx: Context, offered: Callable[[], Iterable[str]], grace_seconds: float = 40.0
    ) -> None:
        self.ctx = ctx
        self.offered = offered  # the nodes this manager's runtime offers (it heartbeats them)
        self.grace_seconds = grace_seconds

    def reconcile(self) -> None:
        now = self.ctx.now()
        offered = set(self.offered())
        problems: dict[str, tuple[str, str, float | None]] = {}  # node -> (reason, message, grace)
        bad_gpus: dict[tuple[str, int], str] = {}
        for node in self.ctx.cache.list("Node"):
            name = node["metadata"]["name"]
            node = self._heartbeat(node, name in offered, now)
            self._taint(node)
            if _ready(node) != "True" and name not in offered:
                problems[name] = (NODE_LOST, f"node {name} is not ready: {_ready_message(node)}", None)
                self._fail_lost_pods(name, now)
            elif _ready(node) == "False":
                # A node its runtime still lists but reports NotReady (a cluster's kubelet gone
                # quiet): the runtime fails its pods; their Workloads move elsewhere.
                problems[name] = (NODE_LOST, f"node {name} is not ready: {_ready_message(node)}", None)
            elif epoch((node["metadata"].get("annotations") or {}).get(INTERRUPTION_ANNOTATION)) is not None:
                at = epoch(node["metadata"]["annotations"][INTERRUPTION_ANNOTATION]) or now
                message = f"node {name} got a spot interruption notice: it is taken back at {iso(at)}"
                problems[name] = (SPOT_INTERRUPTED, message, max(0.0, at - now))
                self._stop_unowned(name, max(0.0, at - now), now)
            elif (node["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION):
                grace = _float((node["metadata"].get("annotations") or {}).get(DRAIN_GRACE_ANNOTATION))
                problems[name] = (NODE_DRAINED, f"node {name} is being drained", grace)
                self._stop_unowned(name, grace, now)
            for gpu in (node.get("status") or {}).get("gpus") or []:
                if gpu.get("health", "Healthy") != "Healthy":
                    bad_gpus[(name, int(gpu["index"]))] = gpu.get("healthReason") or "unhealthy"
        if problems or bad_gpus:
            for wl in self.ctx.cache.list_live("Workload"):
                if workload_state(wl) is WorkloadState.ADMITTED:
                    found = _problem(wl, problems, bad_gpus)
                    if found is not None and not (
                        found[0] in _SHRINKS and self._shrink(wl, found, problems, bad_gpus, now)
                    ):
                        self._evict(wl, *found, now)

    # -- nodes --------------------------------------------------------------------------------

    def _heartbeat(self, node: Obj, offered: bool, now: float) -> Obj:
        """A node nobody heartbeats any more becomes Ready=Unknown after the grace period."""
        if offered:
            return node
        beat = epoch((node.get("status") or {}).get("lastHeartbeatTime"))
        if beat is None or _ready(node) == "Unknown":
            return node  # never heard of (made by hand), or already marked
        if now < beat + self.grace_seconds:
            self.ctx.wake_at(beat + self.grace_seconds, node)
            return node
        updated = copy.deepcopy(node)
        message = (
            f"the runtime stopped posting heartbeats: the last was at {iso(beat)}, "
            f"{now - beat:.0f}s ago (grace {self.grace_seconds:.0f}s)"
        )
        set_condition(updated, "Ready", "Unknown", "NodeStatusUnknown", message, now)
        stored = self.ctx.update_status(updated)
        if stored is None:
            return node
        self.ctx.event(stored, EventSpec("Warning", "NodeNotReady", message))
        return stored

    def _taint(self, node: Obj) -> None:
        """The GPU-unhealthy taint is there exactly while a GPU of the node is unhealthy."""
        gpus = (node.get("status") or {}).get("gpus") or []
        unhealthy = [g for g in gpus if g.get("health", "Healthy") != "Healthy"]
        taints = list((node.get("spec") or {}).get("taints") or [])
        has = any(_same_taint(t, GPU_UNHEALTHY_TAINT) for t in taints)
        if bool(unhealthy) == has:
            return
        updated = copy.deepcopy(node)
        if unhealthy:
            updated["spec"]["taints"] = [*taints, dict(GPU_UNHEALTHY_TAINT)]
            detail = "; ".join(f"GPU {g['index']}: {g.get('healthReason') or 'unhealthy'}" for g in unhealthy)
            event = EventSpec(
                "Warning", "GPUUnhealthy", f"tainted nvidia.com/gpu=unhealthy:NoSchedule: {detail}"
            )
        else:
            updated["spec"]["taints"] = [t for t in taints if not _same_taint(t, GPU_UNHEALTHY_TAINT)]
            event = EventSpec("Normal", "GPUHealthy", "every GPU is healthy again: taint removed")
        stored = self.ctx.update(updated)
        if stored is not None:
            self.ctx.event(stored, event)

    def _fail_lost_pods(self, node: str, now: float) -> None:
        """No runtime answers for the node: its pods' fate is unknown, which is NodeLost."""
        for pod in self.ctx.cache.list("Pod"):
            if (pod.get("spec") or {}).get("nodeName") != node or is_final(pod):
                continue
            asked = (
                pod
                if stop_requested(pod)
                else self.ctx.update(stop_requested_object(pod, StopReasons.NODE_LOST, now))
            )
            if asked is None:
                continue
            updated = copy.deepcopy(asked)
            status = dict(updated.get("status") or {})
            status.update(
                phase="Failed",
                reason=NODE_LOST,
                message=f"node {node} stopped answering; the pod's processes are lost with it",
                finishTime=iso(now),
            )
            updated["status"] = status
            stored = self.ctx.update_status(updated)
            if stored is not None:
                self.ctx.event(stored, EventSpec("Warning", NODE_LOST, status["message"]))
                self.ctx.metrics.pod_failures.labels(NODE_LOST).inc()

    def _stop_unowned(self, node: str, grace: float | None, now: float) -> None:
        """Pods on a drained node that no Workload owns are stopped here (the others with
        their Workload's eviction)."""
        for pod in self.ctx.cache.list("Pod"):
            spec = pod.get("spec") or {}
            labels = pod["metadata"].get("labels") or {}
            if (
                spec.get("nodeName") != node
                or is_final(pod)
                or stop_requested(pod)
                or labels.get(WORKLOAD_LABEL)
            ):
                continue
            self.ctx.update(stop_requested_object(pod, StopReasons.EVICTED, now, grace))

    # -- workloads -----------------------------------------------------------------------------

    def _shrink(
        self,
        wl: Obj,
        found: tuple[str, str, float | None],
        problems: dict[str, tuple[str, str, float | None]],
        bad_gpus: dict[tuple[str, int], str],
        now: float,
    ) -> bool:
        """An elastic Workload that keeps its minCount without its pods on lost or drained
        nodes and on failed GPUs runs on smaller instead of being requeued (its owner stops
        those pods and restarts the rest at the new size); True when done."""
        gone = {n for n, (reason, _m, _g) in problems.items() if reason in _SHRINKS}
        assignments = shrunk(wl, gone, bad_gpus)
        if assignments is None:
            return False
        kept = {**wl, "status": {**wl["status"], "admission": {"podSetAssignments": assignments}}}
        if _problem(kept, problems, bad_gpus) is not None:
            return False
        cause = found[1]
        if found[0] == NODE_LOST:
            held = {
                p["node"] for a in wl["status"]["admission"]["podSetAssignments"] for p in a.get("pods") or ()
            }
            lost = sorted(held & {n for n, (reason, _m, _g) in problems.items() if reason == NODE_LOST})
            cause = f"node {', '.join(lost)} was lost"
        updated = copy.deepcopy(wl)
        why = f"{cause}; it runs on at the smaller size from its checkpoint"
        event = resize_workload(updated, assignments, found[0], why, now)
        stored = self.ctx.update_status(updated)
        if stored is None:
            return False
        self.ctx.event(stored, EventSpec("Warning", event.reason, event.message))
        return True

    def _evict(self, wl: Obj, reason: str, message: str, grace: float | None, now: float) -> None:
        updated = copy.deepcopy(wl)
        message += "; its pods are stopped and it is requeued (not counted against backoffLimit)"
        event = evict_workload(updated, reason, message, now)
        stored = self.ctx.update_status(updated)
        if stored is None:
            return
        self.ctx.event(stored, EventSpec("Warning", reason, event.message))
        self.ctx.metrics.evictions.labels(reason).inc()
        ns = wl["metadata"].get("namespace") or ""
        for pod in self.ctx.cache.pods_labelled(WORKLOAD_LABEL, wl["metadata"]["name"], ns):
            if not is_final(pod) and not stop_requested(pod):
                self.ctx.update(stop_requested_object(pod, EVICTION_STOP_REASONS[reason], now, grace))


def _problem(
    wl: Obj, problems: dict[str, tuple[str, str, float | None]], bad_gpus: dict[tuple[str, int], str]
) -> tuple[str, str, float | None] | None:
    """Why ``wl`` must leave its placement (a lost node first, then a GPU, then a drain)."""
    found: list[tuple[str, str, float | None]] = []
    for assignment in wl["status"]["admission"].get("podSetAssignments") or []:
        for pod in assignment.get("pods") or []:
            node = pod.get("node")
            if node in problems:
                found.append(problems[node])
            for index in pod.get("gpus") or []:
                why = bad_gpus.get((node, int(index)))
                if why is not None:
                    found.append((GPU_UNHEALTHY, f"GPU {index} of node {node} is unhealthy: {why}", None))
    if not found:
        return None
    return min(found, key=lambda f: _PRECEDENCE.index(f[0]))


def _ready(node: Obj) -> str:
    return str((condition(node, "Ready") or {}).get("status") or "Unknown")


def _ready_message(node: Obj) -> str:
    c = condition(node, "Ready") or {}
    return c.get("message") or c.get("reason") or "no Ready condition"


def _same_taint(a: Obj, b: Obj) -> bool:
    return (a.get("key"), a.get("value") or "", a.get("effect")) == (b["key"], b["value"], b["effect"])


def _float(text: Any) -> float | None:
    try:
        return None if text is None else max(0.0, float(text))
    except (TypeError, ValueError):
        return None
