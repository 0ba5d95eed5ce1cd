"""A workflow's progress counts tasks by outcome, and `why workflow/NAME` explains it: which
task failed and why, which one waits and for what."""

from __future__ import annotations

from muster.controllers.insight.explain.workflow import explain_workflow, gather_workflow
from muster.server.views import StoreSource
from tests.controllers.conftest import Harness
from tests.controllers.workflows import Flow, pod, task, workflow


def why(h: Harness, name: str) -> dict:
    wf = h.get("Workflow", name)
    assert wf is not None
    source = StoreSource(h.store)
    return explain_workflow(wf, gather_workflow(source, wf, now=h.clock.now)).to_dict()


def test_a_failed_workflow_counts_only_what_ended_well_and_says_which_task_failed(harness: Harness):
    h = harness
    h.apply(workflow("mixed", task("prep"), task("train", "prep"), task("eval", "train")))
    f = Flow(h, "mixed")
    f.finish("prep")
    f.finish("train", 3)
    f.settle("Failed")
    assert f.phases() == {"eval": "Omitted", "prep": "Succeeded", "train": "Failed"}
    assert f.status["progress"] == "1/3"  # not 3/3: two of them did not end well
    assert f.status["taskPhases"] == {"Succeeded": 1, "Failed": 1, "Omitted": 1}

    ex = why(h, "mixed")
    assert ex["state"] == "Failed" and ex["kind"] == "Workflow"
    assert ex["summary"].startswith("workflow/mixed failed: task train failed")
    assert ex["reason"] == f.node("train")["reason"]
    assert [(t["name"], t["phase"]) for t in ex["tasks"]] == [
        ("prep", "Succeeded"),
        ("train", "Failed"),
        ("eval", "Omitted"),
    ]
    train = next(t for t in ex["tasks"] if t["name"] == "train")
    assert "exit code 3" in train["detail"] or "3" in train["message"]
    assert ex["failure"]["pod"]["exitCode"] == 3
    assert any("muster retry workflow/mixed" in hint for hint in ex["unblock"])


def test_a_running_workflow_says_which_task_waits_and_why(sqlite_store, tmp_path):
    h = Harness(sqlite_store, tmp_path / "home", gpus=1)
    try:
        h.apply(workflow("gpus", task("a", template=pod("a", gpus=1)), task("b", template=pod("b", gpus=1))))
        f = Flow(h, "gpus")
        h.settle(lambda: len(h.rt.started) == 1)
        h.settle()
        ex = why(h, "gpus")
        assert ex["state"] == "Running"
        waiting = [t for t in ex["tasks"] if t["waiting"]]
        assert len(waiting) == 1, ex["tasks"]
        assert ex["reason"] in ("QuotaExhausted", "InsufficientResources")
        assert f"task {waiting[0]['name']} waits" in ex["summary"]
        assert ex["reason"] in waiting[0]["detail"]
        running = next(t for t in ex["tasks"] if t["phase"] == "Running" and not t["waiting"])
        assert "GPU 0" in running["detail"]
        assert f.status["progress"] == "0/2"
    finally:
        h.close()


def test_a_succeeded_workflow(harness: Harness):
    h = harness
    h.apply(workflow("ok", task("a"), task("b", "a", when="1 == 2")))
    f = Flow(h, "ok")
    f.finish("a")
    f.settle()
    assert f.status["progress"] == "2/2" and f.status["taskPhases"] == {"Succeeded": 1, "Skipped": 1}
    ex = why(h, "ok")
    assert ex["state"] == "Succeeded"
    assert ex["summary"] == "workflow/ok succeeded: 2 of 2 tasks ended well (1 skipped)"
