"""Checks that every ``{{...}}`` reference in a workflow's tasks names something that exists.

Allowed references (as in Argo): ``{{tasks.<task>.outputs.parameters|artifacts.<name>}}`` of
a task this one depends on (directly or not; the onExit task sees every task),
``{{inputs.parameters|artifacts.<name>}}`` declared by the task, ``{{item}}`` (or
``{{item.<key>}}``) in a task with withItems/withParam, ``{{workflow.parameters.<name>}}``
and ``{{workflow.name|namespace|uid|status|failures}}``. ``{{= expression}}`` is evaluated
at run time and not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from muster.api.errors import FieldError, child_path

if TYPE_CHECKING:
    from muster.api.workflow import WorkflowTask

__all__ = ["REFERENCE", "reference_rules"]

REFERENCE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_WORKFLOW_VARIABLES = ("name", "namespace", "uid", "status", "failures")
_ARTIFACT_SOURCE = re.compile(r"^\{\{\s*tasks\.[^.{}]+\.outputs\.artifacts\.[^.{}]+\s*\}\}$")


def reference_rules(
    tasks: list[WorkflowTask], tasks_path: str, workflow_params: list[str], on_exit: str | None
) -> list[FieldError]:
    """Errors for references to things that do not exist or are not visible to their task."""
    by_name = {t.name: t for t in tasks}
    ancestors = _ancestors(tasks)
    errors: list[FieldError] = []
    for i, task in enumerate(tasks):
        tpath = child_path(tasks_path, i)
        visible = set(by_name) - {task.name} if task.name == on_exit else ancestors[task.name]
        data = task.model_dump(by_alias=True, exclude_none=True, exclude={"name", "dependencies"})
        for where, text in _strings(data, tpath):
            for ref in REFERENCE.findall(text):
                why = _check(ref, task, by_name, visible, workflow_params)
                if why:
                    errors.append(FieldError(where, why))
        for a, artifact in enumerate(task.inputs.artifacts):
            if not _ARTIFACT_SOURCE.fullmatch(artifact.from_):
                errors.append(
                    FieldError(
                        child_path(tpath, "inputs", "artifacts", a, "from"),
                        "must be one reference {{tasks.<task>.outputs.artifacts.<name>}}",
                        artifact.from_,
                    )
                )
    return errors


def _check(
    ref: str, task: WorkflowTask, by_name: dict[str, WorkflowTask], visible: set[str], params: list[str]
) -> str | None:
    if ref.startswith("="):
        return None
    parts = ref.split(".")
    head = parts[0]
    if head == "item":
        if task.with_items is None and task.with_param is None:
            return f"{{{{{ref}}}}} is only defined in a task with withItems or withParam"
        return None
    if head == "inputs" and len(parts) == 3 and parts[1] in ("parameters", "artifacts"):
        declared = [p.name for p in getattr(task.inputs, parts[1])]
        if parts[2] not in declared:
            return f"{{{{{ref}}}}}: the task declares no input {parts[1][:-1]} {parts[2]!r}"
        return None
    if (
        head == "tasks"
        and len(parts) == 5
        and parts[2] == "outputs"
        and parts[3] in ("parameters", "artifacts")
    ):
        return _check_task_output(ref, parts[1], parts[3], parts[4], by_name, visible)
    if head == "workflow":
        if len(parts) == 2 and parts[1] in _WORKFLOW_VARIABLES:
            return None
        if len(parts) == 3 and parts[1] == "parameters":
            if parts[2] in params:
                return None
            return f"{{{{{ref}}}}}: spec.arguments.parameters has no {parts[2]!r}"
    return (
        f"unknown reference {{{{{ref}}}}}: use tasks.<task>.outputs.parameters.<name>, "
        "inputs.parameters.<name>, workflow.parameters.<name> or item"
    )


def _check_task_output(
    ref: str, source: str, group: str, name: str, by_name: dict[str, WorkflowTask], visible: set[str]
) -> str | None:
    if source not in by_name:
        return f"{{{{{ref}}}}}: no task named {source!r}"
    if source not in visible:
        return f"{{{{{ref}}}}}: task {source!r} must run first; add it to dependencies"
    declared = [p.name for p in getattr(by_name[source].outputs, group)]
    if name not in declared:
        return f"{{{{{ref}}}}}: task {source!r} declares no output {group[:-1]} {name!r}"
    fans_out = by_name[source].with_items is not None or by_name[source].with_param is not None
    if group == "artifacts" and fans_out:
        # Its runs write one artifact each; there is no one artifact to hand on.
        return f"{{{{{ref}}}}}: task {source!r} fans out (withItems/withParam); pass parameters instead"
    return None


def _ancestors(tasks: list[WorkflowTask]) -> dict[str, set[str]]:
    # Called only on an acyclic graph whose dependencies all exist.
    deps = {t.name: t.dependencies for t in tasks}
    memo: dict[str, set[str]] = {}

    def of(name: str) -> set[str]:
        if name not in memo:
            found: set[str] = set()
            for dep in deps[name]:
                found |= {dep, *of(dep)}
            memo[name] = found
        return memo[name]

    return {name: of(name) for name in deps}


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, child_path(path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, child_path(path, str(key)))
