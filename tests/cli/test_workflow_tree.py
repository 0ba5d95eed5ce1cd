"""`muster get workflow NAME -o tree`: the tasks as `argo get` draws them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from muster.cli.workflow_tree import summary, tree_rows

NOW = datetime(2025, 1, 1, 0, 10, tzinfo=UTC)


def _task(name: str, *deps: str) -> dict[str, Any]:
    return {"name": name, "dependencies": list(deps)}


def _node(phase: str, start: int | None = 1, end: int | None = 3, **extra: Any) -> dict[str, Any]:
    times = {}
    if start is not None:
        times["startedAt"] = f"2025-01-01T00:00:0{start}Z"
    if end is not None:
        times["finishedAt"] = f"2025-01-01T00:00:0{end}Z"
    return {"phase": phase, **times, **extra}


WF = {
    "metadata": {"name": "tour", "namespace": "default", "creationTimestamp": "2025-01-01T00:00:00Z"},
    "spec": {
        "arguments": {"parameters": [{"name": "message", "value": "hi"}]},
        "onExit": "onexit",
        "tasks": [
            _task("hello"),
            _task("loop", "hello"),
            _task("coin", "hello"),
            _task("heads", "loop", "coin"),
            _task("tails", "loop", "coin"),
            _task("onexit"),
        ],
    },
    "status": {
        "phase": "Failed",
        "message": "task heads failed",
        "progress": "4/6",
        "startedAt": "2025-01-01T00:00:01Z",
        "finishedAt": "2025-01-01T00:00:09Z",
        "nodes": {
            "hello": _node("Succeeded", cacheHit=True),
            "loop": _node("Succeeded", children=["loop(0)", "loop(1)"]),
            "loop(0)": _node("Succeeded"),
            "loop(1)": _node("Succeeded"),
            "coin": _node("Succeeded"),
            "heads": _node("Failed", message="exited with code 1"),
            "tails": _node("Skipped", None, None, message="when 'tails == heads' is false"),
            "onexit": _node("Succeeded", 5, 6),
        },
    },
}


def test_tasks_are_drawn_group_by_group_with_runs_and_the_exit_handler():
    rows = tree_rows(WF, NOW)
    assert rows == [
        [" ✖ tour", "Failed", "8s", ""],
        [" ├───✔ hello", "Succeeded", "2s", "cached"],
        [" ├─┬─✔ loop", "Succeeded", "2s", ""],
        [" │ │ ├─✔ loop(0)", "Succeeded", "2s", ""],
        [" │ │ └─✔ loop(1)", "Succeeded", "2s", ""],
        [" │ └─✔ coin", "Succeeded", "2s", ""],
        [" └─┬─✖ heads", "Failed", "2s", "exited with code 1"],
        ["   └─○ tails", "Skipped", "-", "when 'tails == heads' is false"],
        [" ✔ tour.onExit", "Succeeded", "1s", ""],
        [" └───✔ onexit", "Succeeded", "1s", ""],
    ]


def test_summary_names_status_times_progress_and_parameters():
    assert summary(WF, NOW) == [
        ("Name", "tour"),
        ("Namespace", "default"),
        ("Status", "Failed"),
        ("Message", "task heads failed"),
        ("Created", "2025-01-01T00:00:00Z"),
        ("Started", "2025-01-01T00:00:01Z"),
        ("Finished", "2025-01-01T00:00:09Z"),
        ("Duration", "8s"),
        ("Progress", "4/6"),
        ("Parameters", ""),
        ("  message", "hi"),
    ]


def test_a_workflow_that_has_not_started_draws_pending_tasks():
    wf = {"metadata": {"name": "new"}, "spec": {"tasks": [_task("a"), _task("b", "a")]}}
    assert tree_rows(wf, NOW) == [
        [" ◷ new", "Pending", "-", ""],
        [" ├───◷ a", "Pending", "-", ""],
        [" └───◷ b", "Pending", "-", ""],
    ]
