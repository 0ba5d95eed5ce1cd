"""`muster why | retry | describe | get` about workflows, against a real server in a thread."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from muster.cli.app import app
from muster.store import Store

runner = CliRunner()


def muster(*args: str):
    return runner.invoke(app, list(args))


def failed_workflow() -> dict[str, Any]:
    """A workflow as the controller leaves it when its second task failed."""
    run = "2025-01-01T00:0{}:00Z"
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": "pipe", "namespace": "default"},
        "spec": {
            "tasks": [
                {
                    "name": "prep",
                    "template": {"spec": {"containers": [{"name": "main", "command": ["true"]}]}},
                },
                {
                    "name": "train",
                    "dependencies": ["prep"],
                    "template": {"spec": {"containers": [{"name": "main", "command": ["false"]}]}},
                },
                {
                    "name": "eval",
                    "dependencies": ["train"],
                    "template": {"spec": {"containers": [{"name": "main", "command": ["true"]}]}},
                },
            ]
        },
        "status": {
            "phase": "Failed",
            "progress": "1/3",
            "taskPhases": {"Succeeded": 1, "Failed": 1, "Omitted": 1},
            "message": "task train failed: pod pipe-train-1 exited with code 1",
            "nodes": {
                "prep": {
                    "phase": "Succeeded",
                    "attempts": 1,
                    "startedAt": run.format(1),
                    "finishedAt": run.format(2),
                    "outputs": {"parameters": {"rows": "1200"}, "artifacts": {"data": "sha256:abc"}},
                },
                "train": {
                    "phase": "Failed",
                    "reason": "Error",
                    "message": "pod pipe-train-1 exited with code 1",
                    "attempts": 1,
                    "startedAt": run.format(2),
                    "finishedAt": run.format(3),
                },
                "eval": {"phase": "Omitted", "reason": "UpstreamFailed", "message": "train failed"},
            },
        },
    }


def test_why_a_workflow_failed(server, home_store: Store):
    home_store.apply([failed_workflow()])
    result = muster("why", "workflow/pipe")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("workflow/pipe failed: task train failed (Error)")
    assert "Tasks:" in out
    rows = {line.split()[0]: line.split() for line in out.split("Tasks:")[1].splitlines()[2:5]}
    assert rows["prep"][1] == "Succeeded" and rows["train"][1] == "Failed" and rows["eval"][1] == "Omitted"
    assert "muster retry workflow/pipe" in out
    assert muster("why", "wf/pipe", "-o", "json").exit_code == 0


def test_retry_without_a_kind_says_what_it_expects(server, home_store: Store):
    result = muster("retry", "pipe")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: expected workflow/NAME")
    assert "muster retry workflow/pipe" in result.stderr


def test_describe_shows_each_tasks_results_and_get_counts_by_outcome(server, home_store: Store):
    home_store.apply([failed_workflow()])
    described = muster("describe", "workflow", "pipe").stdout
    assert "Results:" in described
    results = described.split("Results:")[1]
    assert "prep" in results and "rows = 1200" in results and "data = sha256:abc" in results
    listed = muster("get", "workflows").stdout.splitlines()
    assert listed[1].split()[:3] == ["pipe", "Failed", "1/3"]
    wide = muster("get", "workflows", "-o", "wide").stdout.splitlines()
    assert "TASKS" in wide[0] and "Failed=1,Omitted=1,Succeeded=1" in wide[1]


def test_resubmit_makes_a_new_workflow_with_the_same_spec(server, home_store: Store):
    home_store.apply([failed_workflow()])
    result = muster("resubmit", "workflow/pipe")
    assert result.exit_code == 0, result.output
    new_name = result.stdout.split()[0].removeprefix("workflow/")
    assert new_name.startswith("pipe-") and len(new_name) == len("pipe-") + 5
    copy = home_store.get("Workflow", new_name, "default")
    assert copy["spec"] == home_store.get("Workflow", "pipe", "default")["spec"]
    assert copy["metadata"]["annotations"]["muster.dev/resubmitted-from"] == "pipe"
    assert "status" not in copy or not copy["status"].get("nodes")
    assert muster("resubmit", "pipe").exit_code == 2
    missing = muster("resubmit", "workflow/nope")
    assert missing.exit_code == 1 and "not found" in missing.stderr
