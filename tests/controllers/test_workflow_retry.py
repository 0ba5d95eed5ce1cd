"""Retries: retryStrategy with backoff, `muster retry` (the retry annotation) keeping what
succeeded, and a new manager continuing a workflow mid-way."""

from __future__ import annotations

import copy

import pytest

from muster.api.labels import RETRY_ANNOTATION
from muster.controllers.workflow.retry import next_retry
from tests.controllers.conftest import Harness
from tests.controllers.workflows import Flow, outputs, task, workflow


def test_retry_with_exponential_backoff_then_limit(harness: Harness):
    h = harness
    strategy = {"limit": 2, "backoff": {"duration": "10s", "factor": 2}}
    h.apply(workflow("flaky", task("a", retryStrategy=strategy)))
    f = Flow(h, "flaky")
    f.finish("a", 1)
    h.settle(lambda: f.phase("a") == "Pending")
    node = f.node("a")
    assert node["reason"] == "Backoff" and "attempt 2 in 10s" in node["message"]
    h.clock.advance(9)
    h.settle()
    assert len(f.started("a")) == 1  # still waiting
    h.clock.advance(1)
    h.settle(lambda: len(f.started("a")) == 2)
    f.finish("a", 1)
    h.settle(lambda: f.phase("a") == "Pending")
    assert "attempt 3 in 20s" in f.node("a")["message"]  # duration x factor^(n-1)
    h.clock.advance(19)
    h.settle()
    assert len(f.started("a")) == 2
    h.clock.advance(1)
    h.settle(lambda: len(f.started("a")) == 3)
    f.finish("a", 3)
    f.settle("Failed")
    node = f.node("a")
    assert node["attempts"] == 3 and node["reason"] == "Error"
    assert "exit code 3" in node["message"] and "retryStrategy.limit is 2" in node["message"]
    reasons = [r for r, _ in h.events(h.get("Workflow", "flaky"))]
    assert reasons.count("TaskRetrying") == 2 and reasons.count("TaskRunning") == 3


def test_retry_then_success_keeps_the_later_attempts_outputs(harness: Harness):
    h = harness
    h.apply(workflow("ok", task("a", retryStrategy={"limit": 1}, outputs=outputs(params={"n": ""}))))
    f = Flow(h, "ok")
    f.finish("a", 1)
    h.settle(lambda: len(f.started("a")) == 2)
    first, second = f.started("a")
    assert first != second  # each attempt has its own pod (and outputs directory)
    f.finish("a", params={"n": "7"})
    f.settle()
    assert f.node("a")["outputs"]["parameters"] == {"n": "7"} and f.node("a")["attempts"] == 2


def test_max_duration_stops_retrying(harness: Harness):
    h = harness
    strategy = {"backoff": {"duration": "60s", "factor": 1, "maxDuration": "90s"}}  # no limit
    h.apply(workflow("window", task("a", retryStrategy=strategy)))
    f = Flow(h, "window")
    f.finish("a", 1)
    h.settle(lambda: f.phase("a") == "Pending")
    h.clock.advance(60)
    h.settle(lambda: len(f.started("a")) == 2)
    f.finish("a", 1)  # the next attempt would start at 120s > 90s
    f.settle("Failed")
    assert "backoff.maxDuration 90s" in f.node("a")["message"]


@pytest.mark.parametrize(
    ("strategy", "state", "attempts", "expected"),
    [
        (None, "failed", 1, None),
        ({}, "failed", 50, 0.0),  # limit unset: unbounded, immediate
        ({"limit": 0}, "failed", 1, None),
        ({"retryPolicy": "OnError"}, "failed", 1, None),
        ({"retryPolicy": "Always"}, "error", 1, 0.0),
        ({"backoff": {"duration": "5s", "factor": 3}}, "failed", 3, 45.0),
    ],
)
def test_next_retry_rules(strategy, state, attempts, expected):
    wait, _why = next_retry(strategy, state, attempts, None, 1000.0, permanent=False)
    assert wait == expected


def request_retry(h: Harness, name: str) -> None:
    wf = copy.deepcopy(h.get("Workflow", name))
    annotations = wf["metadata"].setdefault("annotations", {})
    annotations[RETRY_ANNOTATION] = str(int((wf.get("status") or {}).get("retries") or 0) + 1)
    h.store.update(wf)


def test_muster_retry_reruns_the_failed_and_what_depends_on_it_only(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "pipe",
            task("prep", outputs=outputs(params={"n": ""})),
            task("side"),
            task("train", "prep"),
            task("eval", "train"),
            task("report", "side"),
            task("done"),
            onExit="done",
        )
    )
    f = Flow(h, "pipe")
    f.finish("prep", params={"n": "5"})
    f.finish("side")
    f.finish("report")
    f.finish("train", 1)
    f.finish("done")
    f.settle("Failed")
    assert f.phases() == {
        "done": "Succeeded",
        "eval": "Omitted",
        "prep": "Succeeded",
        "report": "Succeeded",
        "side": "Succeeded",
        "train": "Failed",
    }
    request_retry(h, "pipe")
    h.settle(lambda: f.phase() == "Running")
    assert f.status["retries"] == 1
    assert f.phase("train") in ("Pending", "Running") and f.phase("eval") == "Pending"
    f.finish("train")
    f.finish("eval")
    h.settle(lambda: len(f.started("done")) == 2)  # the onExit task runs again
    f.finish("done")
    f.settle()
    # what had succeeded kept its outputs and did not run again
    assert len(f.started("prep")) == len(f.started("side")) == len(f.started("report")) == 1
    assert len(f.started("train")) == 2 and len(f.started("eval")) == 1
    assert f.node("prep")["outputs"]["parameters"] == {"n": "5"}
    assert f.node("train")["attempts"] == 2 and f.node("train")["attemptsBeforeRetry"] == 1
    events = [r for r, _ in h.events(h.get("Workflow", "pipe"))]
    assert "WorkflowRetried" in events and events[-1] == "WorkflowSucceeded"


def test_retry_of_a_running_workflow_is_ignored(harness: Harness):
    h = harness
    h.apply(workflow("busy", task("a")))
    f = Flow(h, "busy")
    f.pod_of("a")
    request_retry(h, "busy")
    h.settle(lambda: f.status.get("retries") == 1)
    assert [m for r, m in h.events(h.get("Workflow", "busy")) if r == "RetryIgnored"]
    f.finish("a")
    f.settle()
    assert len(f.started("a")) == 1


def test_retry_of_a_fan_out_keeps_its_runs_that_succeeded(harness: Harness):
    h = harness
    h.apply(workflow("fan", task("each", withItems=["x", "y", "z"]), task("after", "each")))
    f = Flow(h, "fan")
    f.finish("each(0)")
    f.finish("each(1)", 1)
    f.finish("each(2)")
    f.settle("Failed")
    request_retry(h, "fan")
    h.settle(lambda: len(f.started("each(1)")) == 2)
    f.finish("each(1)")
    f.finish("after")
    f.settle()
    assert len(f.started("each(0)")) == len(f.started("each(2)")) == 1


def test_a_new_manager_continues_a_workflow_midway(harness: Harness, sqlite_store):
    h = harness
    h.apply(workflow("long", task("a", outputs=outputs(params={"n": ""})), task("b", "a"), task("c", "b")))
    f = Flow(h, "long")
    f.finish("a", params={"n": "1"})
    key = f.pod_of("b")
    h.rt.run(key)
    h.settle(lambda: f.node("b").get("reason") == "Running")
    # the manager goes away; its pods keep running (the runtime re-adopts them)
    h.manager.stop()
    from muster.controllers.manager import Manager, ManagerConfig

    manager = Manager(
        sqlite_store,
        ManagerConfig(home=h.home, resync_seconds=0, heartbeat_seconds=3600, clock=h.clock),
        runtime=h.rt,
    )
    h.manager = manager
    manager.open()
    h.rt.exit(key, 0)
    f.finish("c")
    f.settle()
    assert len(f.started("a")) == len(f.started("b")) == len(f.started("c")) == 1
