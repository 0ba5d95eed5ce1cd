"""The pod executor: runs the bound Pods of this runtime's nodes and reports what becomes of them.

For every Pod bound to one of its nodes it keeps the runtime and the store in step:

* a Pending pod the runtime does not know is started. The start is written first
  (``status.handle``), then the runtime records the launch on disk before any process
  exists; a crash between the two leaves a pod the runtime does not know, which the next
  pass starts (the runtime refuses a second start of a uid it knows, so nothing runs twice);
* a pod asked to stop (``metadata.deletionTimestamp``) is stopped (SIGTERM, grace, SIGKILL);
* each phase the runtime reports is written through :data:`POD_TRANSITIONS` with an Event;
  once a final status is stored the runtime may forget the pod (``release``), and a pod that
  was asked to stop is then deleted;
* a pod the store says Running that the runtime has no record of is Failed (NodeLost);
* a process whose Pod object is gone (deleted) is stopped and forgotten.

A runtime that starts gangs as one unit (:class:`SupportsGangStart`: Ray, Kubernetes) gets
every pod of an admitted Workload at once, when all the pods its admission placed exist, and
never one alone. Pods the runtime fails for reasons outside the job (``GangStartFailed``: the
gang could not be placed; ``NodeLost`` on a node that is gone) are casualties: they are
deleted and their Workload is evicted with that reason, so it is requeued, placed anew and
nothing counts against the job's backoffLimit (docs/control-plane.md, "Gangs on distributed
runtimes").

The runtime re-adopts its pods when it is created and reports their status again, so a
manager that was killed loses nothing: statuses are delivered at least once and applying
one twice changes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from muster.api.conditions import condition, iso
from muster.api.labels import ATTEMPT_LABEL, WORKLOAD_LABEL
from muster.api.lifecycle import (
    POD_TRANSITIONS,
    EventSpec,
    IllegalTransition,
    PodPhase,
    WorkloadState,
    check,
    evict_workload,
    is_final,
    phase,
    workload_state,
)
from muster.controllers.context import Context
from muster.controllers.pods.launch import device_binding, pod_launch, pod_ref
from muster.controllers.pods.stop import ended_by_stop, stop_grace, stop_reason, stop_requested
from muster.runtime.base import (
    STOP_REASONS,
    GangLaunch,
    GangMember,
    LaunchError,
    PodExists,
    PodLaunch,
    PodNotFound,
    PodReason,
    PodRef,
    PodRuntimeError,
    PodStatusChange,
    Runtime,
    StopReason,
    SupportsGangStart,
    SupportsNativePods,
    SupportsRetention,
)
from muster.store import codec

__all__ = ["GANG_BACKOFF_MAX_SECONDS", "GANG_BACKOFF_SECONDS", "PodExecutor"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# The runtime's own stop reasons; a controller's other reasons (GangRestart, ...) stop as Stopped
# and the stored final reason is the controller's (the pod's stop-reason annotation).
_RUNTIME_STOP = {r.value: r for r in StopReason}
_STATE = {"waiting": "Waiting", "running": "Running", "terminated": "Terminated"}
_GANG_START_FAILED = PodReason.GANG_START_FAILED.value
_NODE_LOST = PodReason.NODE_LOST.value
WorkloadKey = tuple[str, str]  # (namespace, name)
# A gang the runtime could not place waits before it is admitted again (Kueue's requeuing
# backoff: base * 2^requeues, capped), so a cluster busy with work Muster does not see is not
# asked again and again at once.
GANG_BACKOFF_SECONDS = 10.0
GANG_BACKOFF_MAX_SECONDS = 300.0


class PodExecutor:
    """Keeps one runtime's pods and the store's Pod objects in step (one thread calls it)."""

    def __init__(self, ctx: Context, runtime: Runtime, gang_timeout: float = 60.0) -> None:
        self.ctx = ctx
        self.runtime = runtime
        self.gang_timeout = gang_timeout
        self.node_addresses: dict[str, str] = {}
        # uid -> ref of every pod the runtime keeps a record of (not yet released)
        self._tracked: dict[str, PodRef] = {s.ref.uid: s.ref for s in runtime.pods()}
        self._stopping: set[str] = set()
        # uids whose start is stored and waits for the commit before the runtime acts
        self._starting: set[str] = set()
        # statuses reported by the runtime that could not be stored yet (a conflict): retried
        self._unwritten: dict[str, PodStatusChange] = {}
        # Workloads whose pods the runtime failed for reasons outside the job, to evict once
        # those pods are gone: (namespace, name) -> (reason, message); kept across a conflict
        self._evictions: dict[WorkloadKey, tuple[str, str]] = {}

    @property
    def active(self) -> int:
        """Pods the runtime runs or starts (the manager polls often while there are any)."""
        return len(self._tracked)

    def set_nodes(self, addresses: dict[str, str]) -> None:
        """The nodes this runtime offers, name -> address (MASTER_ADDR, status.hostIP)."""
        self.node_addresses = dict(addresses)

    # -- what the runtime reports -------------------------------------------------------------

    def observe(self, changes: list[PodStatusChange]) -> None:
        """Write each reported status (and any not written before) to its Pod."""
        pending = {**self._unwritten, **{c.ref.uid: c for c in changes}}
        self._unwritten = {}
        for change in pending.values():
            self._apply(change)
        self._evict_casualties()

    def resync(self) -> None:
        """Compare every pod the runtime knows with the store (at start and periodically):
        statuses are applied again (idempotent), processes without a Pod are stopped."""
        self.observe(self.runtime.pods())

    def _apply(self, change: PodStatusChange) -> None:
        ref = change.ref
        pod = self.ctx.cache.get("Pod", ref.name, ref.namespace)
        if pod is None or pod["metadata"].get("uid") != ref.uid:
            self._orphan(change)
            return
        old = PodPhase(phase(pod))
        new = PodPhase(change.phase.value)
        if old == new or is_final(pod):
            if change.final and is_final(pod):
                self._release(ref)
                self._finish_stop(pod)
            return
        try:
            event_reason = check(POD_TRANSITIONS, old, new, f"Pod {ref}")
        except IllegalTransition as exc:
            log.error("%s", exc)
            return
        updated = codec.copy(pod)
        updated["status"] = self._status(pod, change)
        stored = self.ctx.update_status(updated)
        if stored is None:
            self._unwritten[ref.uid] = change
            return
        self.ctx.event(stored, _event(stored, event_reason, new))
        if new is PodPhase.FAILED:
            self._count_failure(stored)
        if change.final:
            self._release(ref)
            self._finish_stop(stored)
            self._note_casualty(stored)

    def _status(self, pod: Obj, change: PodStatusChange) -> Obj:
        status = dict(pod.get("status") or {})
        status["phase"] = change.phase.value
        node = pod["spec"].get("nodeName") or ""
        status["hostIP"] = self.node_addresses.get(node, "127.0.0.1")
        # a pod's own address (Kubernetes), else its node's: processes share the host's network
        status["podIP"] = change.pod_ip or status.get("podIP") or status["hostIP"]
        if change.started_at:
            status["startTime"] = change.started_at
        containers = []
        for c in change.containers:
            entry: Obj = {"name": c.name, "state": _STATE[c.state]}
            for key, value in (
                ("exitCode", c.exit_code),
                ("signal", c.signal),
                ("reason", c.reason.value if c.reason else None),
                ("startedAt", c.started_at),
                ("finishedAt", c.finished_at),
            ):
                if value is not None:
                    entry[key] = value
            containers.append(entry)
        status["containerStatuses"] = containers
        if change.final:
            reason = change.reason.value if change.reason else "Error"
            asked = stop_reason(pod)
            if change.reason in STOP_REASONS and asked:
                reason = asked  # the controller's reason (GangRestart, Suspended, ...)
                containers_reason = change.reason.value
                for entry in containers:
                    if entry.get("reason") == containers_reason:
                        entry["reason"] = asked
            status["reason"] = reason
            status["message"] = change.message
            if change.finished_at:
                status["finishTime"] = change.finished_at
        return status

    def _orphan(self, change: PodStatusChange) -> None:
        """A process whose Pod object is gone (or is a newer pod of the same name)."""
        ref = change.ref
        if change.final:
            self._release(ref)
        elif ref.uid not in self._stopping:
            log.info("stopping %s: its Pod object is gone", ref)
            self._stop(ref, None, StopReason.STOPPED)

    # -- what the store asks ----------------------------------------------------------------

    def sync(self, pods: list[Obj]) -> None:
        """Act on ``pods`` (Pods of this runtime's nodes): start, stop, fail lost, delete."""
        gangs: dict[tuple[str, str, str], list[Obj]] = {}
        gang_runtime = isinstance(self.runtime, SupportsGangStart)
        for pod in pods:
            if pod["spec"].get("nodeName") not in self.node_addresses:
                continue
            uid = pod["metadata"]["uid"]
            if is_final(pod):
                if stop_requested(pod):
                    self._release(pod_ref(pod))
                    self._finish_stop(pod)
                self._note_casualty(pod)  # one reported before a crash: evicted now
            elif stop_requested(pod):
                self._stop_pod(pod)
            elif uid in self._tracked or uid in self._starting:
                continue
            elif phase(pod) == "Running":
                self._fail(pod, "NodeLost", "the runtime has no record of this pod (its state was lost)")
            elif gang_runtime and _workload_of(pod):
                labels = pod["metadata"].get("labels") or {}
                key = (_namespace(pod), _workload_of(pod), labels.get(ATTEMPT_LABEL, ""))
                gangs.setdefault(key, []).append(pod)
            else:
                self._start(pod)
        for (ns, workload, _attempt), members in gangs.items():
            self._start_gang(ns, workload, members)
        self._evict_casualties()

    def stop_orphans(self, pods: list[Obj]) -> None:
        """Stop processes the runtime runs for pods that no longer exist in the store (and let a
        runtime that keeps released pods' remains drop those of the deleted ones)."""
        known = {p["metadata"].get("uid") for p in pods}
        if isinstance(self.runtime, SupportsRetention):
            retain = self.runtime.retain_only
            self.ctx.after_commit(lambda: retain({uid for uid in known if uid}))
        for uid, ref in list(self._tracked.items()):
            if uid not in known and uid not in self._stopping:
                self._stop(ref, None, StopReason.STOPPED)

    def stop_deleted(self, names: set[tuple[str, str]]) -> None:
        """Stop the processes of the pods among ``names`` ((namespace, name): pods that changed)
        that are gone from the store, at once rather than at the next full resync's
        :meth:`stop_orphans`."""
        if not names:
            return
        for uid, ref in list(self._tracked.items()):
            if (ref.namespace, ref.name) not in names or uid in self._stopping:
                continue
            pod = self.ctx.cache.get("Pod", ref.name, ref.namespace or None)
            if pod is None or pod["metadata"].get("uid") != uid:
                self._stop(ref, None, StopReason.STOPPED)

    def _start(self, pod: Obj) -> None:
        marked = self._mark_started(pod)
        if marked is None:
            return  # changed meanwhile: decide again on the next pass
        uid = marked["metadata"]["uid"]
        self._starting.add(uid)
        # were the mark rolled back, the pod is to be started again, not waited on forever
        self.ctx.after_commit(lambda: self._start_marked(marked), undo=lambda: self._starting.discard(uid))

    def _start_marked(self, pod: Obj) -> None:
        """The runtime starts ``pod``, whose start (``status.handle``) is stored."""
        self._starting.discard(pod["metadata"]["uid"])
        try:
            launch = self._launch(pod)
            warnings = self.runtime.start(launch, device_binding(pod))
        except LaunchError as exc:
            self._fail(pod, "Error", f"cannot start: {exc}")
            return
        except PodExists as exc:
            log.info("not starting %s yet: %s", pod_ref(pod), exc)
            self.ctx.cache.mark([("Pod", pod["metadata"].get("namespace") or "", pod["metadata"]["name"])])
            return
        self._tracked[launch.ref.uid] = launch.ref
        for warning in warnings:
            self.ctx.event(pod, EventSpec("Warning", "NotHonoured", warning))

    def _start_gang(self, ns: str, workload: str, members: list[Obj]) -> None:
        """Start the Workload's pods as one gang once all the pods its admission placed exist."""
        wl = self.ctx.cache.get("Workload", workload, ns)
        if wl is None or workload_state(wl) is not WorkloadState.ADMITTED:
            return  # an evicted or finished Workload's pods are stopped, never started
        expected = sum(
            len(a.get("pods") or []) for a in wl["status"]["admission"].get("podSetAssignments") or []
        )
        if len(members) != expected:
            return  # its owner has not created them all yet: the next pass looks again
        marked = []
        for pod in sorted(members, key=lambda p: p["metadata"]["name"]):
            pod = self._mark_started(pod)
            if pod is None:
                return  # changed meanwhile: decide again on the next pass
            marked.append(pod)
        uids = {p["metadata"]["uid"] for p in marked}
        self._starting.update(uids)
        self.ctx.after_commit(
            lambda: self._start_gang_marked(ns, workload, wl, marked),
            undo=lambda: self._starting.difference_update(uids),
        )

    def _start_gang_marked(self, ns: str, workload: str, wl: Obj, marked: list[Obj]) -> None:
        """The runtime starts the gang, whose members' starts are stored."""
        self._starting.difference_update(p["metadata"]["uid"] for p in marked)
        try:
            gang = GangLaunch(
                namespace=ns,
                workload=workload,
                uid=wl["metadata"].get("uid") or "",
                members=tuple(
                    GangMember(self._launch(p), device_binding(p), p["spec"]["nodeName"]) for p in marked
                ),
                timeout_seconds=self.gang_timeout,
            )
            warnings = self.runtime.start_gang(gang)  # type: ignore[attr-defined]
        except LaunchError as exc:
            for pod in marked:
                self._fail(pod, "Error", f"cannot start: {exc}")
            return
        except PodExists as exc:
            log.info("not starting the gang of %s/%s yet: %s", ns, workload, exc)
            self.ctx.cache.mark([("Pod", ns, p["metadata"]["name"]) for p in marked])
            return
        for member in gang.members:
            self._tracked[member.pod.ref.uid] = member.pod.ref
        for warning in warnings:
            self.ctx.event(wl, EventSpec("Warning", "NotHonoured", warning))

    def _launch(self, pod: Obj) -> PodLaunch:
        """What the runtime gets to start ``pod`` (a native runtime: its whole spec, unresolved)."""
        host_ip = self.node_addresses[pod["spec"]["nodeName"]]
        return pod_launch(pod, host_ip, native=isinstance(self.runtime, SupportsNativePods))

    def _mark_started(self, pod: Obj) -> Obj | None:
        """Write the start (``status.handle``) before the runtime acts; the stored pod, or None
        when it changed meanwhile."""
        status = pod.get("status") or {}
        if status.get("handle"):
            return pod
        marked = codec.copy(pod)
        node = pod["spec"]["nodeName"]
        marked["status"] = {
            **status,
            "phase": "Pending",
            "handle": {"runtime": self.runtime.name, "node": node},
        }
        return self.ctx.update_status(marked)

    # -- casualties: pods the runtime failed for reasons outside the job --------------------------

    def _note_casualty(self, pod: Obj) -> None:
        """A pod failed because its gang could not be placed, or with its node: its Workload is
        to be evicted with that reason once the pod is deleted."""
        reason = self._casualty_reason(pod)
        if reason is not None and _workload_of(pod):
            message = (pod.get("status") or {}).get("message") or reason
            self._evictions.setdefault((_namespace(pod), _workload_of(pod)), (reason, message))

    def _casualty_reason(self, pod: Obj) -> str | None:
        """GangStartFailed, or NodeLost on a node that is gone (a process lost on a live node
        is the job's failure: its restart policy decides); None for any other pod."""
        status = pod.get("status") or {}
        if phase(pod) != "Failed":
            return None
        reason = status.get("reason")
        if reason == _GANG_START_FAILED:
            return reason
        if reason == _NODE_LOST and self._node_lost(pod["spec"].get("nodeName") or ""):
            return reason
        return None

    def _evict_casualties(self) -> None:
        """Delete the casualties, then evict their Workloads (one no longer admitted needs
        nothing more). Deleting first means a pod of a failed gang never outlives the eviction
        into the Workload's next admission; a crash in between leaves an admitted Workload
        whose owner recreates the pods, and the gang is started again."""
        for key, (reason, message) in list(self._evictions.items()):
            ns, name = key
            gone = True
            for pod in self.ctx.cache.pods_labelled(WORKLOAD_LABEL, name, ns):
                if self._casualty_reason(pod) == reason:
                    gone &= self.ctx.delete(pod)
            if not gone:
                continue  # changed meanwhile: the next pass tries again
            wl = self.ctx.cache.get("Workload", name, ns)
            if wl is not None and workload_state(wl) is WorkloadState.ADMITTED:
                updated = codec.copy(wl)
                now = self.ctx.now()
                text = f"{message}; requeued (not counted against backoffLimit)"
                if reason == _GANG_START_FAILED:
                    state = updated["status"].setdefault("requeueState", {})
                    delay = min(
                        GANG_BACKOFF_SECONDS * 2 ** int(state.get("count") or 0), GANG_BACKOFF_MAX_SECONDS
                    )
                    state["requeueAt"] = iso(now + delay)
                    text += f", admitted again after {delay:.0f}s"
                evict_workload(updated, reason, text, now)
                stored = self.ctx.update_status(updated)
                if stored is None:
                    continue
                self.ctx.event(stored, EventSpec("Warning", reason, text))
                self.ctx.metrics.evictions.labels(reason).inc()
            del self._evictions[key]

    def _node_lost(self, node: str) -> bool:
        """The runtime no longer offers the node, or offers it not Ready (Ray: a dead node)."""
        if node not in self.node_addresses:
            return True
        obj = self.ctx.cache.get("Node", node)
        ready = condition(obj, "Ready") if obj is not None else None
        return ready is not None and ready.get("status") != "True"

    def _stop_pod(self, pod: Obj) -> None:
        ref = pod_ref(pod)
        if ref.uid in self._tracked:
            if ref.uid not in self._stopping:
                asked = stop_reason(pod) or "Stopped"
                self._stop(ref, stop_grace(pod), _RUNTIME_STOP.get(asked, StopReason.STOPPED))
                self.ctx.event(
                    pod,
                    EventSpec(
                        "Normal",
                        "Stopping",
                        f"stopping ({asked}): SIGTERM, then SIGKILL after the grace period",
                    ),
                )
            return
        # Never started here (or already forgotten): there is no process to stop.
        self._fail(pod, stop_reason(pod) or "Stopped", "stopped before it started")

    def _stop(self, ref: PodRef, grace: float | None, reason: StopReason) -> None:
        """Stop the pod's processes once what asked for it is stored."""
        undo = None if ref.uid in self._stopping else (lambda: self._stopping.discard(ref.uid))
        self._stopping.add(ref.uid)
        self.ctx.after_commit(lambda: self._stop_now(ref, grace, reason), undo=undo)

    def _stop_now(self, ref: PodRef, grace: float | None, reason: StopReason) -> None:
        try:
            self.runtime.stop(ref, grace, reason)
        except PodNotFound:
            self._tracked.pop(ref.uid, None)
            self._stopping.discard(ref.uid)

    def _fail(self, pod: Obj, reason: str, message: str) -> None:
        updated = codec.copy(pod)
        status = dict(updated.get("status") or {})
        status.update(phase="Failed", reason=reason, message=message)
        updated["status"] = status
        stored = self.ctx.update_status(updated)
        if stored is None:
            return
        self.ctx.event(stored, EventSpec("Warning", "Failed", f"{reason}: {message}"))
        self._count_failure(stored)
        self._finish_stop(stored)

    def _count_failure(self, pod: Obj) -> None:
        self.ctx.metrics.pod_failures.labels((pod.get("status") or {}).get("reason") or "Error").inc()

    def _finish_stop(self, pod: Obj) -> None:
        """A final pod the stop ended: its status is stored, so the object goes. One that ended
        on its own before the stop reached it keeps its outcome, as any pod that ended does,
        until its owner deletes it."""
        if stop_requested(pod) and is_final(pod) and ended_by_stop(pod):
            self.ctx.delete(pod)

    def _release(self, ref: PodRef) -> None:
        """Let the runtime forget the pod once its final status is stored."""
        self.ctx.after_commit(lambda: self._release_now(ref))

    def _release_now(self, ref: PodRef) -> None:
        try:
            self.runtime.release(ref)
        except PodRuntimeError as exc:  # PodStillRunning: a status older than the runtime's
            log.warning("cannot release %s yet: %s", ref, exc)
            return
        self._tracked.pop(ref.uid, None)
        self._stopping.discard(ref.uid)


def _workload_of(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL) or ""


def _namespace(pod: Obj) -> str:
    return pod["metadata"].get("namespace") or "default"


def _event(pod: Obj, reason: str, new: PodPhase) -> EventSpec:
    status = pod.get("status") or {}
    if new is PodPhase.RUNNING:
        return EventSpec("Normal", reason, f"running on node {pod['spec'].get('nodeName')}" + _gpus(pod))
    if new is PodPhase.SUCCEEDED:
        return EventSpec("Normal", reason, "every container exited 0")
    detail = status.get("message") or ""
    return EventSpec("Warning", status.get("reason") or reason, detail or "failed")


def _gpus(pod: Obj) -> str:
    gpus = pod["spec"].get("gpus") or []
    return f" with GPU(s) {','.join(str(g) for g in gpus)}" if gpus else ""
