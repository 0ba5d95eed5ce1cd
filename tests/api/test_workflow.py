from __future__ import annotations

import pytest

from muster.api.registry import validate
from muster.api.workflow import parse_duration
from tests.api.helpers import errors_of, obj


def _pod(*command):
    return {"spec": {"containers": [{"name": "main", "command": list(command) or ["true"]}]}}


def _task(name, *deps, **fields):
    fields.setdefault("template", _pod())
    return {"name": name, "dependencies": list(deps), **fields}


def _wf(*tasks, **spec):
    return obj("Workflow", spec={"tasks": list(tasks), **spec})


def test_a_full_pipeline_validates():
    wf = _wf(
        _task(
            "prep",
            template=_pod("sh", "-c", "echo {{workflow.parameters.lr}} > n.txt"),
            outputs={
                "parameters": [{"name": "n", "valueFrom": {"path": "n.txt"}}],
                "artifacts": [{"name": "data", "path": "data/"}],
            },
        ),
        _task(
            "train",
            "prep",
            withItems=[1, 2],
            when="{{tasks.prep.outputs.parameters.n}} > 0",
            inputs={
                "parameters": [{"name": "n", "value": "{{tasks.prep.outputs.parameters.n}}"}],
                "artifacts": [{"name": "data", "from": "{{tasks.prep.outputs.artifacts.data}}"}],
            },
            template=_pod("python", "t.py", "{{inputs.parameters.n}}", "{{item}}", "{{=asInt(item) * 2}}"),
            retryStrategy={"limit": 2, "backoff": {"duration": 10, "factor": 2, "maxDuration": "5m"}},
            cache={"version": "v1", "maxAge": "24h"},
            timeout="1h30m",
        ),
        _task(
            "tune",
            "train",
            trainingJob={"replicaSpecs": {"Worker": {"replicas": 2, "template": _pod("x")}}},
            template=None,
        ),
        _task("notify", template=_pod("echo", "{{workflow.status}} {{tasks.prep.outputs.parameters.n}}")),
        arguments={"parameters": [{"name": "lr", "value": "0.1"}]},
        onExit="notify",
        parallelism=2,
    )
    wire = validate(wf).obj
    train = wire["spec"]["tasks"][1]
    assert train["retryStrategy"]["backoff"] == {"duration": "10s", "factor": 2.0, "maxDuration": "5m"}
    assert train["cache"] == {"enabled": True, "version": "v1", "maxAge": "24h"}
    assert "template" not in wire["spec"]["tasks"][2]


def test_cycle_is_rejected_naming_it():
    wf = _wf(_task("a", "c"), _task("b", "a"), _task("c", "b"), _task("d"))
    assert errors_of(wf) == ["spec.tasks: dependency cycle a -> c -> b -> a"]


@pytest.mark.parametrize(
    ("wf", "expected"),
    [
        (_wf(_task("a"), _task("a")), ["spec.tasks[1].name: duplicate task name, got 'a'"]),
        (_wf(_task("a", "zz")), ["spec.tasks[0].dependencies[0]: no task named 'zz' (tasks: a)"]),
        (_wf(_task("a", "a")), ["spec.tasks[0].dependencies[0]: a task cannot depend on itself, got 'a'"]),
        (_wf(_task("Bad_Name")), None),
        (_wf(_task("a", template=None)), ["spec.tasks[0]: must set exactly one of template and trainingJob"]),
        (
            _wf(_task("a", withItems=[1], withParam="[1]")),
            ["spec.tasks[0].withParam: may not be set together with withItems"],
        ),
        (
            _wf(_task("a"), _task("b", "a"), onExit="b"),
            ["spec.tasks[1].dependencies: must be empty for the onExit task: it runs after every other task"],
        ),
        (
            _wf(_task("a"), _task("b", "a"), onExit="a"),
            ["spec.tasks[1].dependencies[0]: 'a' is the onExit task, which runs last"],
        ),
        (_wf(_task("a"), onExit="zz"), ["spec.onExit: no task named 'zz' (tasks: a)"]),
        (
            _wf(_task("a", timeout="soon")),
            [
                "spec.tasks[0].timeout: 'soon' is not a duration: use seconds (30) or a duration such as "
                "90s, 5m, 1h30m"
            ],
        ),
    ],
)
def test_structure_rules(wf, expected):
    if expected is None:
        (err,) = errors_of(wf)
        assert err.startswith("spec.tasks[0].name: must be a DNS-1123 label")
    else:
        assert errors_of(wf) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "{{tasks.b.outputs.parameters.p}}",
            "{{tasks.b.outputs.parameters.p}}: task 'b' must run first; add it to dependencies",
        ),
        ("{{tasks.zz.outputs.parameters.p}}", "{{tasks.zz.outputs.parameters.p}}: no task named 'zz'"),
        (
            "{{tasks.a.outputs.parameters.q}}",
            "{{tasks.a.outputs.parameters.q}}: task 'a' declares no output parameter 'q'",
        ),
        ("{{inputs.parameters.z}}", "{{inputs.parameters.z}}: the task declares no input parameter 'z'"),
        ("{{item}}", "{{item}} is only defined in a task with withItems or withParam"),
        (
            "{{workflow.parameters.nope}}",
            "{{workflow.parameters.nope}}: spec.arguments.parameters has no 'nope'",
        ),
        (
            "{{steps.x.outputs.result}}",
            "unknown reference {{steps.x.outputs.result}}: use tasks.<task>.outputs."
            "parameters.<name>, inputs.parameters.<name>, workflow.parameters.<name> or item",
        ),
    ],
)
def test_references_must_resolve(command, expected):
    wf = _wf(
        _task("a", outputs={"parameters": [{"name": "p", "valueFrom": {"path": "p"}}]}),
        _task("b", outputs={"parameters": [{"name": "p", "valueFrom": {"path": "p"}}]}),
        _task("c", "a", template=_pod("echo", command)),
    )
    assert errors_of(wf) == [f"spec.tasks[2].template.spec.containers[0].command[1]: {expected}"]


def test_artifact_inputs_must_name_an_upstream_artifact():
    wf = _wf(_task("a"), _task("b", "a", inputs={"artifacts": [{"name": "d", "from": "/tmp/data"}]}))
    assert errors_of(wf) == [
        "spec.tasks[1].inputs.artifacts[0].from: must be one reference "
        "{{tasks.<task>.outputs.artifacts.<name>}}, "
        "got '/tmp/data'"
    ]


def test_embedded_training_job_is_checked_with_its_path():
    wf = _wf(
        _task(
            "t", template=None, trainingJob={"replicaSpecs": {"Master": {"replicas": 2, "template": _pod()}}}
        )
    )
    assert errors_of(wf) == ["spec.tasks[0].trainingJob.replicaSpecs.Master.replicas: must be 1, got 2"]


def test_artifacts_of_a_fan_out_cannot_be_passed_on():
    wf = _wf(
        _task("a", withItems=[1, 2], outputs={"artifacts": [{"name": "d", "path": "d"}]}),
        _task("b", "a", inputs={"artifacts": [{"name": "d", "from": "{{tasks.a.outputs.artifacts.d}}"}]}),
    )
    assert errors_of(wf) == [
        "spec.tasks[1].inputs.artifacts[0].from: {{tasks.a.outputs.artifacts.d}}: task 'a' fans out "
        "(withItems/withParam); pass parameters instead"
    ]


def test_a_ttl_on_an_embedded_job_is_ignored_with_a_warning():
    job = {
        "runPolicy": {"ttlSecondsAfterFinished": 0},
        "replicaSpecs": {"Worker": {"replicas": 1, "template": _pod()}},
    }
    assert validate(_wf(_task("t", template=None, trainingJob=job))).warnings == [
        "spec.tasks[0].trainingJob.runPolicy.ttlSecondsAfterFinished: ignored: a workflow keeps its jobs "
        "until the workflow is deleted"
    ]


def test_parse_duration():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration("10s") == 10
