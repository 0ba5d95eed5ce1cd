"""Compiling @task / @workflow functions to Workflow objects."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from muster.api.registry import validate
from muster.sdk import task, workflow
from muster.sdk.dsl import SdkError, source_hash
from tests.sdk import flows

FLOWS = Path(flows.__file__).resolve()


def test_a_workflow_compiles_to_a_valid_workflow_object():
    obj = flows.small.compile(name="s1", n=4)
    wire = validate(obj).obj
    spec = wire["spec"]
    assert wire["metadata"]["annotations"]["muster.dev/sdk-result"] == "total"
    assert spec["parallelism"] == 2
    assert spec["arguments"]["parameters"] == [{"name": "n", "value": "4"}, {"name": "scale", "value": "2.0"}]
    tasks = {t["name"]: t for t in spec["tasks"]}
    assert list(tasks) == ["make-rows", "count", "count-2", "total"]
    assert tasks["count"]["dependencies"] == ["make-rows"] and tasks["total"]["dependencies"] == [
        "count",
        "count-2",
    ]
    container = tasks["count"]["template"]["spec"]["containers"][0]
    assert container["command"] == [os.path.abspath(sys.executable)]
    assert container["args"] == [
        "-m",
        "muster.sdk.run",
        f"{FLOWS}:count",
        "--artifact",
        "rows",
        "--param",
        "scale={{inputs.parameters.scale}}",
        "--returns",
        "parameter",
    ]
    assert container["resources"]["limits"] == {"cpu": "100m"}
    assert tasks["count"]["inputs"]["artifacts"] == [
        {"name": "rows", "from": "{{tasks.make-rows.outputs.artifacts.return}}"}
    ]
    assert tasks["count"]["inputs"]["parameters"] == [
        {"name": "scale", "value": "{{workflow.parameters.scale}}"}
    ]
    assert tasks["count-2"]["inputs"]["parameters"] == [{"name": "scale", "value": "1.0"}]
    assert tasks["total"]["inputs"]["parameters"][0] == {
        "name": "a",
        "value": "{{tasks.count.outputs.parameters.return}}",
    }
    assert tasks["make-rows"]["outputs"] == {"artifacts": [{"name": "return", "path": "return"}]}
    assert tasks["count"]["outputs"]["parameters"] == [
        {"name": "return", "valueFrom": {"path": "return.json"}}
    ]
    assert tasks["count"]["retryStrategy"] == {
        "limit": 2,
        "retryPolicy": "OnFailure",
        "backoff": {"duration": "1s", "factor": 2.0},
    }
    assert tasks["count"]["timeout"] == "5m" and tasks["count"]["cache"] == {"enabled": True, "version": ""}
    assert "cache" not in tasks["total"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["MUSTER_SDK_SOURCE_HASH"] == source_hash(flows.count.fn)


def test_compiling_is_deterministic():
    assert flows.small.compile(name="a") == flows.small.compile(name="a")


def test_replicas_make_a_training_job_task():
    @workflow
    def dist():
        flows.distributed(flows.make_rows(2))

    spec = validate(dist.compile()).obj["spec"]
    job = spec["tasks"][1]["trainingJob"]
    assert job["replicaSpecs"]["Master"]["replicas"] == 1 and job["replicaSpecs"]["Worker"]["replicas"] == 2
    assert "outputs" not in spec["tasks"][1]


def test_source_hash_follows_the_code_not_its_indentation(tmp_path: Path):
    def one():
        return 1

    def two():
        return 2

    assert source_hash(one) != source_hash(two)
    assert len(source_hash(one)) == 64


def test_tasks_called_outside_a_workflow_are_plain_functions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MUSTER_OUTPUTS_DIR", str(tmp_path))
    rows = flows.make_rows(2)
    assert sorted(p.name for p in rows.iterdir()) == ["0.json", "1.json"]
    assert flows.count(rows, 0.5) == {"count": 1.0, "pid": True}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (lambda: flows.count(Path("/tmp"), 1.0), "a Path argument must be the result of a task"),
        (lambda: flows.total(flows.make_rows(1), {}), "is a Path; annotate the parameter as Path"),
        (lambda: flows.total({"a": object()}, {}), "not JSON"),
    ],
)
def test_bad_compositions_are_explained(body, message):
    wf = workflow(lambda: body())
    wf.name = "bad"
    with pytest.raises(SdkError, match=message):
        wf.compile()


def test_promises_have_no_value_while_compiling():
    @workflow
    def branchy(n: int = 1):
        if n:
            flows.make_rows(n)

    with pytest.raises(SdkError, match="has no value while the workflow is compiled"):
        branchy.compile()


def test_missing_parameters_and_local_tasks_are_errors():
    @workflow
    def needs(n: int):
        flows.make_rows(n)

    with pytest.raises(SdkError, match="no value for parameter"):
        needs.compile()

    @task
    def local() -> int:
        return 1

    @workflow
    def uses_local():
        local()

    with pytest.raises(SdkError, match="defined inside a function"):
        uses_local.compile()
    assert json.dumps(needs.compile(n=2))  # JSON-able
