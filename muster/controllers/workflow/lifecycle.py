"""The lifecycles of a Workflow and of its task nodes, as explicit transition tables.

A task node is one entry of ``status.nodes``: a task, one run of a fanned-out task
(``train(0)``), or the group of those runs (``train``). Every change of a node's phase goes
through :func:`move_node`, every change of the workflow's through :func:`move_workflow`;
illegal transitions are rejected by :func:`muster.api.lifecycle.check`, and each
transition returns the :class:`EventSpec` the controller records on the Workflow.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from muster.api.conditions import iso
from muster.api.lifecycle import EventSpec, check

__all__ = [
    "DONE_OK",
    "FINAL",
    "TASK_TRANSITIONS",
    "WORKFLOW_TRANSITIONS",
    "TaskPhase",
    "WorkflowPhase",
    "move_node",
    "move_workflow",
    "node_phase",
]

Obj = dict[str, Any]


class TaskPhase(StrEnum):
    PENDING = "Pending"  # not started: waiting for dependencies, a parallelism slot or a retry
    RUNNING = "Running"  # an attempt was launched (it may wait in its queue), or a fan-out expanded
    SUCCEEDED = "Succeeded"  # it ran and its outputs are recorded
    FAILED = "Failed"  # the task's own process failed (non-zero exit, OOM, timeout)
    ERROR = "Error"  # something outside the task failed it (node lost, cannot start, bad input)
    SKIPPED = "Skipped"  # its when expression was false (or it fanned out over nothing)
    CACHED = "Cached"  # an identical earlier run's outputs were reused; nothing ran
    OMITTED = "Omitted"  # never reached: a dependency failed, or the workflow stopped starting tasks


_T = TaskPhase
FINAL = frozenset({_T.SUCCEEDED, _T.FAILED, _T.ERROR, _T.SKIPPED, _T.CACHED, _T.OMITTED})
# Phases a dependent may start after (a bare dependency in Argo: Succeeded or Skipped).
DONE_OK = frozenset({_T.SUCCEEDED, _T.CACHED, _T.SKIPPED})

TASK_TRANSITIONS: dict[tuple[TaskPhase, TaskPhase], str] = {
    # an attempt was launched (its Workload or TrainingJob created), or a fan-out created its runs
    (_T.PENDING, _T.RUNNING): "Running",
    # an identical earlier run's outputs are in the cache and still exist: nothing runs
    (_T.PENDING, _T.CACHED): "Cached",
    # its when expression is false, or withItems/withParam gave no items
    (_T.PENDING, _T.SKIPPED): "Skipped",
    # a dependency failed or was omitted, or another task failed and the workflow fails fast
    (_T.PENDING, _T.OMITTED): "Omitted",
    # it cannot be evaluated: a bad when or withParam, an input artifact that does not exist
    (_T.PENDING, _T.ERROR): "Error",
    # the attempt succeeded and its outputs are recorded (a fan-out: every run succeeded)
    (_T.RUNNING, _T.SUCCEEDED): "Succeeded",
    # the attempt failed and retryStrategy allows no other (a fan-out: a run failed)
    (_T.RUNNING, _T.FAILED): "Failed",
    # the attempt ended for a reason outside the task, or its declared outputs are missing,
    # and retryStrategy allows no other attempt
    (_T.RUNNING, _T.ERROR): "Error",
    # every run of a fan-out was skipped by its when expression
    (_T.RUNNING, _T.SKIPPED): "Skipped",
    # runs of a fan-out never started: another task failed and the workflow fails fast
    (_T.RUNNING, _T.OMITTED): "Omitted",
    # the attempt failed and retryStrategy allows another once the backoff has passed
    (_T.RUNNING, _T.PENDING): "Retrying",
    # `muster retry`: a task that failed or never ran runs again
    (_T.FAILED, _T.PENDING): "Retried",
    (_T.ERROR, _T.PENDING): "Retried",
    (_T.SKIPPED, _T.PENDING): "Retried",
    (_T.OMITTED, _T.PENDING): "Retried",
    # `muster retry`: it depends on a task that runs again (or it is the onExit task)
    (_T.SUCCEEDED, _T.PENDING): "Retried",
    (_T.CACHED, _T.PENDING): "Retried",
}

_WARNING = (_T.FAILED, _T.ERROR, _T.OMITTED)


def node_phase(node: Obj) -> TaskPhase:
    return TaskPhase(node.get("phase") or "Pending")


def move_node(node: Obj, name: str, to: TaskPhase, reason: str, message: str, now: float) -> EventSpec:
    """Move task node ``name`` to ``to`` (in place) with its reason and message; the event to
    record. Starting sets ``startedAt`` once; a final phase sets ``finishedAt``."""
    frm = node_phase(node)
    event = check(TASK_TRANSITIONS, frm, to, f"task {name}")
    node.update(phase=to.value, reason=reason, message=message)
    if to is TaskPhase.RUNNING:
        node.setdefault("startedAt", iso(now))
    if to in FINAL:
        node["finishedAt"] = iso(now)
    elif to is TaskPhase.PENDING:
        node.pop("finishedAt", None)
    if to is TaskPhase.PENDING and event == "Retrying":
        kind = "Warning"
    else:
        kind = "Warning" if to in _WARNING else "Normal"
    return EventSpec(kind, f"Task{event}", f"{name}: {message}" if message else name)


class WorkflowPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ERROR = "Error"


_W = WorkflowPhase
WORKFLOW_TRANSITIONS: dict[tuple[WorkflowPhase, WorkflowPhase], str] = {
    # the controller saw it and evaluates its tasks
    (_W.PENDING, _W.RUNNING): "Running",
    # every task succeeded, was cached or skipped, and so did the onExit task
    (_W.RUNNING, _W.SUCCEEDED): "Succeeded",
    # a task failed (or the onExit task did); the rest were omitted or finished
    (_W.RUNNING, _W.FAILED): "Failed",
    # a task errored (and none failed)
    (_W.RUNNING, _W.ERROR): "Error",
    # `muster retry`: its failed, skipped and omitted tasks (and what depends on them) run again
    (_W.FAILED, _W.RUNNING): "Retried",
    (_W.ERROR, _W.RUNNING): "Retried",
}


def move_workflow(wf: Obj, to: WorkflowPhase, message: str, now: float) -> EventSpec:
    """Move the workflow (in place) to ``to``; the event to record."""
    status = wf.setdefault("status", {})
    frm = WorkflowPhase(status.get("phase") or "Pending")
    meta = wf["metadata"]
    event = check(WORKFLOW_TRANSITIONS, frm, to, f"Workflow {meta.get('namespace')}/{meta['name']}")
    status["phase"] = to.value
    status["message"] = message
    if to is WorkflowPhase.RUNNING:
        status.setdefault("startedAt", iso(now))
        status.pop("finishedAt", None)
    else:
        status["finishedAt"] = iso(now)
    kind = "Warning" if to in (_W.FAILED, _W.ERROR) else "Normal"
    return EventSpec(kind, f"Workflow{event}", message or to.value.lower())
