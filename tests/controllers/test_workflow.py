"""The Workflow controller through the manager: DAG order, parallelism, data passing, when,
fan-out, fail fast, onExit, timeouts, TrainingJob tasks, preemption."""

from __future__ import annotations

import json
from pathlib import Path

from muster.runtime.base import PodReason
from tests.controllers.conftest import Harness
from tests.controllers.workflows import Flow, outputs, pod, task, workflow


def test_dag_runs_in_dependency_order(harness: Harness):
    h = harness
    # a diamond: a -> (b, c) -> d
    h.apply(workflow("dia", task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")))
    f = Flow(h, "dia")
    f.pod_of("a")
    h.settle()
    assert f.phases() == {"a": "Running", "b": "Pending", "c": "Pending", "d": "Pending"}
    assert f.node("d")["reason"] == "WaitingForDependencies"
    f.finish("a")
    f.pod_of("b")
    f.pod_of("c")
    f.finish("b")
    h.settle()
    assert f.phase("d") == "Pending" and not f.started("d")
    f.finish("c")
    f.finish("d")
    f.settle()
    order = [f._node_of(k) for k in h.rt.started]
    assert order.index("a") < order.index("b") < order.index("d")
    assert order.index("c") < order.index("d")
    assert f.status["progress"] == "4/4"
    events = [r for r, _ in h.events(h.get("Workflow", "dia"))]
    assert events[0] == "WorkflowRunning" and events[-1] == "WorkflowSucceeded"
    assert events.count("TaskRunning") == 4 and events.count("TaskSucceeded") == 4


def test_parallelism_caps_running_tasks(harness: Harness):
    h = harness
    h.apply(workflow("par", *(task(f"t{i}") for i in range(4)), parallelism=2))
    f = Flow(h, "par")
    h.settle(lambda: len(h.rt.started) == 2)
    h.settle()
    assert len(h.rt.started) == 2
    waiting = [n for n, p in f.phases().items() if p == "Pending"]
    assert len(waiting) == 2
    assert all(f.node(n)["reason"] == "Parallelism" for n in waiting)
    peak = 0
    while f.phase() != "Succeeded":
        running = [n for n, p in f.phases().items() if p == "Running"]
        peak = max(peak, len(running))
        assert len(running) <= 2
        f.finish(running[0])
        h.settle()
    assert peak == 2 and len(h.rt.started) == 4


def test_parameters_and_artifacts_pass_between_tasks(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "data",
            task("prep", outputs=outputs(params={"rows": ""}, artifacts={"dataset": ""})),
            task(
                "train",
                "prep",
                template=pod("train", "--rows", "{{inputs.parameters.rows}}", "{{inputs.artifacts.dataset}}"),
                inputs={
                    "parameters": [{"name": "rows", "value": "{{tasks.prep.outputs.parameters.rows}}"}],
                    "artifacts": [{"name": "dataset", "from": "{{tasks.prep.outputs.artifacts.dataset}}"}],
                },
            ),
        )
    )
    f = Flow(h, "data")
    f.finish("prep", params={"rows": "  1000 "}, files={"dataset/part-0.csv": "a,b\n1,2\n"})
    env = f.env("train")
    inputs = Path(env["MUSTER_INPUTS_DIR"])
    assert (inputs / "dataset" / "part-0.csv").read_text() == "a,b\n1,2\n"
    assert f.command("train") == ["train", "--rows", "1000", str(inputs / "dataset")]
    assert Path(env["MUSTER_OUTPUTS_DIR"]).is_dir() and not any(Path(env["MUSTER_OUTPUTS_DIR"]).iterdir())
    assert env["MUSTER_WORKFLOW_NAME"] == "data" and env["MUSTER_WORKFLOW_TASK"] == "train"
    prep = f.node("prep")
    assert prep["outputs"]["parameters"] == {"rows": "1000"}
    digest = prep["outputs"]["artifacts"]["dataset"]
    stored = h.home / "artifacts" / "sha256" / digest.removeprefix("sha256:")
    assert (stored / "part-0.csv").read_text() == "a,b\n1,2\n"
    f.finish("train")
    f.settle()
    # the attempts' Workloads are finished: their quota is released
    workloads = h.store.list("Workload", "default").items
    assert workloads and all(
        any(c["type"] == "Finished" and c["status"] == "True" for c in w["status"]["conditions"])
        for w in workloads
    )


def test_a_declared_output_that_is_missing_errors_the_task(harness: Harness):
    h = harness
    h.apply(workflow("miss", task("a", outputs=outputs(params={"n": ""})), task("b", "a")))
    f = Flow(h, "miss")
    f.finish("a")
    f.settle("Error")
    assert f.node("a")["phase"] == "Error" and f.node("a")["reason"] == "MissingOutput"
    assert "output parameter n: the task wrote no file n.txt" in f.node("a")["message"]
    assert f.node("b")["phase"] == "Omitted" and f.node("b")["reason"] == "UpstreamFailed"
    assert "task a errored" in f.status["message"]


def test_when_false_skips_and_dependents_still_run(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "cond",
            task("flip", outputs=outputs(params={"side": ""})),
            task(
                "heads",
                "flip",
                when="{{tasks.flip.outputs.parameters.side}} == heads",
                outputs=outputs(params={"x": ""}),
            ),
            task("tails", "flip", when="{{tasks.flip.outputs.parameters.side}} == tails"),
            task("after", "heads", template=pod("echo", "[{{tasks.heads.outputs.parameters.x}}]")),
        )
    )
    f = Flow(h, "cond")
    f.finish("flip", params={"side": "tails"})
    f.pod_of("tails")
    assert f.node("heads")["phase"] == "Skipped" and f.node("heads")["reason"] == "WhenFalse"
    assert f.command("after") == ["echo", "[]"]  # outputs of a skipped task are empty
    f.finish("tails")
    f.finish("after")
    f.settle()


def test_fan_out_over_items_and_params_with_aggregated_outputs(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "fan",
            task("list", outputs=outputs(params={"shards": ""})),
            task(
                "shard",
                "list",
                withParam="{{tasks.list.outputs.parameters.shards}}",
                template=pod("work", "{{item.id}}"),
                outputs=outputs(params={"score": ""}),
            ),
            task("sweep", withItems=[0.1, 0.2], template=pod("lr", "{{item}}")),
            task("sum", "shard", template=pod("sum", "{{tasks.shard.outputs.parameters.score}}")),
        )
    )
    f = Flow(h, "fan")
    f.finish("list", params={"shards": json.dumps([{"id": "a"}, {"id": "b"}])})
    assert f.command("shard(0)") == ["work", "a"] and f.command("shard(1)") == ["work", "b"]
    assert f.command("sweep(0)") == ["lr", "0.1"] and f.command("sweep(1)") == ["lr", "0.2"]
    assert f.node("shard")["children"] == ["shard(0)", "shard(1)"]
    assert f.node("shard(1)")["item"] == {"id": "b"}
    f.finish("shard(0)", params={"score": "3"})
    h.settle()
    assert f.phase("shard") == "Running" and f.node("shard")["message"] == "1/2 run(s) done"
    f.finish("shard(1)", params={"score": "4"})
    assert f.command("sum") == ["sum", '["3","4"]']
    for n in ("sweep(0)", "sweep(1)", "sum"):
        f.finish(n)
    f.settle()
    assert f.status["progress"] == "6/6"


def test_an_input_parameter_of_a_fan_out_may_take_its_item(harness: Harness):
    # The group itself has no item: its runs resolve the input, each with its own.
    harness.apply(
        workflow(
            "itemin",
            task(
                "each",
                withItems=["a", "b"],
                inputs={"parameters": [{"name": "word", "value": "w-{{item}}"}]},
                template=pod("say", "{{inputs.parameters.word}}"),
            ),
        )
    )
    f = Flow(harness, "itemin")
    assert f.command("each(0)") == ["say", "w-a"] and f.command("each(1)") == ["say", "w-b"]


def test_bad_with_param_errors_the_task(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "badparam",
            task("list", outputs=outputs(params={"items": ""})),
            task(
                "each",
                "list",
                withParam="{{tasks.list.outputs.parameters.items}}",
                template=pod("x", "{{item}}"),
            ),
        )
    )
    f = Flow(h, "badparam")
    f.finish("list", params={"items": "not json"})
    f.settle("Error")
    assert f.node("each")["reason"] == "BadReference"
    assert "not a JSON list" in f.node("each")["message"]


def test_fail_fast_omits_what_has_not_started_and_on_exit_sees_the_status(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "ff",
            task("a"),
            task("slow"),
            task("b", "a"),
            task("c", "slow"),
            task("notify", template=pod("notify", "{{workflow.status}}", "{{workflow.failures}}")),
            onExit="notify",
        )
    )
    f = Flow(h, "ff")
    f.pod_of("a")
    f.pod_of("slow")
    f.finish("a", 1)
    h.settle()
    # b depends on the failure; c waits on a running task but will never be started
    assert f.node("b")["phase"] == "Omitted" and f.node("b")["reason"] == "UpstreamFailed"
    assert f.node("c")["phase"] == "Omitted" and f.node("c")["reason"] == "FailFast"
    assert f.phase("slow") == "Running"  # running tasks finish
    assert not f.started("notify")  # onExit waits for every task
    f.finish("slow")
    command = f.command("notify")
    assert command[1] == "Failed"
    failures = json.loads(command[2])
    assert [x["displayName"] for x in failures] == ["a"] and failures[0]["phase"] == "Failed"
    f.finish("notify")
    f.settle("Failed")
    assert f.status["message"].startswith("task a failed: pod ")


def test_on_exit_failure_fails_a_successful_workflow(harness: Harness):
    h = harness
    h.apply(workflow("ex", task("a"), task("bye", when="{{workflow.status}} == Succeeded"), onExit="bye"))
    f = Flow(h, "ex")
    f.finish("a")
    f.finish("bye", 2)
    f.settle("Failed")
    assert f.status["message"].startswith("onExit task bye failed")


def test_timeout_stops_a_pod_task_and_fails_it(harness: Harness):
    h = harness
    h.apply(workflow("slow", task("a", timeout="30s")))
    f = Flow(h, "slow")
    key = f.pod_of("a")
    h.rt.clock = h.clock.now  # the pod's start time is on the manager's clock
    h.rt.run(key)
    h.settle(lambda: f.node("a").get("reason") == "Running")
    h.clock.advance(29)
    h.settle()
    assert not h.rt.stops
    h.clock.advance(2)
    h.settle(lambda: f.phase() == "Failed")
    assert h.rt.stops == [(key, "DeadlineExceeded")]
    assert f.node("a")["reason"] == "DeadlineExceeded"


def test_preempted_pod_task_is_requeued_not_failed(harness: Harness):
    h = harness
    h.apply(workflow("pre", task("a", template=pod("train", gpus=4))))
    f = Flow(h, "pre")
    key = f.pod_of("a")
    h.rt.run(key)
    h.settle(lambda: f.node("a").get("reason") == "Running")
    h.apply(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "urgent"},
            "value": 1000,
        },
        {
            "apiVersion": "muster.dev/v1",
            "kind": "TrainingJob",
            "metadata": {"name": "urgent"},
            "spec": {
                "priorityClassName": "urgent",
                "replicaSpecs": {"Worker": {"replicas": 1, "template": pod("x", gpus=4)}},
            },
        },
    )
    h.settle(
        lambda: (
            f.node("a").get("reason") in ("Queued", "Preempted") and "default/urgent-worker-0" in h.rt.started
        )
    )
    assert f.phase("a") == "Running" and f.node("a")["attempts"] == 1
    h.rt.run("default/urgent-worker-0")
    h.rt.exit("default/urgent-worker-0", 0)
    h.settle(lambda: len(f.started("a")) == 2)
    f.finish("a")
    f.settle()
    assert f.node("a")["attempts"] == 1  # preemption is not a failed attempt


def test_training_job_task_gets_a_gang_and_passes_outputs(harness: Harness):
    h = harness
    job = {
        "replicaSpecs": {
            "Master": {"replicas": 1, "template": pod("train", "{{inputs.parameters.lr}}")},
            "Worker": {"replicas": 1, "template": pod("train", "{{inputs.parameters.lr}}")},
        }
    }
    h.apply(
        workflow(
            "tj",
            task(
                "train",
                template=None,
                trainingJob=job,
                inputs={"parameters": [{"name": "lr", "value": "0.5"}]},
                outputs=outputs(params={"loss": ""}),
                timeout="1h",
            ),
            task("eval", "train", template=pod("eval", "{{tasks.train.outputs.parameters.loss}}")),
        )
    )
    f = Flow(h, "tj")
    h.settle(lambda: len(h.rt.started) == 2)
    tj = next(iter(h.store.list("TrainingJob", "default").items))
    assert tj["metadata"]["ownerReferences"][0]["kind"] == "Workflow"
    assert tj["spec"]["runPolicy"]["activeDeadlineSeconds"] == 3600
    assert tj["spec"]["queueName"] == "default"
    master = next(k for k in h.rt.started if "master" in k)
    env = h.rt.find(master).env
    assert env["RANK"] == "0" and env["WORLD_SIZE"] == "2"
    assert h.rt.find(master).launch.containers[0].command == ("train", "0.5")
    h.settle()
    assert f.node("train")["reason"] == "Queued"  # admitted, its gang not yet running
    h.rt.run_all()
    h.settle(lambda: f.node("train")["reason"] == "Running")
    (Path(env["MUSTER_OUTPUTS_DIR"]) / "loss.txt").write_text("0.125")
    for key in list(h.rt.started):
        h.rt.exit(key, 0)
    assert f.command("eval") == ["eval", "0.125"]
    f.finish("eval")
    f.settle()


def test_deleting_a_workflow_removes_its_objects_and_stops_its_pods(harness: Harness):
    h = harness
    h.apply(workflow("gone", task("a")))
    f = Flow(h, "gone")
    key = f.pod_of("a")
    h.rt.run(key)
    h.settle(lambda: f.node("a").get("reason") == "Running")
    wf = h.get("Workflow", "gone")
    h.store.delete("Workflow", "gone", "default")
    h.settle(lambda: not h.store.list("Workload", "default").items and not h.pods())
    assert (key, "Stopped") in h.rt.stops or any(k == key for k, _ in h.rt.stops)
    runs = h.home / "artifacts" / "runs" / "default" / wf["metadata"]["uid"]
    assert not runs.exists()


def test_node_lost_is_an_error_retried_only_on_error(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "lost",
            task("a", retryStrategy={"limit": 1, "retryPolicy": "OnError"}),
            task("b", retryStrategy={"limit": 1}),
        )
    )
    f = Flow(h, "lost")
    f.finish("a", 137, reason=PodReason.NODE_LOST)
    f.finish("b", 137, reason=PodReason.NODE_LOST)
    h.settle(lambda: len(f.started("a")) == 2)
    f.finish("a")
    f.settle("Error")
    assert f.node("a")["phase"] == "Succeeded" and f.node("a")["attempts"] == 2
    assert f.node("b")["phase"] == "Error" and "retryPolicy OnFailure" in f.node("b")["message"]


def test_an_input_that_cannot_be_computed_errors_the_task(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "calc",
            task("a", outputs=outputs(params={"n": ""})),
            task(
                "b",
                "a",
                inputs={
                    "parameters": [{"name": "m", "value": "{{= asInt(tasks.a.outputs.parameters.n) + 1}}"}]
                },
                template=pod("b", "{{inputs.parameters.m}}"),
            ),
        )
    )
    f = Flow(h, "calc")
    f.finish("a", params={"n": "many"})
    f.settle("Error")
    assert (
        f.node("b")["reason"] == "BadReference" and "asInt: 'many' is not a number" in f.node("b")["message"]
    )
    assert not f.started("b")
