"""End to end: an Argo Workflow manifest, applied as written to `muster up`, runs to success
(steps, a DAG inlined into them, parameters, output parameters, stdout results, artifacts,
loops over items and over a result, conditionals, retries and an exit handler)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from muster.cli.app import app
from tests.e2e.workflows import wait_phase, workflow_cluster

pytestmark = pytest.mark.slow

MANIFEST = Path(__file__).with_name("argo-workflow.yaml")


def test_an_argo_workflow_runs_as_written(muster_home: Path):
    with workflow_cluster(muster_home, gpus=1) as (_up, client):
        applied = CliRunner().invoke(app, ["apply", "-f", str(MANIFEST)])
        assert applied.exit_code == 0, applied.output
        assert "spec.serviceAccountName: not supported by Muster" in applied.output
        [wf] = client.list("Workflow")["items"]
        assert wf["metadata"]["name"].startswith("argo-tour-")
        wf = wait_phase(client, wf["metadata"]["name"], timeout=90)
        nodes = wf["status"]["nodes"]
        phases = {name: node["phase"] for name, node in nodes.items()}
        assert phases["heads"] == "Succeeded" and phases["tails"] == "Skipped"
        assert [phases[f"sleep({i})"] for i in range(3)] == ["Succeeded"] * 3
        assert [phases[f"loop({i})"] for i in range(2)] == ["Succeeded"] * 2
        for task in (
            "hello",
            "numbers",
            "coin",
            "diamond-a",
            "diamond-b",
            "diamond-c",
            "diamond-d",
            "onexit",
        ):
            assert phases[task] == "Succeeded", (task, nodes[task])
        assert nodes["hello"]["outputs"]["parameters"]["said"] == "hello world"
        assert nodes["numbers"]["outputs"]["parameters"]["result"] == "[1, 2, 3]"
        assert nodes["sleep(2)"]["item"] == 3
        name = wf["metadata"]["name"]
        logs = CliRunner().invoke(app, ["logs", f"workflow/{name}", "--task", "onexit"])
        assert "exit Succeeded" in logs.output
        tree = CliRunner().invoke(app, ["get", "workflow", name, "-o", "tree"])
        assert tree.exit_code == 0, tree.output
        lines = [line.split() for line in tree.output.splitlines()]
        assert ["Status:", "Succeeded"] in lines and ["Progress:", wf["status"]["progress"]] in lines
        assert [" ✔ " + name, " ├───✔ hello", " ├─┬─✔ loop", " │ │ ├─✔ loop(0)"] == [
            line.split("   ")[0].rstrip() for line in tree.output.splitlines()[12:16]
        ]
        assert " │ ├─○ tails" in tree.output and f" ✔ {name}.onExit" in tree.output
        wrong = CliRunner().invoke(app, ["get", "trainingjobs", "-o", "tree"])
        assert wrong.exit_code == 2 and "-o tree goes with `get workflow NAME`" in wrong.output


def test_the_argo_example_runs_as_written_on_fake_gpus(muster_home: Path):
    """examples/argo-workflow.yaml: steps calling a dag, parameters, withItems, a GPU per run."""
    example = Path(__file__).parents[2] / "examples" / "argo-workflow.yaml"
    with workflow_cluster(muster_home, gpus=2) as (_up, client):
        applied = CliRunner().invoke(app, ["apply", "-f", str(example)])
        assert applied.exit_code == 0, applied.output
        [wf] = client.list("Workflow")["items"]
        name = wf["metadata"]["name"]
        assert name.startswith("lr-sweep-")
        nodes = wait_phase(client, name, timeout=90)["status"]["nodes"]
        assert {n: node["phase"] for n, node in nodes.items() if "(" not in n} == dict.fromkeys(
            ("prepare", "train", "evaluate-score", "evaluate-report", "evaluate-summary"), "Succeeded"
        )
        samples = nodes["prepare"]["outputs"]["parameters"]["result"]
        runs = [
            CliRunner().invoke(app, ["logs", f"workflow/{name}", "--task", f"train({i})"]).output
            for i in range(3)
        ]
        for lr, out in zip(("0.3", "0.1", "0.03"), runs, strict=True):
            assert f"lr={lr} samples={samples} gpu=" in out, out
            assert "gpu=None" not in out  # each run was given a GPU
        assert "loss=0.1681" in runs[0]  # 0.7 ** 5
        score = nodes["evaluate-score"]["outputs"]["parameters"]["result"]
        assert float(score) == int(samples) / 1000
        report = CliRunner().invoke(app, ["logs", f"workflow/{name}", "--task", "evaluate-report"])
        assert f"accuracy {score}" in report.output
