"""The DAG of a workflow as the controller walks it: order, readiness, fan-out, aggregation.

Semantics are Argo's DAG with ``dependencies`` (reference/workloads.md §4):

* a task is ready once every dependency is Succeeded, Cached or Skipped; a dependency that
  Failed, Errored or was Omitted makes it Omitted;
* fail fast: once any task failed, no task starts that has not started yet (it is Omitted);
  tasks already running finish, retries of a task already started go on;
* a fanned-out task (withItems/withParam) is a group node with one run per item, named
  ``task(0)``, ``task(1)``, ...; the group Succeeded when every run did (or was cached or
  skipped), Failed when one failed; its output parameters are JSON lists of its runs'.
"""

from __future__ import annotations

import json
from typing import Any

from muster.controllers.workflow.lifecycle import DONE_OK, FINAL, TaskPhase, node_phase
from muster.controllers.workflow.values import Scope, UnresolvedReference

__all__ = [
    "base_task",
    "child_name",
    "dependency_state",
    "failures",
    "fan_out_items",
    "fans_out",
    "group_result",
    "main_outcome",
    "phase_counts",
    "progress",
]

Obj = dict[str, Any]
_BAD = (TaskPhase.FAILED, TaskPhase.ERROR, TaskPhase.OMITTED)


def child_name(task: str, index: int) -> str:
    return f"{task}({index})"


def base_task(node: str) -> str:
    """The task a node belongs to: ``train(1)`` -> ``train``."""
    return node.split("(", 1)[0]


def fans_out(task: Obj) -> bool:
    return task.get("withItems") is not None or task.get("withParam") is not None


def dependency_state(task: Obj, nodes: dict[str, Obj]) -> tuple[str, str]:
    """``("ready", "")``, ``("wait", why)`` or ``("omit", why)``."""
    waiting = []
    for dep in task.get("dependencies") or []:
        phase = node_phase(nodes.get(dep) or {})
        if phase in _BAD:
            return "omit", f"dependency {dep} is {phase.value}"
        if phase not in DONE_OK:
            waiting.append(dep)
    if waiting:
        return "wait", f"waiting for {', '.join(waiting)}"
    return "ready", ""


def fan_out_items(task: Obj, scope: Scope) -> list[Any]:
    """The items a fanned-out task runs over; UnresolvedReference when withParam is not a
    JSON list."""
    if task.get("withItems") is not None:
        return list(scope.resolve(task["withItems"]))
    text = scope.resolve(task["withParam"])
    try:
        items = json.loads(text)
    except ValueError:
        raise UnresolvedReference(f"withParam {task['withParam']!r} is {text!r}, not a JSON list") from None
    if not isinstance(items, list):
        raise UnresolvedReference(f"withParam {task['withParam']!r} is {text!r}, not a JSON list")
    return items


def group_result(task: Obj, children: list[tuple[str, Obj]]) -> tuple[TaskPhase, str, str, Obj] | None:
    """The final phase, reason, message and outputs of a group whose runs all ended; None
    while one still runs."""
    if any(node_phase(n) not in FINAL for _, n in children):
        return None
    for bad in (TaskPhase.FAILED, TaskPhase.ERROR):
        hit = next(((name, n) for name, n in children if node_phase(n) is bad), None)
        if hit is not None:
            return bad, "RunFailed", f"{hit[0]} {bad.value.lower()}: {hit[1].get('message', '')}", {}
    omitted = [name for name, n in children if node_phase(n) is TaskPhase.OMITTED]
    if omitted:
        return TaskPhase.OMITTED, "FailFast", f"{', '.join(omitted)} never started: another task failed", {}
    if all(node_phase(n) is TaskPhase.SKIPPED for _, n in children):
        return TaskPhase.SKIPPED, "Skipped", "every run was skipped", {}
    ran = [n for _, n in children if node_phase(n) in (TaskPhase.SUCCEEDED, TaskPhase.CACHED)]
    params = {}
    for p in (task.get("outputs") or {}).get("parameters") or []:
        values = [((n.get("outputs") or {}).get("parameters") or {}).get(p["name"], "") for n in ran]
        params[p["name"]] = json.dumps(values, separators=(",", ":"))
    cached = sum(1 for _, n in children if node_phase(n) is TaskPhase.CACHED)
    note = f" ({cached} from the cache)" if cached else ""
    return TaskPhase.SUCCEEDED, "Completed", f"{len(children)} run(s) done{note}", {"parameters": params}


def main_outcome(nodes: dict[str, Obj], main: list[str]) -> tuple[str, str]:
    """``{{workflow.status}}`` of the finished main tasks (Succeeded, Failed or Error) and
    the first failure's message."""
    runs = sorted(
        (n.get("finishedAt") or "", name, n)
        for name, n in nodes.items()
        if base_task(name) in main and not n.get("children")
    )
    for phase, verb in ((TaskPhase.FAILED, "failed"), (TaskPhase.ERROR, "errored")):
        hit = next(((name, n) for _, name, n in runs if node_phase(n) is phase), None)
        if hit is not None:
            return phase.value, f"task {hit[0]} {verb}: {hit[1].get('message', '')}"
    return "Succeeded", ""


def failures(nodes: dict[str, Obj], main: list[str]) -> str:
    """``{{workflow.failures}}``: a JSON list of the failed runs, as Argo gives it."""
    out = [
        {
            "displayName": name,
            "message": n.get("message", ""),
            "phase": n.get("phase"),
            "finishedAt": n.get("finishedAt"),
        }
        for name, n in sorted(nodes.items())
        if base_task(name) in main
        and node_phase(n) in (TaskPhase.FAILED, TaskPhase.ERROR)
        and not n.get("children")
    ]
    return json.dumps(out, separators=(",", ":"))


def progress(nodes: dict[str, Obj], tasks: list[str]) -> str:
    """``ok/total`` over runs, as Argo counts: the runs that ended well (Succeeded, Cached or
    Skipped) of all runs; a failed or omitted run is finished but is no progress. A
    fanned-out task counts its runs once it expanded."""
    runs = _runs(nodes, tasks)
    return f"{sum(1 for r in runs if node_phase(r) in DONE_OK)}/{len(runs)}"


def phase_counts(nodes: dict[str, Obj], tasks: list[str]) -> dict[str, int]:
    """How many runs are in each phase (``{"Succeeded": 2, "Failed": 1}``), in the order of
    the task lifecycle."""
    counted: dict[str, int] = {}
    for run in _runs(nodes, tasks):
        phase = node_phase(run).value
        counted[phase] = counted.get(phase, 0) + 1
    return {p.value: counted[p.value] for p in TaskPhase if p.value in counted}


def _runs(nodes: dict[str, Obj], tasks: list[str]) -> list[Obj]:
    out: list[Obj] = []
    for name in tasks:
        node = nodes.get(name) or {}
        out += [nodes.get(c) or {} for c in node.get("children") or []] or [node]
    return out
