"""What one attempt of a workflow task turns into, and what became of it.

A **pod-template task** attempt is a Workload named after the attempt (one pod set,
``main``, through the same queues, priorities and scheduler as every job) and, once it is
admitted, one Pod of that name bound to the admission's placement. The Workload's eviction
handshake (preemption, suspension) is the generic one: the pod is stopped, the Workload
requeued, and a new pod of the same name starts once it is admitted again. Once the pod
ended, the attempt's Workload is marked Finished (quota released).

A **TrainingJob task** attempt is a TrainingJob named after the attempt, owned by the
Workflow, so it gets gang placement, gang restarts, the environment contract and
preemption handling from the TrainingJob controller; the attempt follows its phase.

Every object carries the labels :data:`WORKFLOW_LABEL`, :data:`WORKFLOW_TASK_LABEL` and
:data:`WORKFLOW_ATTEMPT_LABEL` (the TrainingJob's pods too, through its templates) and the annotation
:data:`WORKFLOW_NODE_ANNOTATION`; the Workflow is their owner, so deleting it removes them. Every
container gets ``MUSTER_INPUTS_DIR``, ``MUSTER_OUTPUTS_DIR``, ``MUSTER_WORKFLOW_NAME``,
``MUSTER_WORKFLOW_TASK`` (the node, e.g. ``train(1)``) and ``MUSTER_TASK_ATTEMPT``.

Names are derived (:func:`attempt_name`) from the workflow's uid, the node and the attempt
number (which ``muster retry`` does not reset), so a controller that crashed between writing
its decision and creating the object finds the same name on its next pass.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from muster.api.base import API_VERSION
from muster.api.conditions import condition, epoch
from muster.api.labels import (
    WORKFLOW_ATTEMPT_LABEL,
    WORKFLOW_LABEL,
    WORKFLOW_NODE_ANNOTATION,
    WORKFLOW_TASK_LABEL,
    WORKLOAD_LABEL,
)
from muster.api.lifecycle import (
    JobPhase,
    WorkloadState,
    describe_failure,
    finish_workload,
    job_phase,
    phase,
    workload_state,
)
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, stop_reason, stop_requested, stop_requested_object
from muster.controllers.scheduling.workloads import EVICTION_STOP_REASONS
from muster.controllers.trainingjob.pods import bound_pod_spec, owner_reference, pod_set_of
from muster.controllers.workflow.artifacts import ArtifactStore, RunDirs
from muster.runtime.base import PodReason

__all__ = [
    "Action",
    "Launch",
    "Outcome",
    "attempt_name",
    "create_attempt",
    "finish_attempt",
    "observe",
    "stop_attempt",
]

Obj = dict[str, Any]
Action = Callable[[], object]

POD_SET = "main"
_NAME_PREFIX = 43  # + "-" + 8 hex = 52, leaving room for a TrainingJob's "-worker-NN" pods
# Pod reasons that are the task's own doing (Argo's Failed); anything else is an Error.
_TASK_FAILURES = ("Error", "OOMKilled", "DeadlineExceeded")
_EVICTION_STOPS = (StopReasons.SUSPENDED, *EVICTION_STOP_REASONS.values())
_GANG_START_FAILED = PodReason.GANG_START_FAILED.value


def attempt_name(wf: Obj, node: str, attempt: int) -> str:
    """The name of the objects of attempt ``attempt`` of ``node`` (``<workflow>-<task>-<hash>``)."""
    meta = wf["metadata"]
    digest = hashlib.sha256(f"{meta.get('uid')}/{node}/{attempt}".encode()).hexdigest()[:8]
    slug = re.sub(r"[^a-z0-9-]+", "-", node.lower()).strip("-")
    prefix = f"{meta['name']}-{slug}"[:_NAME_PREFIX].rstrip("-.")
    return f"{prefix}-{digest}"


@dataclass
class Launch:
    """Everything needed to create (or re-create) one attempt's objects."""

    wf: Obj
    node: str
    task: Obj
    name: str
    attempt: int
    resolved: Obj  # {"template": ...} or {"trainingJob": ...}, every reference substituted
    inputs: dict[str, str]  # input artifact name -> digest
    run: RunDirs
    queue: str | None
    priority: tuple[int, str | None]
    timeout: float | None

    @property
    def namespace(self) -> str:
        return self.wf["metadata"].get("namespace") or "default"

    @property
    def is_job(self) -> bool:
        return "trainingJob" in self.resolved

    def labels(self) -> dict[str, str]:
        return {
            WORKFLOW_LABEL: self.wf["metadata"]["name"],
            WORKFLOW_TASK_LABEL: self.task["name"],
            WORKFLOW_ATTEMPT_LABEL: str(self.attempt),
        }

    def env(self) -> dict[str, str]:
        return {
            "MUSTER_INPUTS_DIR": str(self.run.inputs),
            "MUSTER_OUTPUTS_DIR": str(self.run.outputs),
            "MUSTER_WORKFLOW_NAME": self.wf["metadata"]["name"],
            "MUSTER_WORKFLOW_TASK": self.node,
            "MUSTER_TASK_ATTEMPT": str(self.attempt),
            "MUSTER_NAMESPACE": self.namespace,
        }

    def metadata(
        self, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
    ) -> Obj:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "labels": {**(labels or {}), **self.labels()},
            "annotations": {**(annotations or {}), WORKFLOW_NODE_ANNOTATION: self.node},
            "ownerReferences": [owner_reference(self.wf)],
        }


@dataclass
class Outcome:
    """What became of an attempt so far."""

    state: Literal["waiting", "running", "succeeded", "failed", "error"]
    reason: str
    message: str
    started: float | None = None  # when it started running (epoch), for the task's timeout
    permanent: bool = False  # a retry would fail the same way (it could not start)
    actions: list[Action] = field(default_factory=list)


def observe(ctx: Context, launch: Callable[[], Launch], name: str, node: Obj, wf: Obj) -> Outcome:
    """The current attempt (objects named ``name``) of a Running task node; missing objects
    are (re)created by the returned actions, from ``launch()``."""
    ns = wf["metadata"].get("namespace") or "default"
    uid = wf["metadata"]["uid"]
    job = ctx.cache.get("TrainingJob", name, ns)
    if job is not None and _owned(job, uid):
        return _job_outcome(job)
    wl = ctx.cache.get("Workload", name, ns)
    if wl is None or not _owned(wl, uid):
        spec = launch()
        return Outcome(
            "waiting", "Launching", "creating its objects", actions=[lambda: create_attempt(ctx, spec)]
        )
    return _pod_outcome(ctx, launch, wl, node)


def stop_attempt(ctx: Context, name: str, namespace: str, reason: str) -> Action:
    """An action asking the attempt's pod to stop (its timeout ran out)."""

    def act() -> None:
        pod = ctx.cache.get("Pod", name, namespace)
        if pod is not None and not stop_requested(pod):
            ctx.update(stop_requested_object(pod, reason, ctx.now()))

    return act


def finish_attempt(ctx: Context, name: str, namespace: str, succeeded: bool) -> Action:
    """An action marking a pod task attempt's Workload Finished (quota released)."""

    def act() -> None:
        wl = ctx.cache.get("Workload", name, namespace)
        if wl is None or workload_state(wl) is WorkloadState.FINISHED:
            return
        updated = copy.deepcopy(wl)
        done = "Succeeded" if succeeded else "Failed"
        event = finish_workload(updated, done, f"the workflow task {done.lower()}", ctx.now())
        stored = ctx.update_status(updated)
        if stored is not None:
            ctx.event(stored, event)

    return act


# -- pod-template tasks ----------------------------------------------------------------------


def _pod_outcome(ctx: Context, launch: Callable[[], Launch], wl: Obj, node: Obj) -> Outcome:
    name = wl["metadata"]["name"]
    ns = wl["metadata"].get("namespace") or "default"
    state = workload_state(wl)
    pod = ctx.cache.get("Pod", name, ns)
    if pod is not None and not _owned_like(pod, wl):
        pod = None
    if pod is not None and stop_requested(pod) and stop_reason(pod) in _EVICTION_STOPS:
        return Outcome("waiting", "Preempted", f"pod {name} is being stopped ({stop_reason(pod)})")
    if pod is not None and (pod.get("status") or {}).get("reason") == _GANG_START_FAILED:
        # never ran: the executor deletes it and evicts the Workload, which is requeued
        return Outcome("waiting", _GANG_START_FAILED, (pod.get("status") or {}).get("message") or "")
    if pod is not None and phase(pod) in ("Succeeded", "Failed"):
        return _ended(pod)
    if state is WorkloadState.PENDING:
        pending = (wl.get("status") or {}).get("pending") or {}
        queue = wl["spec"].get("queueName") or "default"
        return Outcome(
            "waiting", "Queued", pending.get("message") or f"waiting for admission in queue {queue}"
        )
    if state is WorkloadState.EVICTING:
        evicted = condition(wl, "Evicted") or {}
        return Outcome("waiting", "Preempted", evicted.get("message") or "evicted; it will be requeued")
    if state is WorkloadState.FINISHED:
        return Outcome("error", "Lost", f"its Workload {name} finished but its pod's outcome is gone")
    if pod is None:
        if node.get("reason") == "DeadlineExceeded":
            return Outcome(
                "failed", "DeadlineExceeded", node.get("message") or "it ran longer than its timeout"
            )
        spec = launch()
        return Outcome(
            "waiting", "Starting", "admitted; starting its pod", actions=[lambda: _create_pod(ctx, spec, wl)]
        )
    where = f"on node {pod['spec'].get('nodeName')}"
    if phase(pod) == "Running":
        started = epoch((pod.get("status") or {}).get("startTime"))
        return Outcome("running", "Running", f"pod {name} running {where}", started=started)
    return Outcome("waiting", "Starting", f"pod {name} bound {where}; starting")


def _ended(pod: Obj) -> Outcome:
    status = pod.get("status") or {}
    name = pod["metadata"]["name"]
    if phase(pod) == "Succeeded":
        return Outcome("succeeded", "Completed", f"pod {name} completed")
    reason = status.get("reason") or "Error"
    never_ran = reason == "Error" and not status.get("startTime")
    if never_ran:
        return Outcome("error", "LaunchError", describe_failure(pod), permanent=True)
    state: Literal["failed", "error"] = "failed" if reason in _TASK_FAILURES else "error"
    return Outcome(state, reason, describe_failure(pod))


def create_attempt(ctx: Context, launch: Launch) -> None:
    """Create an attempt's first object: its Workload (a pod task) or TrainingJob; its run
    directories are prepared first."""
    ArtifactStore(ctx.home).prepare(launch.run, launch.inputs)
    if launch.is_job:
        ctx.create(_training_job(launch))
    else:
        ctx.create(_workload(launch))


def _workload(launch: Launch) -> Obj:
    template = launch.resolved["template"]
    value, class_name = launch.priority
    spec: Obj = {"priority": value, "active": True, "podSets": [pod_set_of(POD_SET, template, 1)]}
    if launch.queue:
        spec["queueName"] = launch.queue
    if class_name:
        spec["priorityClassName"] = class_name
    return {"apiVersion": API_VERSION, "kind": "Workload", "metadata": launch.metadata(), "spec": spec}


def _create_pod(ctx: Context, launch: Launch, wl: Obj) -> None:
    assignment = next(a for a in wl["status"]["admission"]["podSetAssignments"] if a["name"] == POD_SET)
    placement = (assignment.get("pods") or [])[0]
    template = launch.resolved["template"]
    tmeta = template.get("metadata") or {}
    meta = launch.metadata(tmeta.get("labels"), tmeta.get("annotations"))
    meta["labels"][WORKLOAD_LABEL] = launch.name
    spec = bound_pod_spec(template, placement, launch.env())
    ArtifactStore(ctx.home).prepare(launch.run, launch.inputs)
    ctx.create({"apiVersion": API_VERSION, "kind": "Pod", "metadata": meta, "spec": spec})


# -- TrainingJob tasks -----------------------------------------------------------------------


def _training_job(launch: Launch) -> Obj:
    spec = copy.deepcopy(launch.resolved["trainingJob"])
    env = launch.env()
    for replica in (spec.get("replicaSpecs") or {}).values():
        template = replica.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **launch.labels()}
        tmeta["annotations"] = {**(tmeta.get("annotations") or {}), WORKFLOW_NODE_ANNOTATION: launch.node}
        for container in (template.get("spec") or {}).get("containers") or []:
            own = [e for e in container.get("env") or [] if e["name"] not in env]
            container["env"] = own + [{"name": k, "value": v} for k, v in env.items()]
    if launch.queue and not spec.get("queueName"):
        spec["queueName"] = launch.queue
    if launch.priority[1] and not spec.get("priorityClassName"):
        spec["priorityClassName"] = launch.priority[1]
    run_policy = spec.setdefault("runPolicy", {})
    # The workflow reads the job's outcome after it ended; a TTL could delete it first.
    run_policy.pop("ttlSecondsAfterFinished", None)
    if launch.timeout is not None:
        limit = max(1, int(launch.timeout))
        current = run_policy.get("activeDeadlineSeconds")
        run_policy["activeDeadlineSeconds"] = limit if current is None else min(int(current), limit)
    return {"apiVersion": API_VERSION, "kind": "TrainingJob", "metadata": launch.metadata(), "spec": spec}


def _job_outcome(job: Obj) -> Outcome:
    current = job_phase(job)
    c = condition(job, current.value) if current is not None else None
    message = (c or {}).get("message") or ""
    reason = (c or {}).get("reason") or ""
    name = job["metadata"]["name"]
    if current in (None, JobPhase.CREATED, JobPhase.QUEUED):
        return Outcome("waiting", "Queued", f"trainingjob {name}: {message or 'waiting for admission'}")
    if current in (JobPhase.PREEMPTED, JobPhase.SUSPENDED):
        return Outcome("waiting", current.value, f"trainingjob {name}: {message}")
    if current in (JobPhase.RUNNING, JobPhase.RESTARTING):
        started = epoch((job.get("status") or {}).get("startTime"))
        return Outcome("running", current.value, f"trainingjob {name}: {message}", started=started)
    if current is JobPhase.SUCCEEDED:
        return Outcome("succeeded", "Completed", f"trainingjob {name} succeeded")
    return Outcome("failed", reason or "Failed", f"trainingjob {name} failed: {message}")


def _owned(obj: Obj, uid: str) -> bool:
    return any(r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or [])


def _owned_like(pod: Obj, wl: Obj) -> bool:
    """The pod belongs to the same owner as the Workload (not a stranger of the same name)."""
    owners = {r.get("uid") for r in wl["metadata"].get("ownerReferences") or []}
    return any(r.get("uid") in owners for r in pod["metadata"].get("ownerReferences") or [])
