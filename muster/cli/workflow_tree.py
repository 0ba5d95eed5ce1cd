"""``muster get workflow NAME -o tree``: a Workflow as ``argo get`` shows one.

A summary (name, namespace, status, times, duration, progress, parameters), then the tasks
as a tree: the workflow at the root, its tasks in groups that can run together (a task's
group is one more than its deepest dependency's, so an Argo ``steps`` template reads as its
list of lists and a DAG by depth), a fan-out's runs under their task, and the exit handler
under ``<name>.onExit``, as Argo prints it. Each line has the task's status (a symbol and the
phase), its duration and its message.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from muster.cli.app import console
from muster.cli.output import print_rows
from muster.sdk.status import duration

__all__ = ["SYMBOLS", "print_tree", "summary", "tree_rows"]

Obj = dict[str, Any]
# Argo's symbols for node phases; Cached is a success whose outputs were reused.
SYMBOLS = {
    "Succeeded": "✔",
    "Cached": "✔",
    "Running": "●",
    "Pending": "◷",
    "Failed": "✖",
    "Error": "⚠",
    "Skipped": "○",
    "Omitted": "○",
}
HEADERS = ["STEP", "STATUS", "DURATION", "MESSAGE"]


def print_tree(wf: Obj, now: datetime | None = None) -> None:
    """Print the summary and the tree of ``wf``."""
    now = now or datetime.now(UTC)
    pairs = summary(wf, now)
    width = max(len(k) for k, _ in pairs) + 2
    for key, value in pairs:
        console.print(f"{key + ':':<{width}}{value}".rstrip(), markup=False, highlight=False)
    console.print()
    print_rows(HEADERS, tree_rows(wf, now))


def summary(wf: Obj, now: datetime) -> list[tuple[str, str]]:
    """The lines above the tree, as (label, value)."""
    meta, status = wf.get("metadata") or {}, wf.get("status") or {}
    pairs = [
        ("Name", str(meta.get("name", ""))),
        ("Namespace", str(meta.get("namespace", ""))),
        ("Status", status.get("phase") or "Pending"),
    ]
    if status.get("message"):
        pairs.append(("Message", status["message"]))
    pairs += [("Created", meta.get("creationTimestamp") or "-"), ("Started", status.get("startedAt") or "-")]
    pairs.append(("Finished", status.get("finishedAt") or "-"))
    pairs.append(("Duration", duration(status, now)))
    pairs.append(("Progress", status.get("progress") or "0/0"))
    parameters = ((wf.get("spec") or {}).get("arguments") or {}).get("parameters") or []
    if parameters:
        pairs.append(("Parameters", ""))
        pairs += [(f"  {p['name']}", str(p.get("value", ""))) for p in parameters]
    return pairs


def tree_rows(wf: Obj, now: datetime) -> list[list[str]]:
    """The rows of the tree, the first column drawn with box characters."""
    spec, status = wf.get("spec") or {}, wf.get("status") or {}
    nodes: dict[str, Obj] = status.get("nodes") or {}
    name = str((wf.get("metadata") or {}).get("name", ""))
    exit_task = spec.get("onExit")
    tasks = [t for t in spec.get("tasks") or [] if t["name"] != exit_task]
    root = {"phase": status.get("phase") or "Pending", **_span(status)}
    rows = [_row(f" {_symbol(root)} {name}", root, now)]
    rows += _groups(_levels(tasks), nodes, now)
    if exit_task:
        exit_node = nodes.get(exit_task) or {}
        rows.append(_row(f" {_symbol(exit_node)} {name}.onExit", exit_node, now, message=False))
        rows += _groups([[exit_task]], nodes, now)
    return rows


def _levels(tasks: list[Obj]) -> list[list[str]]:
    """Task names by group: a task's group is one after its deepest dependency's."""
    deps = {t["name"]: list(t.get("dependencies") or []) for t in tasks}
    depth: dict[str, int] = {}

    def of(task: str, seen: frozenset[str] = frozenset()) -> int:
        if task not in depth:
            known = [d for d in deps.get(task, []) if d in deps and d not in seen]
            depth[task] = 1 + max((of(d, seen | {task}) for d in known), default=-1)
        return depth[task]

    groups: dict[int, list[str]] = {}
    for t in tasks:
        groups.setdefault(of(t["name"]), []).append(t["name"])
    return [groups[level] for level in sorted(groups)]


def _groups(groups: list[list[str]], nodes: dict[str, Obj], now: datetime) -> list[list[str]]:
    rows: list[list[str]] = []
    for g, group in enumerate(groups):
        last_group = g == len(groups) - 1
        trunk = " " if last_group else "│"
        for i, task in enumerate(group):
            if len(group) == 1:
                branch, under = ("└───" if last_group else "├───"), f"{trunk}   "
            elif i == 0:
                branch, under = ("└─┬─" if last_group else "├─┬─"), f"{trunk} │ "
            else:
                end = i == len(group) - 1
                branch = f"{trunk} {'└' if end else '├'}─"
                under = f"{trunk} {' ' if end else '│'} "
            node = nodes.get(task) or {}
            rows.append(_row(f" {branch}{_symbol(node)} {task}", node, now))
            children = node.get("children") or []
            for c, child in enumerate(children):
                mark = "└─" if c == len(children) - 1 else "├─"
                cnode = nodes.get(child) or {}
                rows.append(_row(f" {under}{mark}{_symbol(cnode)} {child}", cnode, now))
    return rows


def _row(label: str, node: Obj, now: datetime, message: bool = True) -> list[str]:
    phase = node.get("phase") or "Pending"
    text = (node.get("message") or "") if message else ""
    if node.get("cacheHit"):
        text = f"cached: {text}" if text else "cached"
    return [label, phase, duration(node, now), text]


def _symbol(node: Obj) -> str:
    return SYMBOLS.get(node.get("phase") or "Pending", "?")


def _span(status: Obj) -> Obj:
    return {k: status[k] for k in ("startedAt", "finishedAt") if status.get(k)}
