"""The lifecycles the control plane moves objects through, as explicit transition tables.

Three tables, one per lifecycle, each edge with why it happens:

* :data:`WORKLOAD_TRANSITIONS`: Pending -> Admitted -> Evicting -> Pending (requeued), and
  Finished from any of them (docs/control-plane.md, "Workload lifecycle");
* :data:`POD_TRANSITIONS`: the phases the pod executor writes from what the runtime reports;
* :data:`JOB_TRANSITIONS`: a TrainingJob's phase, the latest of its phase conditions.

Every change goes through :func:`check` (illegal transitions are rejected here and nowhere
else) and returns an :class:`EventSpec` that the caller records as an Event.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from muster.api.conditions import condition, is_true, iso, set_condition

__all__ = [
    "FINAL_PHASES",
    "JOB_PHASE_CONDITIONS",
    "JOB_TRANSITIONS",
    "KEEPS_QUEUE_PLACE",
    "POD_TRANSITIONS",
    "WORKLOAD_TRANSITIONS",
    "EventSpec",
    "IllegalTransition",
    "JobPhase",
    "PodPhase",
    "WorkloadState",
    "admit_workload",
    "check",
    "describe_failure",
    "evict_workload",
    "exit_code",
    "finish_workload",
    "is_final",
    "job_phase",
    "move_job",
    "phase",
    "requeue_keeps_place",
    "requeue_workload",
    "resize_workload",
    "set_job_message",
    "workload_state",
]

Obj = dict[str, Any]


class IllegalTransition(RuntimeError):
    """A change a lifecycle table does not allow; the message names the object and the edge."""


@dataclass(frozen=True)
class EventSpec:
    """An Event to record about the object that changed."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


def check(table: dict[tuple[Any, Any], str], frm: Any, to: Any, what: str) -> str:
    """Why ``frm -> to`` happens, from ``table``; IllegalTransition when it has no such edge."""
    why = table.get((frm, to))
    if why is None:
        allowed = sorted(str(b) for a, b in table if a == frm)
        raise IllegalTransition(
            f"{what}: illegal transition {frm} -> {to} (from {frm} only: {', '.join(allowed) or 'none'})"
        )
    return why


# -- Workload ----------------------------------------------------------------------------


class WorkloadState(StrEnum):
    PENDING = "Pending"  # no admission: waiting in its queue, or inactive
    ADMITTED = "Admitted"  # quota reserved and every pod placed
    EVICTING = "Evicting"  # admission kept (quota held) until its pods are gone
    FINISHED = "Finished"  # its owner is done; quota released


_W = WorkloadState
WORKLOAD_TRANSITIONS: dict[tuple[WorkloadState, WorkloadState], str] = {
    # the scheduler reserved quota and placed every pod of the gang (admitted means placed)
    (_W.PENDING, _W.ADMITTED): "admitted",
    # an elastic workload resized in place: grown into free capacity, or shrunk by a lost node
    (_W.ADMITTED, _W.ADMITTED): "resized",
    # the scheduler chose it as a victim, or its owner set spec.active=false (suspend)
    (_W.ADMITTED, _W.EVICTING): "evicted",
    # every pod is terminal or gone: the admission is cleared and it queues again
    (_W.EVICTING, _W.PENDING): "requeued",
    # its owner finished (failed) before it was ever admitted
    (_W.PENDING, _W.FINISHED): "finished while pending",
    # its owner finished: the quota is released at once (pods still stopping count on nodes)
    (_W.ADMITTED, _W.FINISHED): "finished",
    # its owner finished while its pods were being stopped for an eviction
    (_W.EVICTING, _W.FINISHED): "finished while evicting",
}


def workload_state(wl: Obj) -> WorkloadState:
    status = wl.get("status") or {}
    if is_true(wl, "Finished"):
        return WorkloadState.FINISHED
    if status.get("admission"):
        return WorkloadState.EVICTING if is_true(wl, "Evicted") else WorkloadState.ADMITTED
    return WorkloadState.PENDING


def admit_workload(wl: Obj, admission: Obj, now: float) -> EventSpec:
    """Pending -> Admitted: store the admission; the eviction marks of a previous run go."""
    _move_workload(wl, WorkloadState.ADMITTED)
    status = wl.setdefault("status", {})
    status["admission"] = admission
    status.pop("pending", None)
    status.pop("preemptedBy", None)
    queue = admission["clusterQueue"]
    message = f"quota reserved in ClusterQueue {queue}"
    set_condition(wl, "QuotaReserved", "True", "QuotaReserved", message, now)
    set_condition(wl, "Admitted", "True", "Admitted", f"admitted by ClusterQueue {queue}", now)
    for type_ in ("Evicted", "Preempted", "Requeued"):
        if condition(wl, type_) is not None:
            set_condition(wl, type_, "False", "Admitted", "admitted again", now)
    return EventSpec("Normal", "Admitted", f"admitted by ClusterQueue {queue}")


def evict_workload(
    wl: Obj,
    reason: str,
    message: str,
    now: float,
    preemption_reason: str | None = None,
    preempted_by: str | None = None,
) -> EventSpec:
    """Admitted -> Evicting (``reason`` Preempted, Deactivated, GangStartFailed, NodeLost): its
    pods are to be stopped; the admission (and quota) stay until they are gone."""
    _move_workload(wl, WorkloadState.EVICTING)
    set_condition(wl, "Evicted", "True", reason, message, now)
    if preemption_reason is not None:
        set_condition(wl, "Preempted", "True", preemption_reason, message, now)
        wl["status"]["preemptedBy"] = preempted_by
    return EventSpec("Warning" if preemption_reason else "Normal", reason, message)


def resize_workload(wl: Obj, assignments: list[Obj], reason: str, why: str, now: float) -> EventSpec:
    """Admitted -> Admitted at another size: its pod set assignments replaced by
    ``assignments``; ``status.elastic`` counts the resize (every size is a new run of its pods,
    which its owner restarts) and records it; its ``held`` note is the next cycle's to write."""
    _move_workload(wl, WorkloadState.ADMITTED)
    status = wl["status"]
    before = {a["name"]: int(a["count"]) for a in status["admission"].get("podSetAssignments") or ()}
    after = {a["name"]: int(a["count"]) for a in assignments}
    status["admission"]["podSetAssignments"] = assignments
    elastic = status.setdefault("elastic", {})
    elastic["resizes"] = int(elastic.get("resizes") or 0) + 1
    elastic["lastResizeTime"] = iso(now)
    changed = [n for n in after if after[n] != before.get(n)]
    sizes = ", ".join(f"{n} {before.get(n, 0)} -> {after[n]}" for n in changed)
    message = f"resized {sizes}: {why}"
    elastic["lastResize"] = {
        "reason": reason,
        "message": message,
        "why": why,
        "from": {n: before.get(n, 0) for n in changed},
        "to": {n: after[n] for n in changed},
    }
    elastic.pop("held", None)
    return EventSpec("Normal", "Resized", message)


def requeue_workload(wl: Obj, now: float) -> EventSpec:
    """Evicting -> Pending: admission cleared, Requeued (its time orders the queue from now
    on), requeueState.count + 1."""
    _move_workload(wl, WorkloadState.PENDING)
    status = wl["status"]
    evicted = condition(wl, "Evicted") or {}
    why = evicted.get("reason") or "Evicted"
    status.pop("admission", None)
    (status.get("elastic") or {}).pop("held", None)  # it grows only while admitted
    state = status.setdefault("requeueState", {})
    state["count"] = int(state.get("count") or 0) + 1
    set_condition(wl, "QuotaReserved", "False", why, "quota released after eviction", now)
    set_condition(wl, "Admitted", "False", why, "evicted", now)
    # The Requeued flip is the queue-order timestamp after an eviction; it must move even
    # when the previous requeue left it True.
    set_condition(wl, "Requeued", "False", why, "", now)
    message = f"requeued after eviction ({why}), {state['count']} time(s) so far"
    set_condition(wl, "Requeued", "True", why, message, now)
    return EventSpec("Normal", "Requeued", message)


# Evictions after which the Workload keeps its place in the queue (its creation time orders it,
# not the eviction): work a spot interruption took away goes ahead of newer work of the same
# priority (Kueue's requeuingStrategy timestamp Creation, for this reason only).
KEEPS_QUEUE_PLACE = frozenset({"SpotInterrupted"})


def requeue_keeps_place(wl: Obj) -> bool:
    """Whether the Workload's last requeue keeps its place in the queue (:data:`KEEPS_QUEUE_PLACE`)."""
    requeued = condition(wl, "Requeued") or {}
    return requeued.get("status") == "True" and requeued.get("reason") in KEEPS_QUEUE_PLACE


def finish_workload(wl: Obj, reason: str, message: str, now: float) -> EventSpec:
    """Any -> Finished: the owner is done; quota is released."""
    _move_workload(wl, WorkloadState.FINISHED)
    set_condition(wl, "Finished", "True", reason, message, now)
    return EventSpec("Normal", "Finished", message)


def _move_workload(wl: Obj, to: WorkloadState) -> None:
    meta = wl["metadata"]
    check(WORKLOAD_TRANSITIONS, workload_state(wl), to, f"Workload {meta.get('namespace')}/{meta['name']}")


# -- Pod ---------------------------------------------------------------------------------


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


_P = PodPhase
# What the pod executor writes when the runtime reports a new phase. A final phase is never
# left; a phase reported again (re-adoption after a restart delivers at least once) is no change.
POD_TRANSITIONS: dict[tuple[PodPhase, PodPhase], str] = {
    # every container's process started
    (_P.PENDING, _P.RUNNING): "Started",
    # every container started and exited 0 between two polls of the runtime
    (_P.PENDING, _P.SUCCEEDED): "Completed",
    # it could not be executed, was stopped before it started, or its fate was lost
    (_P.PENDING, _P.FAILED): "Failed",
    # every container exited 0 on its own
    (_P.RUNNING, _P.SUCCEEDED): "Completed",
    # a container failed, was stopped, OOM-killed or lost; the reason classifies it
    (_P.RUNNING, _P.FAILED): "Failed",
}


FINAL_PHASES = ("Succeeded", "Failed")


def phase(pod: Obj) -> str:
    """A pod's phase (Pending until the executor writes one)."""
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_final(pod: Obj) -> bool:
    return phase(pod) in FINAL_PHASES


def exit_code(pod: Obj) -> int | None:
    """The exit code that explains the pod's outcome: that of the first container whose reason
    is the pod's, else the first non-zero one (None when no exit was observed)."""
    status = pod.get("status") or {}
    containers: list[dict[str, Any]] = status.get("containerStatuses") or []
    reason = status.get("reason")
    for c in containers:
        if c.get("reason") == reason and c.get("exitCode") is not None:
            return int(c["exitCode"])
    for c in containers:
        if c.get("exitCode"):
            return int(c["exitCode"])
    return None


def describe_failure(pod: Obj) -> str:
    """``pod trainer-worker-1 failed: OOMKilled (exit code 137): ...``, for job conditions."""
    status = pod.get("status") or {}
    code = exit_code(pod)
    text = f"pod {pod['metadata']['name']} failed: {status.get('reason') or 'Error'}"
    if code is not None:
        text += f" (exit code {code})"
    message = status.get("message")
    return f"{text}: {message}" if message else text


# -- TrainingJob ---------------------------------------------------------------------------


class JobPhase(StrEnum):
    CREATED = "Created"
    QUEUED = "Queued"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    PREEMPTED = "Preempted"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


JOB_PHASE_CONDITIONS = tuple(p.value for p in JobPhase)
_J = JobPhase
_ACTIVE = (_J.CREATED, _J.QUEUED, _J.RUNNING, _J.RESTARTING, _J.PREEMPTED, _J.SUSPENDED)
JOB_TRANSITIONS: dict[tuple[JobPhase | None, JobPhase], str] = {
    # the controller saw the job for the first time
    (None, _J.CREATED): "created",
    # its Workload exists and waits in its queue (or cannot be queued, with the reason)
    (_J.CREATED, _J.QUEUED): "queued",
    # created with runPolicy.suspend: its Workload is inactive
    (_J.CREATED, _J.SUSPENDED): "created suspended",
    # admitted, and every pod of the gang runs
    (_J.QUEUED, _J.RUNNING): "running",
    # admitted, and the pods finished before they were seen running
    (_J.QUEUED, _J.SUCCEEDED): "succeeded",
    # a replica failed before the whole gang was seen running; the gang restarts
    (_J.QUEUED, _J.RESTARTING): "restarting",
    # admitted, then preempted before its pods were seen running
    (_J.QUEUED, _J.PREEMPTED): "preempted",
    # suspended while it waited
    (_J.QUEUED, _J.SUSPENDED): "suspended",
    # a replica failed and its restart policy allows a retry: the whole gang restarts
    (_J.RUNNING, _J.RESTARTING): "restarting",
    # a GPU or node under it failed, or its node is drained: requeued to run elsewhere
    (_J.RUNNING, _J.QUEUED): "requeued",
    # the Master (or every Worker, or with elasticPolicy any Worker) succeeded
    (_J.RUNNING, _J.SUCCEEDED): "succeeded",
    # the scheduler chose it as a victim: SIGTERM, checkpoint, requeue
    (_J.RUNNING, _J.PREEMPTED): "preempted",
    # runPolicy.suspend was set: pods stopped, quota released
    (_J.RUNNING, _J.SUSPENDED): "suspended",
    # the restarted gang runs
    (_J.RESTARTING, _J.RUNNING): "running",
    # a replica of the restarted gang failed again before all ran: one more gang restart
    (_J.RESTARTING, _J.RESTARTING): "restarting",
    # the restarted gang finished before it was seen running
    (_J.RESTARTING, _J.SUCCEEDED): "succeeded",
    # preempted while its gang restarted
    (_J.RESTARTING, _J.PREEMPTED): "preempted",
    # a GPU or node under the restarting gang failed, or its node is drained: requeued
    (_J.RESTARTING, _J.QUEUED): "requeued",
    # suspended while its gang restarted
    (_J.RESTARTING, _J.SUSPENDED): "suspended",
    # its pods are gone and its Workload is requeued: it waits to resume from its checkpoint
    (_J.PREEMPTED, _J.QUEUED): "requeued",
    # suspended while its pods were being stopped for a preemption
    (_J.PREEMPTED, _J.SUSPENDED): "suspended",
    # resumed: its Workload is active again and queues
    (_J.SUSPENDED, _J.QUEUED): "resumed",
    # any active job fails: a permanent replica failure, backoffLimit, activeDeadlineSeconds
    **{(p, _J.FAILED): "failed" for p in _ACTIVE},
}

_TERMINAL = (JobPhase.SUCCEEDED, JobPhase.FAILED)
_TERMINAL_RANK = {p.value: rank for rank, p in enumerate(_TERMINAL)}  # Succeeded wins over Failed


def job_phase(job: Obj) -> JobPhase | None:
    """The job's phase: a terminal condition if one holds, else the phase condition that
    became True last (None before the controller saw the job)."""
    # One walk over the conditions (the controllers ask this many times a pass): a terminal
    # type holds when its first occurrence is True, as condition() reads it.
    terminal: str | None = None
    firsts: set[str] = set()
    latest: tuple[str, int] | None = None
    phase: str | None = None
    for i, c in enumerate((job.get("status") or {}).get("conditions") or []):
        type_ = c.get("type")
        true = c.get("status") == "True"
        if type_ in _TERMINAL_RANK and type_ not in firsts:
            firsts.add(type_)
            if true and (terminal is None or _TERMINAL_RANK[type_] < _TERMINAL_RANK[terminal]):
                terminal = type_
        if true and type_ in JOB_PHASE_CONDITIONS:
            key = (c.get("lastTransitionTime") or "", i)
            if latest is None or key >= latest:
                latest, phase = key, type_
    if terminal is not None:
        return JobPhase(terminal)
    return JobPhase(phase) if phase is not None else None


def move_job(job: Obj, to: JobPhase, reason: str, message: str, now: float) -> EventSpec:
    """Move the job to phase ``to``: its condition True, the previous phase's False
    (Created stays True, as in the Training Operator)."""
    frm = job_phase(job)
    meta = job["metadata"]
    check(JOB_TRANSITIONS, frm, to, f"TrainingJob {meta.get('namespace')}/{meta['name']}")
    if frm is not None and frm not in (to, JobPhase.CREATED):
        set_condition(job, frm.value, "False", reason, message, now)
    if frm is to:
        # A repeated phase (another gang restart) is a new transition: flip it to move its time.
        set_condition(job, to.value, "False", reason, "", now)
    set_condition(job, to.value, "True", reason, message, now)
    warning = to in (JobPhase.FAILED, JobPhase.RESTARTING, JobPhase.PREEMPTED)
    return EventSpec("Warning" if warning else "Normal", reason, message)


def set_job_message(job: Obj, reason: str, message: str, now: float) -> bool:
    """Reword the current phase's condition without changing phase (no event)."""
    phase = job_phase(job)
    if phase is None:
        return False
    return set_condition(job, phase.value, "True", reason, message, now)
