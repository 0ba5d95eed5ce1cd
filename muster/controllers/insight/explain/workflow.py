"""Why is this workflow where it is? ``muster why workflow/NAME``.

A workflow's state is its tasks': :func:`gather_workflow` explains the latest attempt of
each task that waits, runs or failed (its TrainingJob, its Workload, or its pod, with
:func:`~muster.controllers.insight.explain.explain`, so a task waiting for quota gets the same
answer as a job would), and :func:`explain_workflow` composes the workflow's answer from
them: the first task that failed and why (with its pod's log tail), or the task that waits
and what would unblock it, with one row per task run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from muster.api.labels import WORKFLOW_ATTEMPT_LABEL, WORKFLOW_LABEL, WORKFLOW_NODE_ANNOTATION
from muster.api.workflow import order
from muster.controllers.insight.explain.build import explain, recent_events
from muster.controllers.insight.explain.facts import Explanation, FailureFacts, Obj, TaskFacts
from muster.controllers.insight.explain.gather import Source, gather
from muster.store.events import refers_to

__all__ = ["WorkflowContext", "explain_workflow", "gather_workflow"]

_OK = ("Succeeded", "Cached", "Skipped")
_BAD = ("Failed", "Error")
# The task's attempt objects that say most about it, by what the task is doing.
_WAITING_STATES = ("Pending", "Created", "Queued", "Preempted", "Evicting", "Suspended")


@dataclass
class WorkflowContext:
    """The explanations of the tasks' latest attempts (by task run name) and the events of the
    workflow's namespace."""

    attempts: Mapping[str, Explanation] = field(default_factory=dict)
    events: Sequence[Obj] = ()


def gather_workflow(source: Source, wf: Obj, tail: int = 20, now: float | None = None) -> WorkflowContext:
    """Explain the latest attempt of every task run that is running or failed."""
    ns = wf["metadata"].get("namespace") or "default"
    selector = f"{WORKFLOW_LABEL}={wf['metadata']['name']}"
    objects = [o for kind in ("TrainingJob", "Workload", "Pod") for o in source.list(kind, ns, selector)]
    attempts: dict[str, Explanation] = {}
    for run, node in _runs(wf):
        if node.get("phase") not in ("Running", *_BAD):
            continue
        target = _attempt_target(objects, run, failed=node.get("phase") in _BAD)
        if target is not None:
            attempts[run] = explain(target, gather(source, target, tail, now=now))
    return WorkflowContext(attempts=attempts, events=source.list("Event", ns))


def explain_workflow(wf: Obj, ctx: WorkflowContext) -> Explanation:
    """The workflow's state, in a sentence and the facts behind it (see the module docstring)."""
    meta, status = wf["metadata"], wf.get("status") or {}
    ex = Explanation(
        kind="Workflow", namespace=meta.get("namespace"), name=meta["name"], state="", summary=""
    )
    ex.state = status.get("phase") or "Pending"
    runs = _runs(wf)
    ex.tasks = [_task_facts(run, node, ctx.attempts.get(run)) for run, node in runs]
    ex.events = _events(wf, ctx.events)
    ok = [t for t in ex.tasks if t.phase in _OK]
    if ex.state == "Succeeded":
        ex.reason, ex.message = "Succeeded", status.get("message") or ""
        ex.summary = f"{ex.ref} succeeded: {len(ok)} of {len(ex.tasks)} tasks ended well{_how(ex.tasks)}"
        return ex
    if ex.state in _BAD:
        _failed(ex, status, runs, ctx)
        return ex
    if ex.state == "Pending":
        ex.reason, ex.message = "NotStarted", "the Workflow controller has not started it yet"
        ex.summary = f"{ex.ref} has not started"
        ex.unblock = ["check that `muster up` is running (it runs the controllers)"]
        return ex
    waiting = [t for t in ex.tasks if t.waiting]
    running = [t for t in ex.tasks if t.phase == "Running" and not t.waiting]
    parts = [f"{len(ok)} of {len(ex.tasks)} tasks done"]
    parts += [f"task {t.name} runs" for t in running[:3]]
    parts += [f"task {t.name} waits ({t.reason})" for t in waiting[:3]]
    ex.summary = f"{ex.ref} is running: " + "; ".join(parts)
    if waiting:
        first = ctx.attempts[waiting[0].name]
        ex.reason, ex.message, ex.unblock = first.reason, first.message, list(first.unblock)
        ex.blocker = first.blocker
    else:
        ex.reason, ex.message = "Running", status.get("message") or ""
    return ex


# -- helpers -----------------------------------------------------------------------------------


def _runs(wf: Obj) -> list[tuple[str, Obj]]:
    """``(run name, node)`` of every task in DAG order (the onExit task last), a fan-out's
    runs in place of the task."""
    spec, nodes = wf.get("spec") or {}, (wf.get("status") or {}).get("nodes") or {}
    tasks = spec.get("tasks") or []
    exit_task = spec.get("onExit")
    names = [t for t in order(tasks) if t != exit_task] + ([exit_task] if exit_task else [])
    out: list[tuple[str, Obj]] = []
    for name in names:
        node = nodes.get(name) or {"phase": "Pending"}
        children = node.get("children") or []
        out += [(c, nodes.get(c) or {"phase": "Pending"}) for c in children] or [(name, node)]
    return out


def _attempt_target(objects: list[Obj], run: str, failed: bool) -> Obj | None:
    """The object of the run's latest attempt to explain: its TrainingJob if it is one, else
    (failed) its pod or (running) its Workload."""
    mine = [
        o for o in objects if (o["metadata"].get("annotations") or {}).get(WORKFLOW_NODE_ANNOTATION) == run
    ]
    if not mine:
        return None
    latest = max(_attempt(o) for o in mine)
    mine = [o for o in mine if _attempt(o) == latest]
    preferred = ("TrainingJob", "Pod", "Workload") if failed else ("TrainingJob", "Workload", "Pod")
    for kind in preferred:
        found = [o for o in mine if o["kind"] == kind]
        if found:
            return found[0]
    return None


def _attempt(obj: Obj) -> int:
    try:
        return int((obj["metadata"].get("labels") or {}).get(WORKFLOW_ATTEMPT_LABEL) or 0)
    except ValueError:
        return 0


def _task_facts(run: str, node: Obj, attempt: Explanation | None) -> TaskFacts:
    facts = TaskFacts(
        name=run,
        phase=node.get("phase") or "Pending",
        reason=node.get("reason") or "",
        message=node.get("message") or "",
        attempts=int(node.get("attempts") or 0),
        started=node.get("startedAt"),
        finished=node.get("finishedAt"),
    )
    if attempt is not None:
        facts.detail = attempt.summary
        facts.waiting = facts.phase == "Running" and attempt.state in _WAITING_STATES
        if facts.waiting:
            facts.reason = attempt.reason or facts.reason
    return facts


def _failed(ex: Explanation, status: Obj, runs: list[tuple[str, Obj]], ctx: WorkflowContext) -> None:
    """The first run that failed (by when it finished) is the workflow's reason."""
    failed = [(run, node) for run, node in runs if node.get("phase") in _BAD]
    failed.sort(key=lambda rn: (rn[1].get("finishedAt") or "", rn[0]))
    ex.message = status.get("message") or ""
    if not failed:
        ex.reason = "Failed"
        ex.summary = f"{ex.ref} {ex.state.lower()}" + (f": {ex.message}" if ex.message else "")
    else:
        run, node = failed[0]
        attempt = ctx.attempts.get(run)
        reason = node.get("reason") or (attempt.reason if attempt else None) or node.get("phase")
        ex.reason = str(reason)
        ex.failure = attempt.failure if attempt is not None and attempt.failure is not None else None
        if ex.failure is None:
            ex.failure = FailureFacts(reason=ex.reason, message=node.get("message") or "")
        ex.summary = f"{ex.ref} failed: task {run} {str(node.get('phase')).lower()} ({ex.reason})"
        ex.unblock = list(attempt.unblock) if attempt is not None else []
    ex.unblock.append(
        f"once the cause is fixed: muster retry {ex.ref} runs the failed, omitted and skipped tasks "
        "again and keeps what succeeded"
    )


def _how(tasks: list[TaskFacts]) -> str:
    cached = sum(1 for t in tasks if t.phase == "Cached")
    skipped = sum(1 for t in tasks if t.phase == "Skipped")
    notes = [f"{cached} from the cache" if cached else "", f"{skipped} skipped" if skipped else ""]
    notes = [n for n in notes if n]
    return f" ({', '.join(notes)})" if notes else ""


def _events(wf: Obj, events: Sequence[Obj]) -> list[dict[str, Any]]:
    return recent_events([e for e in events if e.get("type") == "Warning" and refers_to(e, wf)])
