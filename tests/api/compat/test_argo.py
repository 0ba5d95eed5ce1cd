"""Argo ``argoproj.io/v1alpha1 Workflow`` -> Muster Workflow: each mapping, each warning and
each error, named by the path the user wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.registry import to_model, validate
from tests.api.helpers import errors_of

MANIFESTS = Path(__file__).parent.parent / "manifests"
Obj = dict[str, Any]


def _load(name: str) -> Obj:
    return yaml.safe_load((MANIFESTS / name).read_text())


def argo(*templates: Obj, entrypoint: str = "main", **spec: Any) -> Obj:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "wf"},
        "spec": {"entrypoint": entrypoint, "templates": list(templates), **spec},
    }


def container(name: str, *command: str, **fields: Any) -> Obj:
    return {"name": name, "container": {"image": "alpine", "command": list(command) or ["true"]}, **fields}


def steps(name: str, *groups: list[Obj], **fields: Any) -> Obj:
    return {"name": name, "steps": list(groups), **fields}


def dag(name: str, *tasks: Obj, **fields: Any) -> Obj:
    return {"name": name, "dag": {"tasks": list(tasks)}, **fields}


def tasks_of(result: Any) -> dict[str, Obj]:
    return {t["name"]: t for t in result.obj["spec"]["tasks"]}


def test_steps_run_group_after_group_with_parameters_loops_and_results():
    result = validate(_load("argo-steps.yaml"))
    wf = result.obj
    assert (wf["apiVersion"], wf["kind"]) == ("muster.dev/v1", "Workflow")
    assert wf["metadata"]["name"].startswith("steps-") and len(wf["metadata"]["name"]) == len("steps-") + 5
    assert validate(_load("argo-steps.yaml")).obj["metadata"]["name"] == wf["metadata"]["name"]
    spec = wf["spec"]
    assert spec["arguments"] == {"parameters": [{"name": "greeting", "value": "hello"}]}
    assert spec["queueName"] == "team-a"  # the Kueue label
    tasks = tasks_of(result)
    assert list(tasks) == ["generate", "fan", "count", "each", "only-hello", "onexit"]
    # the outer list runs in order, each inner list in parallel
    assert "dependencies" not in tasks["generate"]
    assert tasks["fan"]["dependencies"] == tasks["count"]["dependencies"] == ["generate"]
    assert tasks["each"]["dependencies"] == tasks["only-hello"]["dependencies"] == ["fan", "count"]
    # arguments become the called template's input parameters; the template keeps its references
    assert tasks["generate"]["inputs"] == {
        "parameters": [{"name": "message", "value": "{{workflow.parameters.greeting}}"}]
    }
    assert tasks["generate"]["template"]["spec"]["containers"][0]["args"] == [
        "echo -n {{inputs.parameters.message}} > $(MUSTER_OUTPUTS_DIR)/tmp_said.txt"
    ]
    assert tasks["generate"]["outputs"] == {
        "parameters": [{"name": "said", "valueFrom": {"path": "tmp_said.txt"}}]
    }
    assert tasks["fan"]["withItems"] == ["a", "b", "c"]
    assert tasks["fan"]["inputs"]["parameters"] == [{"name": "word", "value": "{{item}}"}]
    # {{steps.X.outputs.result}}: X records its standard output as the parameter "result"
    assert tasks["each"]["withParam"] == "{{tasks.count.outputs.parameters.result}}"
    assert tasks["count"]["outputs"] == {
        "parameters": [{"name": "result", "valueFrom": {"path": "argo-result"}}]
    }
    assert tasks["only-hello"]["when"] == "{{tasks.generate.outputs.parameters.said}} == hello"
    # the retry strategy, IntOrString values read as numbers
    assert tasks["generate"]["retryStrategy"] == {
        "limit": 2,
        "retryPolicy": "Always",
        "backoff": {"duration": "1s", "factor": 2.0, "maxDuration": "1m"},
    }
    assert spec["onExit"] == "onexit" and "dependencies" not in tasks["onexit"]
    kept = json.loads(wf["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert kept == {"spec.podGC": {"strategy": "OnPodSuccess"}, "spec.serviceAccountName": "argo-runner"}
    assert result.warnings == [
        f"metadata.generateName: named {wf['metadata']['name']!r}: the suffix is a digest of the manifest, "
        "so applying it again updates that workflow instead of creating another (set metadata.name to "
        "choose the name)",
        "spec.templates[1].outputs.parameters[0].valueFrom.path: /tmp/said.txt is under $MUSTER_OUTPUTS_DIR "
        "on Muster: the command names it as $(MUSTER_OUTPUTS_DIR)/tmp_said.txt",
        "spec.podGC: not supported by Muster; ignored (kept in "
        "metadata.annotations[muster.dev/ignored-fields])",
        "spec.serviceAccountName: not supported by Muster; ignored (kept in "
        "metadata.annotations[muster.dev/ignored-fields])",
    ]
    again = validate(wf)  # the converted object is a native one
    assert again.obj == wf and again.warnings == []
    assert to_model(wf).to_dict() == wf


def test_script_runs_command_then_its_source_file_then_args_with_dollars_kept(tmp_path: Path):
    import subprocess

    doc = argo(
        steps("main", [{"name": "s", "template": "py"}]),
        {
            "name": "py",
            "script": {
                "image": "debian",
                "command": ["sh", "-e"],
                "args": ["x", "y"],
                "source": 'v=1; echo "$(echo a)${v}x $1-$2"',
            },
        },
    )
    command = tasks_of(validate(doc))["s"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sh", "-c"] and command[-5:] == ["2", "sh", "-e", "x", "y"]
    assert command[-6] == 'v=1; echo "$$(echo a)$${v}x $$1-$$2"'  # $$ is a literal $ once $(VAR) is expanded
    # the launcher as the runtime runs it, after expanding $$ -> $
    argv = [a.replace("$$", "$") for a in command]
    run = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert run.stdout == "a1x x-y\n"
    assert list(tmp_path.iterdir()) == []


def test_dag_dependencies_depends_artifacts_and_names():
    result = validate(_load("argo-dag.yaml"))
    spec = result.obj["spec"]
    assert result.obj["metadata"] == {"name": "diamond", "namespace": "pipelines"}
    assert spec["parallelism"] == 2
    tasks = tasks_of(result)
    assert list(tasks) == ["a", "b", "c", "d"]  # DNS-1123 labels
    assert tasks["b"]["dependencies"] == ["a"] and tasks["c"]["dependencies"] == ["a"]
    assert tasks["d"]["dependencies"] == ["b", "c"]  # depends: "B && C"
    assert tasks["a"]["outputs"] == {
        "parameters": [{"name": "word", "valueFrom": {"path": "tmp_word"}}],
        "artifacts": [{"name": "data", "path": "tmp_data"}],
    }
    assert tasks["a"]["template"]["spec"]["containers"][0]["command"][2] == (
        "mkdir -p $(MUSTER_OUTPUTS_DIR)/tmp_data && echo 42 > $(MUSTER_OUTPUTS_DIR)/tmp_data/n "
        "&& printf hi > $(MUSTER_OUTPUTS_DIR)/tmp_word"
    )
    assert tasks["b"]["inputs"] == {
        "artifacts": [{"name": "data", "from": "{{tasks.a.outputs.artifacts.data}}"}]
    }
    assert tasks["b"]["template"]["spec"]["containers"][0]["command"][2] == (
        "test $(cat {{inputs.artifacts.data}}/n) = 42"
    )
    assert tasks["b"]["timeout"] == "60s"  # activeDeadlineSeconds
    assert tasks["c"]["inputs"]["parameters"] == [
        {"name": "word", "value": "{{tasks.a.outputs.parameters.word}}"}
    ]
    assert tasks["d"]["inputs"]["parameters"] == [{"name": "word", "value": "done"}]
    assert result.warnings == [
        "spec.templates[0].dag.tasks[0].name: the task is named 'a' on Muster (task names are DNS-1123 "
        "labels), got 'A'",
        "spec.templates[1].outputs.parameters[0].valueFrom.path: /tmp/word is under $MUSTER_OUTPUTS_DIR on "
        "Muster: the command names it as $(MUSTER_OUTPUTS_DIR)/tmp_word",
        "spec.templates[1].outputs.artifacts[0].path: /tmp/data is under $MUSTER_OUTPUTS_DIR on Muster: the "
        "command names it as $(MUSTER_OUTPUTS_DIR)/tmp_data",
        "spec.templates[0].dag.tasks[1].name: the task is named 'b' on Muster (task names are DNS-1123 "
        "labels), got 'B'",
        "spec.templates[2].inputs.artifacts[0].path: /in/data is under $MUSTER_INPUTS_DIR on Muster: the "
        "command names it as {{inputs.artifacts.data}}",
        "spec.templates[0].dag.tasks[2].name: the task is named 'c' on Muster (task names are DNS-1123 "
        "labels), got 'C'",
        "spec.templates[0].dag.tasks[3].name: the task is named 'd' on Muster (task names are DNS-1123 "
        "labels), got 'D'",
    ]


def test_an_output_path_the_command_does_not_name_is_warned():
    doc = argo(
        steps("main", [{"name": "s", "template": "w"}]),
        container(
            "w", "python3", "write.py", outputs={"parameters": [{"name": "p", "valueFrom": {"path": "/o/p"}}]}
        ),
    )
    assert validate(doc).warnings == [
        "spec.templates[1].outputs.parameters[0].valueFrom.path: /o/p is not named in the command, args or "
        "source: the program must use $(MUSTER_OUTPUTS_DIR)/o_p ($MUSTER_OUTPUTS_DIR is set in "
        "its environment)"
    ]


def test_a_called_steps_or_dag_template_is_inlined():
    doc = argo(
        steps(
            "main",
            [{"name": "first", "template": "leaf"}],
            [
                {
                    "name": "inner",
                    "template": "pair",
                    "when": "{{workflow.parameters.go}} == yes",
                    "arguments": {"parameters": [{"name": "word", "value": "hi"}]},
                }
            ],
            [{"name": "last", "template": "leaf"}],
        ),
        dag(
            "pair",
            {
                "name": "x",
                "template": "say",
                "arguments": {"parameters": [{"name": "w", "value": "{{inputs.parameters.word}}"}]},
            },
            {"name": "y", "template": "leaf", "dependencies": ["x"], "when": "1 == 1"},
            inputs={"parameters": [{"name": "word"}]},
        ),
        container("leaf"),
        container("say", "echo", "{{inputs.parameters.w}}", inputs={"parameters": [{"name": "w"}]}),
        arguments={"parameters": [{"name": "go", "value": "yes"}]},
    )
    tasks = tasks_of(validate(doc))
    assert list(tasks) == ["first", "inner-x", "inner-y", "last"]
    assert tasks["inner-x"]["dependencies"] == ["first"]
    assert tasks["inner-x"]["inputs"]["parameters"] == [{"name": "w", "value": "hi"}]
    assert tasks["inner-x"]["when"] == "{{workflow.parameters.go}} == yes"
    assert tasks["inner-y"]["when"] == "({{workflow.parameters.go}} == yes) && (1 == 1)"
    assert tasks["inner-y"]["dependencies"] == ["inner-x"]
    assert tasks["last"]["dependencies"] == ["inner-y"]  # after the inlined template's last task


def test_with_sequence_is_with_items_and_item_keys_pass_through():
    doc = argo(
        steps(
            "main",
            [
                {"name": "seq", "template": "leaf", "withSequence": {"start": "2", "end": "4"}},
                {"name": "cnt", "template": "leaf", "withSequence": {"count": 2}},
                {
                    "name": "maps",
                    "template": "say",
                    "withItems": [{"os": "debian"}, {"os": "ubuntu"}],
                    "arguments": {"parameters": [{"name": "w", "value": "{{item.os}}"}]},
                },
            ],
        ),
        container("leaf"),
        container("say", "echo", "{{inputs.parameters.w}}", inputs={"parameters": [{"name": "w"}]}),
    )
    tasks = tasks_of(validate(doc))
    assert tasks["seq"]["withItems"] == ["2", "3", "4"] and tasks["cnt"]["withItems"] == ["0", "1"]
    assert tasks["maps"]["inputs"]["parameters"] == [{"name": "w", "value": "{{item.os}}"}]


def test_workflow_defaults_memoize_and_retry_details():
    doc = argo(
        steps("main", [{"name": "s", "template": "t"}, {"name": "u", "template": "plain"}]),
        container(
            "t",
            memoize={"key": "k", "maxAge": "1h", "cache": {"configMap": {"name": "c"}}},
            retryStrategy={
                "limit": 1,
                "retryPolicy": "OnTransientError",
                "expression": "lastRetry.exitCode == 1",
                "backoff": {"duration": "5s", "cap": "1m"},
            },
            nodeSelector={"gpu": "a100"},
        ),
        container("plain"),
        retryStrategy={"limit": 3},
        nodeSelector={"pool": "batch"},
        tolerations=[{"key": "spot", "operator": "Exists"}],
    )
    result = validate(doc)
    tasks = tasks_of(result)
    assert tasks["s"]["cache"] == {"enabled": True, "version": "", "maxAge": "1h"}
    assert tasks["s"]["retryStrategy"] == {
        "limit": 1,
        "retryPolicy": "OnError",
        "backoff": {"duration": "5s", "factor": 2.0},
    }
    assert tasks["u"]["retryStrategy"] == {"limit": 3, "retryPolicy": "OnFailure"}  # the workflow's
    assert tasks["s"]["template"]["spec"]["nodeSelector"] == {"gpu": "a100"}  # the template's wins
    assert tasks["u"]["template"]["spec"]["nodeSelector"] == {"pool": "batch"}
    assert tasks["u"]["template"]["spec"]["tolerations"][0]["key"] == "spot"
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert sorted(kept) == [
        "spec.templates[1].memoize.cache",
        "spec.templates[1].retryStrategy.backoff.cap",
        "spec.templates[1].retryStrategy.expression",
    ]
    assert result.warnings[:2] == [
        "spec.templates[1].retryStrategy.retryPolicy: OnTransientError is honoured as OnError: "
        "Muster retries "
        "every system error",
        "spec.templates[1].memoize.key: not used: Muster keys its cache by the task's definition and inputs "
        "(docs/workflows.md, Caching)",
    ]


def test_fields_muster_cannot_honour_are_warned_by_their_path():
    doc = argo(
        steps(
            "main",
            [
                {
                    "name": "s",
                    "template": "t",
                    "continueOn": {"failed": True},
                    "hooks": {"exit": {"template": "t"}},
                }
            ],
            parallelism=1,
        ),
        dag("d", {"name": "x", "template": "t"}, failFast=False),
        container("t", serviceAccountName="sa", podSpecPatch="{}"),
        volumeClaimTemplates=[{"metadata": {"name": "work"}}],
        ttlStrategy={"secondsAfterCompletion": 10},
        activeDeadlineSeconds=600,
        arguments={
            "parameters": [{"name": "p", "value": "1", "enum": ["1", "2"]}],
            "artifacts": [{"name": "a"}],
        },
    )
    result = validate(doc)
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert sorted(kept) == [
        "spec.activeDeadlineSeconds",
        "spec.arguments.artifacts",
        "spec.arguments.parameters[0].enum",
        "spec.templates[0].parallelism",
        "spec.templates[0].steps[0][0].continueOn",
        "spec.templates[0].steps[0][0].hooks",
        "spec.templates[2].podSpecPatch",
        "spec.templates[2].serviceAccountName",
        "spec.ttlStrategy",
        "spec.volumeClaimTemplates",
    ]  # the unused dag template "d" is not run, so its failFast is not reported
    assert all("not supported by Muster; ignored" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            argo(
                steps("main", [{"name": "s", "template": "k8s"}]),
                {"name": "k8s", "resource": {"action": "create"}},
            ),
            "spec.templates[1].resource: template 'k8s' cannot run on Muster: only container, "
            "script, steps and "
            "dag templates can (resource, suspend, http, data, plugin and containerSet templates "
            "are not supported)",
        ),
        (
            argo(steps("main", [{"name": "s", "template": "wait"}]), {"name": "wait", "suspend": {}}),
            "spec.templates[1].suspend: template 'wait' cannot run on Muster: only container, "
            "script, steps and "
            "dag templates can (resource, suspend, http, data, plugin and containerSet templates "
            "are not supported)",
        ),
        (
            argo(steps("main", [{"name": "s", "template": "nope"}]), container("t")),
            "spec.templates[0].steps[0][0].template: no template named 'nope' (templates: main, t)",
        ),
        (argo(container("t"), entrypoint=""), "spec.entrypoint: required field is missing"),
        (
            {**argo(container("t")), "spec": {"workflowTemplateRef": {"name": "x"}, "entrypoint": "t"}},
            "spec.workflowTemplateRef: not supported: Muster has no WorkflowTemplate kind (copy "
            "the template's "
            "templates and entrypoint into this Workflow)",
        ),
        (
            argo(
                dag(
                    "main",
                    {"name": "a", "template": "t"},
                    {"name": "b", "template": "t", "depends": "a || c"},
                ),
                container("t"),
            ),
            "spec.templates[0].dag.tasks[1].depends: only a conjunction of tasks (a && "
            "b.Succeeded) is supported, "
            "not 'a || c', got 'a || c' (Muster runs a task once its dependencies succeeded or "
            "were skipped; use "
            "dependencies)",
        ),
        (
            argo(dag("main", {"name": "a", "template": "t", "dependencies": ["zz"]}), container("t")),
            "spec.templates[0].dag.tasks[0].dependencies: no task named 'zz' (tasks: a)",
        ),
        (
            argo(
                steps("main", [{"name": "s", "template": "t"}]),
                container("t", inputs={"parameters": [{"name": "p"}]}),
            ),
            "spec.templates[0].steps[0][0].arguments.parameters: no value for input parameter 'p' "
            "of template 't' "
            "(add it, or a default at spec.templates[1].inputs.parameters[0])",
        ),
        (
            argo(
                steps("main", [{"name": "s", "template": "t"}]),
                container("t", inputs={"artifacts": [{"name": "a", "path": "/a", "s3": {"key": "k"}}]}),
            ),
            "spec.templates[1].inputs.artifacts[0]: input artifact 'a' needs from: "
            "{{steps.<step>.outputs.artifacts.<name>}} (Muster passes artifacts between tasks "
            "only; s3, http, "
            "git and raw sources are not fetched)",
        ),
        (
            argo(
                steps("main", [{"name": "s", "template": "t"}]),
                container("t", outputs={"parameters": [{"name": "p", "valueFrom": {"jsonPath": "{.x}"}}]}),
            ),
            "spec.templates[1].outputs.parameters[0].valueFrom.path: required: Muster reads "
            "output parameters "
            "from files (write the value to a file and name it in valueFrom.path)",
        ),
        (
            argo(steps("main", [{"name": "s", "template": "main"}])),
            "spec.templates[0].steps[0][0]: template 'main' calls itself: recursion is not supported",
        ),
        (
            argo(
                steps("main", [{"name": "s", "template": "inner", "withItems": [1, 2]}]),
                steps("inner", [{"name": "x", "template": "t"}]),
                container("t"),
            ),
            "spec.templates[0].steps[0][0].withItems: a loop over a steps template is not "
            "supported: Muster fans "
            "out single tasks (loop inside that template instead (on its container steps))",
        ),
        (
            argo(
                steps(
                    "main",
                    [{"name": "s", "template": "inner"}],
                    [{"name": "u", "template": "t", "when": "{{steps.s.outputs.parameters.p}} == 1"}],
                ),
                steps("inner", [{"name": "x", "template": "t"}]),
                container("t"),
            ),
            "spec.templates[0].steps[1][0]: {{steps.s.outputs.parameters.p}}: outputs of a steps "
            "or dag template "
            "are not supported (read the output of the container step inside it)",
        ),
        (
            argo(
                steps("main", [{"name": "a", "template": "t"}, {"name": "b", "template": "t"}]),
                container("t"),
                onExit="main",
            ),
            "spec.onExit: the exit handler 'main' runs 2 tasks; Muster runs one (make it one "
            "container or script "
            "template; use {{workflow.status}} in it to branch)",
        ),
        (
            argo(
                steps("main", [{"name": "s", "template": "t", "inline": {"container": {}}}]), container("t")
            ),
            "spec.templates[0].steps[0][0].inline: not supported: name a template of this "
            "Workflow in template",
        ),
    ],
)
def test_what_cannot_run_is_an_error_naming_the_path(doc: Obj, expected: str):
    assert errors_of(doc) == [expected]


def test_native_errors_name_the_argo_paths():
    # a step reading the output of a step in its own group: not yet run
    doc = argo(
        steps(
            "main",
            [
                container_step := {"name": "a", "template": "t"},
                {
                    "name": "b",
                    "template": "say",
                    "arguments": {"parameters": [{"name": "w", "value": "{{steps.a.outputs.parameters.p}}"}]},
                },
            ],
        ),
        container(
            "t",
            "sh",
            "-c",
            "echo 1 > /p",
            outputs={"parameters": [{"name": "p", "valueFrom": {"path": "/p"}}]},
        ),
        container("say", "echo", "{{inputs.parameters.w}}", inputs={"parameters": [{"name": "w"}]}),
    )
    assert container_step["name"] == "a"
    assert errors_of(doc) == [
        "spec.templates[2].inputs.parameters[0].value: {{tasks.a.outputs.parameters.p}}: task 'a' must run "
        "first; add it to dependencies"
    ]
    unknown = argo(steps("main", [{"name": "s", "template": "t"}]), container("t", "echo", "{{pod.name}}"))
    assert errors_of(unknown) == [
        "spec.templates[1].container.command[1]: unknown reference {{pod.name}}: use "
        "tasks.<task>.outputs.parameters.<name>, inputs.parameters.<name>, workflow.parameters.<name> or item"
    ]


def test_the_entrypoint_takes_the_workflow_arguments_as_its_inputs():
    # Argo's hello-world-parameters: one container template, its input from spec.arguments.
    doc = argo(
        container(
            "whalesay", "echo", "{{inputs.parameters.message}}", inputs={"parameters": [{"name": "message"}]}
        ),
        entrypoint="whalesay",
        arguments={"parameters": [{"name": "message", "value": "hello world"}]},
    )
    [task] = validate(doc).obj["spec"]["tasks"]
    assert task["name"] == "whalesay"
    assert task["inputs"] == {"parameters": [{"name": "message", "value": "{{workflow.parameters.message}}"}]}
    inlined = argo(
        steps(
            "main",
            [
                {
                    "name": "s",
                    "template": "t",
                    "arguments": {"parameters": [{"name": "w", "value": "{{inputs.parameters.m}}"}]},
                }
            ],
            inputs={"parameters": [{"name": "m"}]},
        ),
        container("t", "echo", "{{inputs.parameters.w}}", inputs={"parameters": [{"name": "w"}]}),
        container("Exit_Handler"),
        arguments={"parameters": [{"name": "m", "value": "hi"}]},
        onExit="Exit_Handler",
    )
    spec = validate(inlined).obj["spec"]
    assert spec["tasks"][0]["inputs"]["parameters"] == [{"name": "w", "value": "{{workflow.parameters.m}}"}]
    assert spec["onExit"] == "onexit"


def test_an_exit_handler_of_one_step_is_that_step():
    doc = argo(
        steps("main", [{"name": "s", "template": "t"}]),
        steps("exit", [{"name": "notify", "template": "t", "when": "{{workflow.status}} != Succeeded"}]),
        container("t"),
        onExit="exit",
    )
    spec = validate(doc).obj["spec"]
    assert spec["onExit"] == "onexit-notify"
    assert spec["tasks"][-1]["when"] == "{{workflow.status}} != Succeeded"
    assert "dependencies" not in spec["tasks"][-1]


def test_a_template_called_twice_warns_once_and_pod_metadata_is_every_pods():
    doc = argo(
        steps("main", [{"name": "a", "template": "w"}], [{"name": "b", "template": "w"}]),
        container(
            "w",
            "sh",
            "-c",
            "echo 1 > /tmp/p",
            outputs={"parameters": [{"name": "p", "valueFrom": {"path": "/tmp/p"}}]},
        ),
        podMetadata={"labels": {"team": "vision"}},
    )
    result = validate(doc)
    assert result.warnings == [
        "spec.templates[1].outputs.parameters[0].valueFrom.path: /tmp/p is under $MUSTER_OUTPUTS_DIR on "
        "Muster: the command names it as $(MUSTER_OUTPUTS_DIR)/tmp_p"
    ]
    assert [t["template"]["metadata"] for t in result.obj["spec"]["tasks"]] == [
        {"labels": {"team": "vision"}}
    ] * 2


def test_duplicate_template_names_are_an_error():
    doc = argo(steps("main", [{"name": "a", "template": "t"}]), container("t"), container("t"))
    assert errors_of(doc) == ["spec.templates[2].name: duplicate template name, also at spec.templates[1]"]


def test_a_renamed_inlined_task_is_warned_with_the_name_written():
    doc = argo(
        steps("main", [{"name": "inner", "template": "d"}]),
        dag("d", {"name": "Train_Model", "template": "t"}),
        container("t"),
    )
    result = validate(doc)
    assert [t["name"] for t in result.obj["spec"]["tasks"]] == ["inner-train-model"]
    assert result.warnings == [
        "spec.templates[1].dag.tasks[0].name: the task is named 'inner-train-model' on Muster (task names "
        "are DNS-1123 labels), got 'Train_Model'"
    ]


@pytest.mark.parametrize(("script", "code"), [("echo out; echo err >&2", 0), ("echo partial; exit 3", 3)])
def test_a_read_result_is_the_commands_standard_output_and_keeps_its_exit_status(
    tmp_path: Path, script: str, code: int
):
    import os
    import subprocess

    doc = argo(
        steps(
            "main",
            [{"name": "a", "template": "t"}],
            [{"name": "b", "template": "u", "when": "{{steps.a.outputs.result}} == out"}],
        ),
        container("t", "sh", "-c", script),
        container("u"),
    )
    task = tasks_of(validate(doc))["a"]
    assert task["outputs"] == {"parameters": [{"name": "result", "valueFrom": {"path": "argo-result"}}]}
    argv = task["template"]["spec"]["containers"][0]["command"]
    env = {**os.environ, "MUSTER_OUTPUTS_DIR": str(tmp_path)}
    run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == code
    first = script.split(";")[0].removeprefix("echo ")
    assert run.stdout == f"{first}\n" and (tmp_path / "argo-result").read_text() == f"{first}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argo-result"]
