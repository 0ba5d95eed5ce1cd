"""The InferenceService controller: revisions, the traffic split, the replica count, replicas
as one-pod Workloads, their pods, and the routes the gateway serves.

One reconcile of a service, level-triggered (everything is derived from the service, its
replicas' Workloads and pods, and what the gateway measured, so a pass interrupted anywhere is
completed by the next):

1. a changed predictor is a new revision (:mod:`.revisions`), and the split is decided;
2. each revision's replica count: none for a revision without traffic or one retired, one
   for a new revision until it is ready, else the autoscaler's (:mod:`.autoscaler`, on a 2 s
   tick and at once when a request waits at zero);
3. replicas are added as Workloads (the scheduler admits and places them like any other),
   and removed by draining: the drain is written on the Workload first, the gateway stops
   sending it requests, and its pod is stopped only once its last request finished (or
   ``timeoutSeconds`` passed): no request is dropped by a scale-down;
4. an admitted replica gets its pod, bound to its placement; a pod that exits on its own is
   restarted on the same admission (with back-off when it keeps exiting);
5. the routes (ready replicas' addresses, the split, the routing settings) go to the gateway;
6. the status (replicas, revisions, traffic, conditions, the autoscaler's reading) is written,
   with an Event for every scaling decision, revision, split, restart and drain.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.conditions import epoch, iso
from muster.api.labels import (
    SERVING_PORT_ANNOTATION,
    SERVING_REVISION_LABEL,
    SERVING_SERVICE_LABEL,
    WORKLOAD_LABEL,
)
from muster.api.lifecycle import EventSpec, WorkloadState, is_final, phase, workload_state
from muster.api.serving import InferenceServiceSpec
from muster.controllers.context import Context
from muster.controllers.pods.stop import stop_requested, stop_requested_object
from muster.controllers.scheduling.priority import PriorityClassMissing, priority_of
from muster.controllers.scheduling.snapshot import DEFAULT_QUEUE
from muster.controllers.serving.autoscaler import (
    TICK_SECONDS,
    Observation,
    ScalerSettings,
    ScalerState,
    decide,
)
from muster.controllers.serving.replicas import (
    DRAIN_ANNOTATION,
    RESTARTED_AT_ANNOTATION,
    RESTARTS_ANNOTATION,
    replica_index,
    replica_name,
    replica_pod,
    replica_workload,
)
from muster.controllers.serving.revisions import kept_revisions, split_traffic, sync_revisions
from muster.controllers.serving.status import ReplicaView, write_status
from muster.controllers.trainingjob.pods import pick_port
from muster.gateway.table import Backend, ReplicaLoad, RevisionLoad, Route

__all__ = ["DataPlane", "ServingController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
SCALED_DOWN = "ScaledDown"
_MAX_BACKOFF = 60.0
_STATUS_REFRESH = 30.0  # seconds between writes of an unchanged autoscaler decision


class DataPlane(Protocol):
    """The gateway as the controller sees it (:class:`muster.gateway.gateway.Gateway`)."""

    def apply(self, routes: Sequence[Route]) -> None: ...

    def load(self, namespace: str, name: str) -> dict[str, RevisionLoad]: ...

    def replica_load(self, namespace: str, name: str) -> dict[str, ReplicaLoad]: ...

    def drained(self, namespace: str, name: str, replica: str) -> bool: ...


class ServingController:
    def __init__(self, ctx: Context, native_pods: bool = False) -> None:
        self.ctx = ctx
        # pods with addresses of their own (Kubernetes) listen on the predictor's port
        self.native_pods = native_pods
        self.dataplane: DataPlane | None = None
        self.url: str | None = None
        self.routes: dict[Key, Route] = {}
        self.scalers: dict[tuple[str, str, str], ScalerState] = {}
        self.readings: dict[tuple[str, str, str], RevisionLoad] = {}
        self.next_tick: dict[Key, float] = {}
        self._pushed: dict[Key, Route] | None = None
        self.created = 0  # replica Workloads created since the manager last reset it
        # the autoscaler's latest decision per revision (the status keeps one when it changes)
        self.decisions: dict[tuple[str, str, str], dict[str, Any]] = {}

    def attach(self, dataplane: DataPlane, url: str) -> None:
        """Serve through ``dataplane`` (the gateway at ``url``) from now on."""
        self.dataplane, self.url = dataplane, url
        self._pushed = None

    def reconcile(self, isvc: Obj) -> None:
        _Pass(self, isvc).run()
        # the gateway must not route to an address the store has not committed yet
        self.ctx.after_commit(self.push)

    def forget(self, namespace: str, name: str) -> None:
        """The service is gone: stop routing to it (its replicas are collected as garbage)."""
        self.routes.pop((namespace, name), None)
        self.next_tick.pop((namespace, name), None)
        for key in [k for k in self.scalers if k[:2] == (namespace, name)]:
            self.scalers.pop(key, None)
            self.readings.pop(key, None)
            self.decisions.pop(key, None)
        self.ctx.after_commit(self.push)

    def decision(self, namespace: str, name: str, revision: str) -> dict[str, Any] | None:
        """The autoscaler's latest decision for a revision (fresher than the status's)."""
        return self.decisions.get((namespace, name, revision))

    def push(self) -> None:
        if self.dataplane is not None and self._pushed != self.routes:
            self.dataplane.apply(list(self.routes.values()))
            self._pushed = dict(self.routes)

    def load(self, ns: str, name: str) -> dict[str, RevisionLoad]:
        return self.dataplane.load(ns, name) if self.dataplane is not None else {}

    def replica_load(self, ns: str, name: str) -> dict[str, ReplicaLoad]:
        return self.dataplane.replica_load(ns, name) if self.dataplane is not None else {}


class _Pass:
    """One reconcile of one service; its status is written once, at the end."""

    def __init__(self, ctl: ServingController, isvc: Obj) -> None:
        self.ctl, self.ctx = ctl, ctl.ctx
        self.isvc = isvc
        self.spec: Obj = isvc["spec"]
        self.model = InferenceServiceSpec.model_validate(self.spec)
        self.status: Obj = copy.deepcopy(isvc.get("status") or {})
        meta = isvc["metadata"]
        self.name, self.ns, self.uid = meta["name"], meta.get("namespace") or "default", meta.get("uid")
        self.key: Key = (self.ns, self.name)
        self.now = self.ctx.now()
        self.events: list[EventSpec] = []
        self.wake: list[float] = []
        self.replica_load = ctl.replica_load(self.ns, self.name)

    def run(self) -> None:
        created = sync_revisions(self.name, self.spec, self.status, self.now)
        if created:
            self.events.append(EventSpec("Normal", "RevisionCreated", f"revision {created} of the predictor"))
        workloads = self._workloads()
        views = {w["metadata"]["name"]: self._view(w) for w in workloads}
        ready = self._ready_revisions(views)
        split = split_traffic(self.spec, self.status, ready)
        if split.note:
            self.events.append(EventSpec("Normal", "TrafficSplit", f"traffic: {split.note}"))
        traffic = dict(split.traffic)
        priority = self._priority()
        kept = kept_revisions(self.status)
        for rev in list(self.status.get("revisions") or []):
            name = rev["name"]
            mine = [v for v in views.values() if v.revision == name]
            desired = self._desired(rev, traffic.get(name, 0), name in kept, name in ready, mine)
            rev["desiredReplicas"] = desired
            if priority is not None:
                self._scale(rev, mine, desired, priority)
            if name not in kept and not mine:
                self.status["revisions"].remove(rev)
                self.events.append(EventSpec("Normal", "RevisionRetired", f"revision {name} retired"))
        for view in views.values():
            self._pod(view)
        self.ctl.routes[self.key] = self._route(views, split.traffic)
        stored = write_status(self, views, priority is not None)
        if stored is not None:
            for event in self.events:
                self.ctx.event(stored, event)
        if self.wake:
            self.ctx.wake_at(min(self.wake), self.isvc)

    # -- replicas as they are ---------------------------------------------------------------------

    def _workloads(self) -> list[Obj]:
        out = []
        for wl in self.ctx.cache.list("Workload", self.ns):
            labels = wl["metadata"].get("labels") or {}
            if labels.get(SERVING_SERVICE_LABEL) != self.name:
                continue
            if any(r.get("uid") == self.uid for r in wl["metadata"].get("ownerReferences") or []):
                out.append(wl)
        return sorted(out, key=lambda w: replica_index(w["metadata"]["name"]))

    def _view(self, wl: Obj) -> ReplicaView:
        name = wl["metadata"]["name"]
        pods = [
            p
            for p in self.ctx.cache.pods_labelled(WORKLOAD_LABEL, name, self.ns)
            if any(r.get("uid") == self.uid for r in p["metadata"].get("ownerReferences") or [])
        ]
        pod = pods[0] if pods else None
        load = self.replica_load.get(name)
        return ReplicaView(
            name=name,
            revision=(wl["metadata"].get("labels") or {}).get(SERVING_REVISION_LABEL, ""),
            workload=wl,
            pod=pod,
            draining=bool((wl["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION)),
            ready=bool(load and load.ready and pod is not None and phase(pod) == "Running"),
            inflight=load.inflight if load else 0,
        )

    def _ready_revisions(self, views: dict[str, ReplicaView]) -> set[str]:
        """Revisions that have had a ready replica (recorded in the status, once)."""
        ready_now = {v.revision for v in views.values() if v.ready}
        out = set()
        for rev in self.status.get("revisions") or []:
            if rev["name"] in ready_now and not rev.get("readyAt"):
                rev["readyAt"] = iso(self.now)
            if rev.get("readyAt"):
                out.add(rev["name"])
                self.status["latestReadyRevision"] = rev["name"]
        return out

    # -- how many --------------------------------------------------------------------------------------

    def _desired(self, rev: Obj, percent: int, kept: bool, ready: bool, mine: list[ReplicaView]) -> int:
        name = rev["name"]
        low, high = self.model.replica_bounds()
        canary = self.spec.get("canaryTrafficPercent")
        warming = (
            name == self.status.get("latestCreatedRevision")
            and not ready
            and kept
            and (canary is None or canary > 0)
        )
        if not kept or (percent == 0 and not warming):
            self._forget_scaler(name)
            return 0
        current = len([v for v in mine if not v.draining])
        key = (self.ns, self.name, name)
        state = self.ctl.scalers.get(key)
        reading = self.ctl.load(self.ns, self.name).get(name)
        held = reading.held if reading else 0
        due = self.now >= self.ctl.next_tick.get(self.key, 0.0) or (held and current == 0)
        previous = int(rev.get("desiredReplicas") or 0)
        if state is None:
            state = self.ctl.scalers[key] = ScalerState()
            due = True
        if not due:
            desired = state.desired if state.desired is not None else previous
        else:
            seen = self._observation(key, reading)
            settings = self._settings(low, high)
            decision = decide(
                state, settings, self.now, seen, sum(1 for v in mine if v.ready), max(current, previous)
            )
            desired = decision.desired
            record = {**decision.to_dict(), "decidedAt": iso(self.now)}
            self.ctl.decisions[key] = record
            if _worth_writing(rev.get("autoscaler"), record, self.now):
                rev["autoscaler"] = record
            if desired != previous:
                self.events.append(
                    EventSpec(
                        "Normal",
                        "Scaled",
                        f"revision {name}: {previous} -> {desired} replica(s) ({decision.reason})",
                    )
                )
            self.ctl.next_tick[self.key] = self.now + TICK_SECONDS
        if warming:
            desired = max(desired, min(high, 1))
        self.wake.append(self.ctl.next_tick.get(self.key, self.now + TICK_SECONDS))
        return desired

    def _observation(self, key: tuple[str, str, str], reading: RevisionLoad | None) -> Observation:
        if reading is None:
            return Observation(0.0)
        before = self.ctl.readings.get(key)
        self.ctl.readings[key] = reading
        last = None
        if reading.last_request:
            last = self.now - (reading.at - reading.last_request)
        if before is None or reading.at - before.at <= 1e-3:
            value = float(reading.inflight + reading.held)
        elif self.model.scale_metric == "rps":
            value = (reading.requests - before.requests) / (reading.at - before.at)
        else:
            value = (reading.area - before.area) / (reading.at - before.at)
        return Observation(value, reading.held, last)

    def _settings(self, low: int, high: int) -> ScalerSettings:
        m = self.model
        stable = float(m.stable_window_seconds)
        return ScalerSettings(
            target=max(0.01, m.target_per_replica() * m.target_utilization_percentage / 100),
            min_replicas=low,
            max_replicas=high,
            stable_window=stable,
            panic_window=max(TICK_SECONDS, round(stable * m.panic_window_percentage / 100)),
            panic_threshold=m.panic_threshold_percentage / 100,
            scale_down_delay=float(m.scale_down_delay_seconds),
            scale_to_zero_delay=float(m.scale_to_zero_delay_seconds),
        )

    def _forget_scaler(self, revision: str) -> None:
        self.ctl.scalers.pop((self.ns, self.name, revision), None)
        self.ctl.readings.pop((self.ns, self.name, revision), None)
        self.ctl.decisions.pop((self.ns, self.name, revision), None)

    # -- making it so -----------------------------------------------------------------------------------

    def _scale(
        self, rev: Obj, mine: list[ReplicaView], desired: int, priority: tuple[int, str | None]
    ) -> None:
        active = [v for v in mine if not v.draining]
        draining = [v for v in mine if v.draining]
        missing = desired - len(active)
        while missing > 0 and draining:  # a replica on its way out is cheaper than a new one
            v = max(draining, key=lambda d: (d.ready, d.inflight))
            draining.remove(v)
            if self._set_drain(v, None):
                self.events.append(EventSpec("Normal", "ReplicaKept", f"{v.name} is no longer drained"))
                missing -= 1
        taken = {replica_index(v.name) for v in mine}
        index = 0
        for _ in range(max(0, missing)):
            while index in taken:
                index += 1
            taken.add(index)
            name = replica_name(rev["name"], index)
            wl = replica_workload(
                self.isvc,
                rev["name"],
                rev["predictor"],
                name,
                queue=self._queue(),
                priority=priority[0],
                priority_class=self.spec.get("priorityClassName"),
            )
            if self.ctx.create(wl) is not None:
                self.ctl.created += 1
                self.events.append(EventSpec("Normal", "ReplicaCreated", f"{name} (revision {rev['name']})"))
        if missing < 0:
            for v in _victims(active, -missing):
                if workload_state(v.workload) is WorkloadState.PENDING and v.pod is None:
                    if self.ctx.delete(v.workload):
                        self.events.append(
                            EventSpec("Normal", "ReplicaRemoved", f"{v.name} (was not admitted)")
                        )
                elif self._set_drain(v, iso(self.now)):
                    v.draining = True
                    self.events.append(
                        EventSpec("Normal", "ReplicaDraining", f"{v.name}: no new requests; stops once idle")
                    )
        for v in mine:
            if v.draining:
                self._finish_drain(v)

    def _set_drain(self, v: ReplicaView, when: str | None) -> bool:
        wl = copy.deepcopy(v.workload)
        annotations = wl["metadata"].setdefault("annotations", {})
        if when is None:
            annotations.pop(DRAIN_ANNOTATION, None)
        else:
            annotations[DRAIN_ANNOTATION] = when
        stored = self.ctx.update(wl)
        if stored is not None:
            v.workload = stored
            v.draining = when is not None
        return stored is not None

    def _finish_drain(self, v: ReplicaView) -> None:
        """Stop a drained replica's pod once its requests are done, then release its Workload."""
        since = epoch((v.workload["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION)) or self.now
        timed_out = self.now >= since + self.model.timeout_seconds
        pod = v.pod
        if pod is not None and not is_final(pod):
            dp = self.ctl.dataplane
            idle = dp is None or dp.drained(self.ns, self.name, v.name) or phase(pod) != "Running"
            if not idle and not timed_out:
                self.wake.append(min(since + self.model.timeout_seconds, self.now + 0.5))
                return
            if not stop_requested(pod):
                self.ctx.update(stop_requested_object(pod, SCALED_DOWN, self.now))
            return
        if pod is not None:
            self.ctx.delete(pod)
        if self.ctx.delete(v.workload):
            self.events.append(EventSpec("Normal", "ReplicaStopped", f"{v.name} drained and stopped"))

    def _pod(self, v: ReplicaView) -> None:
        """Create an admitted replica's pod; restart it when it exited on its own."""
        if v.draining or workload_state(v.workload) is not WorkloadState.ADMITTED:
            return
        pod = v.pod
        restarts = int((v.workload["metadata"].get("annotations") or {}).get(RESTARTS_ANNOTATION) or 0)
        if pod is not None and is_final(pod) and not stop_requested(pod):
            if not self._may_restart(v, restarts):
                return
            wl = copy.deepcopy(v.workload)
            annotations = wl["metadata"].setdefault("annotations", {})
            annotations[RESTARTS_ANNOTATION] = str(restarts + 1)
            annotations[RESTARTED_AT_ANNOTATION] = iso(self.now)
            stored = self.ctx.update(wl)  # the restart is counted before its pod goes
            if stored is None or not self.ctx.delete(pod):
                return
            v.workload, v.pod, restarts = stored, None, restarts + 1
            status = pod.get("status") or {}
            reason = status.get("reason") or "Error"
            self.events.append(
                EventSpec(
                    "Warning",
                    "ReplicaRestarted",
                    f"{v.name} exited ({reason}: {status.get('message', '')}); restart {restarts}",
                )
            )
        if v.pod is not None:
            return
        admission = (v.workload.get("status") or {}).get("admission") or {}
        placements = [p for a in admission.get("podSetAssignments") or [] for p in a.get("pods") or []]
        if not placements:
            return
        revision = next((r for r in self.status.get("revisions") or [] if r["name"] == v.revision), None)
        if revision is None:
            return
        predictor = revision["predictor"]
        port = int(predictor.get("port") or 8080) if self.ctl.native_pods else pick_port()
        pod = replica_pod(
            self.isvc,
            v.workload,
            predictor,
            placements[0],
            port=port,
            host="0.0.0.0" if self.ctl.native_pods else "127.0.0.1",
            restarts=restarts,
        )
        created = self.ctx.create(pod)
        if created is not None:
            v.pod = created

    def _may_restart(self, v: ReplicaView, restarts: int) -> bool:
        """Back-off for a replica that keeps exiting: its n-th restart comes 2^(n-2) s (1 s, 2 s,
        4 s ... at most 60 s) after the one before; the first is at once."""
        if restarts < 1:
            return True
        last = epoch((v.workload["metadata"].get("annotations") or {}).get(RESTARTED_AT_ANNOTATION))
        at = (last or self.now) + min(_MAX_BACKOFF, 2.0 ** (restarts - 1))
        if self.now >= at:
            return True
        self.wake.append(at)
        return False

    # -- routes ------------------------------------------------------------------------------------------

    def _route(self, views: dict[str, ReplicaView], traffic: tuple[tuple[str, int], ...]) -> Route:
        predictors = {r["name"]: r["predictor"] for r in self.status.get("revisions") or []}
        backends = []
        for v in views.values():
            pod = v.pod
            if pod is None or phase(pod) != "Running" or stop_requested(pod):
                continue
            status = pod.get("status") or {}
            host = status.get("podIP") or status.get("hostIP")
            port = (pod["metadata"].get("annotations") or {}).get(SERVING_PORT_ANNOTATION)
            if not host or not port:
                continue
            readiness = (predictors.get(v.revision) or {}).get("readinessPath") or "/health"
            backends.append(Backend(v.name, v.revision, host, int(port), readiness, v.draining))
        m = self.model
        lb = m.load_balancing
        return Route(
            namespace=self.ns,
            name=self.name,
            models=tuple(m.model_names or [self.name]),
            traffic=traffic,
            backends=tuple(backends),
            strategy=lb.strategy,
            replication=lb.prefix_hash.replication,
            mean_load_factor=lb.prefix_hash.mean_load_factor,
            prefix_chars=lb.prefix_hash.prefix_char_length,
            container_concurrency=m.container_concurrency,
            max_queued=m.max_queued_requests,
            queue_timeout=m.queue_timeout_seconds,
            timeout=float(m.timeout_seconds),
            created=epoch(self.isvc["metadata"].get("creationTimestamp")) or 0.0,
        )

    # -- queue and priority --------------------------------------------------------------------------------

    def _queue(self) -> str | None:
        labels = self.isvc["metadata"].get("labels") or {}
        queue = self.spec.get("queueName") or labels.get(QUEUE_LABEL)
        if not queue and self.ctx.cache.get("LocalQueue", DEFAULT_QUEUE, self.ns) is not None:
            queue = DEFAULT_QUEUE
        return queue

    def _priority(self) -> tuple[int, str | None] | None:
        labels = self.isvc["metadata"].get("labels") or {}
        named = self.spec.get("priorityClassName") or labels.get(PRIORITY_LABEL)
        try:
            return priority_of(self.ctx.cache.list("PriorityClass"), named)
        except PriorityClassMissing as exc:
            self.missing_priority = str(exc)
            return None


def _worth_writing(stored: Obj | None, record: Obj, now: float) -> bool:
    """Whether a decision goes to the status: when the count or the mode changed, else at most
    every 30 s (a tick every 2 s would otherwise write the service for ever)."""
    if not stored:
        return True
    if (stored.get("desired"), stored.get("panicking")) != (record["desired"], record["panicking"]):
        return True
    return now - (epoch(stored.get("decidedAt")) or 0.0) >= _STATUS_REFRESH


def _victims(active: list[ReplicaView], count: int) -> list[ReplicaView]:
    """Replicas to remove first: not admitted, not ready, then the least busy, newest first."""

    def cost(v: ReplicaView) -> tuple[int, int, int, int]:
        admitted = workload_state(v.workload) is not WorkloadState.PENDING
        return (int(admitted), int(v.ready), v.inflight, -replica_index(v.name))

    return sorted(active, key=cost)[:count]
