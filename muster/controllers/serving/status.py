"""The status of an InferenceService, as its controller writes it once per pass.

Conditions, as KServe reports them: ``PredictorReady`` (every revision taking traffic has a
ready replica, or is scaled to zero by choice), ``IngressReady`` (the gateway routes the
service's model names) and ``Ready`` (both). Every change of ``Ready`` is an Event.
Each replica is reported with its state: ``Pending`` (its Workload waits for admission, with
the scheduler's reason), ``Starting`` (its pod runs, its readiness probe has not passed),
``Ready``, ``Draining``, ``Stopping`` or ``Failed`` (it exited and is being restarted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from muster.api.conditions import condition, set_condition
from muster.api.lifecycle import EventSpec, WorkloadState, is_final, phase, workload_state
from muster.controllers.pods.stop import stop_requested
from muster.controllers.serving.replicas import RESTARTS_ANNOTATION

if TYPE_CHECKING:
    from muster.controllers.serving.controller import _Pass

__all__ = ["ReplicaView", "replica_state", "write_status"]

Obj = dict[str, Any]


@dataclass
class ReplicaView:
    """A replica as one pass sees it: its Workload, its pod, and what the gateway says of it."""

    name: str
    revision: str
    workload: Obj
    pod: Obj | None
    draining: bool
    ready: bool
    inflight: int


def replica_state(v: ReplicaView) -> tuple[str, str]:
    """(state, message) of a replica, for the status and ``muster why``."""
    wl_status = v.workload.get("status") or {}
    if v.draining:
        return "Draining", f"{v.inflight} request(s) still in flight"
    if v.pod is not None and stop_requested(v.pod) and not is_final(v.pod):
        return "Stopping", "its pod is being stopped"
    state = workload_state(v.workload)
    if state is WorkloadState.PENDING:
        pending = wl_status.get("pending") or {}
        return "Pending", pending.get("message") or "waiting for admission"
    if state is WorkloadState.EVICTING:
        evicted = condition(v.workload, "Evicted") or {}
        return "Pending", f"evicted ({evicted.get('reason', '')}): {evicted.get('message', '')}".strip()
    if v.pod is None:
        return "Starting", "admitted; its pod is being created"
    if is_final(v.pod):
        status = v.pod.get("status") or {}
        return "Failed", f"{status.get('reason') or 'Error'}: {status.get('message') or ''}".strip()
    if v.ready:
        return "Ready", ""
    return "Starting", "waiting for its readiness probe" if phase(
        v.pod
    ) == "Running" else "its pod is starting"


def write_status(p: _Pass, views: dict[str, ReplicaView], priority_ok: bool) -> Obj | None:
    """Fill in the pass's status and store it; the stored service, or None when nothing changed
    (or it changed meanwhile: the next pass decides again)."""
    status = p.status
    status["observedGeneration"] = p.isvc["metadata"].get("generation")
    if p.ctl.url:
        status["url"] = p.ctl.url
    status["modelNames"] = list(p.model.model_names or [p.name])
    replicas = []
    for v in views.values():
        state, message = replica_state(v)
        pod = v.pod or {}
        pstatus, pspec = pod.get("status") or {}, pod.get("spec") or {}
        entry: Obj = {"name": v.name, "revision": v.revision, "state": state}
        host = pstatus.get("podIP") or pstatus.get("hostIP")
        port = (pod.get("metadata") or {}).get("annotations", {}).get("muster.dev/serving-port")
        if host and port:
            entry["address"] = f"{host}:{port}"
        if pspec.get("nodeName"):
            entry["node"] = pspec["nodeName"]
        if pspec.get("gpus"):
            entry["gpus"] = list(pspec["gpus"])
        restarts = int((v.workload["metadata"].get("annotations") or {}).get(RESTARTS_ANNOTATION) or 0)
        if restarts:
            entry["restarts"] = restarts
        if message:
            entry["message"] = message
        replicas.append(entry)
    status["replicas"] = replicas
    by_revision: dict[str, int] = {}
    for v in views.values():
        if v.ready and not v.draining:
            by_revision[v.revision] = by_revision.get(v.revision, 0) + 1
    for rev in status.get("revisions") or []:
        rev["readyReplicas"] = by_revision.get(rev["name"], 0)
    status["readyReplicas"] = sum(by_revision.values())
    status["desiredReplicas"] = sum(int(r.get("desiredReplicas") or 0) for r in status.get("revisions") or [])
    _conditions(p, views, priority_ok)
    if status == (p.isvc.get("status") or {}):
        return None
    updated = dict(p.isvc)
    updated["status"] = status
    return p.ctx.update_status(updated)


def _conditions(p: _Pass, views: dict[str, ReplicaView], priority_ok: bool) -> None:
    holder = {"status": p.status}
    before = (condition(holder, "Ready") or {}).get("status")
    predictor = _predictor(p, views, priority_ok)
    ingress = _ingress(p)
    set_condition(holder, "PredictorReady", *predictor, p.now)
    set_condition(holder, "IngressReady", *ingress, p.now)
    if predictor[0] == "True" and ingress[0] == "True":
        ready = ("True", predictor[1], predictor[2])
    else:
        ready = ("False", *(predictor[1:] if predictor[0] != "True" else ingress[1:]))
    set_condition(holder, "Ready", *ready, p.now)
    if before != ready[0]:
        kind = "Normal" if ready[0] == "True" else "Warning"
        p.events.append(EventSpec(kind, "Ready" if ready[0] == "True" else ready[1], ready[2]))


def _predictor(p: _Pass, views: dict[str, ReplicaView], priority_ok: bool) -> tuple[str, str, str]:
    if not priority_ok:
        return "False", "PriorityClassNotFound", getattr(p, "missing_priority", "")
    traffic = [t for t in p.status.get("traffic") or [] if t.get("percent")]
    revisions = {r["name"]: r for r in p.status.get("revisions") or []}
    waiting: list[str] = []
    scaled_to_zero = 0
    for t in traffic:
        name = t["revisionName"]
        mine = [v for v in views.values() if v.revision == name and not v.draining]
        if any(v.ready for v in mine):
            continue
        if not mine and int((revisions.get(name) or {}).get("desiredReplicas") or 0) == 0:
            scaled_to_zero += 1
            continue
        states = [replica_state(v) for v in mine]
        pending = [m for s, m in states if s == "Pending"]
        failed = [m for s, m in states if s == "Failed"]
        if failed:
            return "False", "ReplicaFailed", f"revision {name}: {failed[0]}"
        if pending:
            return "False", "ReplicasPending", f"revision {name}: {pending[0]}"
        waiting.append(name)
    if waiting:
        return "False", "ReplicasStarting", f"revision {', '.join(waiting)}: no replica is ready yet"
    if not traffic:
        return "False", "NoRevision", "no revision takes traffic yet"
    if scaled_to_zero == len(traffic):
        return "True", "ScaledToZero", "no replica runs; the first request starts one and waits for it"
    ready = sum(1 for v in views.values() if v.ready and not v.draining)
    return "True", "ReplicasReady", f"{ready} replica(s) ready"


def _ingress(p: _Pass) -> tuple[str, str, str]:
    if not p.ctl.url:
        return "False", "NoGateway", "no gateway serves this control plane (muster up starts one)"
    mine = set(p.model.model_names or [p.name])
    for key, route in p.ctl.routes.items():
        if key == p.key:
            continue
        clash = mine & set(route.models)
        if clash and _older(p.ctx.cache.get("InferenceService", key[1], key[0]), p.isvc):
            names = ", ".join(sorted(clash))
            return (
                "False",
                "ModelNameConflict",
                f"{names} is served by {key[0]}/{key[1]}; rename it in spec.modelNames",
            )
    return "True", "Routed", f"{', '.join(sorted(mine))} at {p.ctl.url}/v1"


def _older(other: Obj | None, mine: Obj) -> bool:
    if other is None:
        return False
    a = (other["metadata"].get("creationTimestamp") or "", other["metadata"]["name"])
    b = (mine["metadata"].get("creationTimestamp") or "", mine["metadata"]["name"])
    return a < b
