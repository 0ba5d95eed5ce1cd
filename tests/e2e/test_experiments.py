"""Experiments on ``muster up --fake-gpus N`` with real processes: the examples as written
(a small PyTorch model; Katib's format), an ASHA trial paused and promoted that resumes from
its checkpoint, and a server killed mid-search that resumes it with no trial lost or repeated."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp, run_cli
from tests.e2e.jobs import PYTHON, REPO, cluster, run_examples_as_written

pytestmark = pytest.mark.slow

TRAINER = str(Path(__file__).with_name("experiment_trainer.py"))
Obj = dict[str, Any]


def finished(client: Client, name: str, timeout: float) -> Obj:
    def done() -> Obj | None:
        exp = client.get("Experiment", name, "default")
        conds = (exp.get("status") or {}).get("conditions") or []
        return (
            exp
            if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)
            else None
        )

    return wait_for(done, timeout=timeout, what=f"experiment {name} to finish")


def trials(client: Client, experiment: str) -> list[Obj]:
    items = client.list("Trial", "default", f"muster.dev/experiment={experiment}")["items"]
    return sorted(items, key=lambda t: t["spec"]["index"])


def series(client: Client, trial: str) -> list[int]:
    segs = client.list("TrialMetrics", "default", f"muster.dev/trial={trial}")["items"]
    return [
        s
        for seg in sorted(segs, key=lambda x: x["spec"]["segment"])
        for s in seg["spec"]["series"]["loss"]["steps"]
    ]


def trainer_experiment(name: str, algorithm: Obj, parallel: int, max_trials: int, args: list[str]) -> Obj:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Experiment",
        "metadata": {"name": name},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": algorithm,
            "parallelTrialCount": parallel,
            "maxTrialCount": max_trials,
            "parameters": [
                {"name": "quality", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.9"}}
            ],
            "trialTemplate": {
                "template": {
                    "spec": {
                        "terminationGracePeriodSeconds": 5,
                        "containers": [
                            {
                                "name": "main",
                                "command": [PYTHON, TRAINER, *args],
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ],
                    }
                }
            },
        },
    }


def test_a_paused_trial_is_promoted_and_resumes_from_its_checkpoint(muster_home: Path):
    asha = {
        "algorithmName": "asha",
        "algorithmSettings": [{"name": "max_resource", "value": "9"}, {"name": "random_state", "value": "1"}],
    }
    doc = trainer_experiment("promote", asha, 1, 3, ["--by-index", "--steps", "9", "--step-time", "0.3"])
    with cluster(muster_home, gpus=1) as (_up, client):
        client.apply([doc])
        exp = finished(client, "promote", timeout=300)
        assert exp["status"]["conditions"][-1]["reason"] == "MaxTrialsReached", exp["status"]
        t0, t1, t2 = trials(client, "promote")
        rungs = t0["status"]["rungs"]
        assert [(r["rung"], r["step"], r["decision"]) for r in rungs] == [
            (0, 1, "Promoted"),
            (1, 3, "Paused"),
        ]
        assert rungs[0]["checkpoint"] == "state.json"
        assert [t["status"]["phase"] for t in (t1, t2)] == ["EarlyStopped", "EarlyStopped"]
        # The resumed run started after its checkpoint: no step was reported twice or lost (it
        # may have reported one more before the stop at rung 1 reached it).
        steps = series(client, "promote-0")
        assert steps == list(range(1, len(steps) + 1)) and 3 <= len(steps) <= 5, steps
        log = run_cli(muster_home, "logs", "promote-0-worker-0").stdout
        resumed = re.search(r"resumed at step (\d+)\n(?:step (\d+):)?", log)
        assert resumed, log
        if resumed.group(2) is not None:
            assert int(resumed.group(2)) == int(resumed.group(1)) + 1, log
        else:
            # On a busy machine the first run may go past rung 1's step before its stop reaches
            # it: the promoted run is then judged at rung 1 on the stored reports and paused at
            # once, before it reports again.
            assert int(resumed.group(1)) >= rungs[1]["step"] and steps[-1] == int(resumed.group(1)), log
        assert exp["status"]["currentOptimalTrial"]["bestTrialName"] == "promote-0"
        # The GPU went back each time: one GPU served three trials and a promotion.
        assert t0["status"]["gpuSeconds"] > 0


def test_a_killed_server_resumes_the_search_with_no_trial_lost_or_repeated(muster_home: Path):
    doc = trainer_experiment(
        "crash",
        {"algorithmName": "random"},
        2,
        4,
        ["--quality", "${trialParameters.quality}", "--steps", "8", "--step-time", "0.4"],
    )
    up = MusterUp(muster_home, extra_args=["--fake-gpus", "2"]).start()
    with Client(up.url, up.token) as client:
        client.apply([doc])
        wait_for(lambda: len(series(client, "crash-0")) >= 2, timeout=120, what="crash-0 to report twice")
    assert up.proc is not None
    os.kill(up.proc.pid, signal.SIGKILL)  # no shutdown: the trials' processes run on
    up.proc.wait(timeout=30)
    up.proc = None
    with cluster(muster_home, gpus=2) as (_up, client):
        exp = finished(client, "crash", timeout=300)
        assert exp["status"]["trialsSucceeded"] == 4, exp["status"]
        names = [t["metadata"]["name"] for t in trials(client, "crash")]
        assert names == ["crash-0", "crash-1", "crash-2", "crash-3"]
        for name in names:
            assert series(client, name) == list(range(1, 9)), name
        jobs = client.list("TrainingJob", "default", "muster.dev/experiment=crash")["items"]
        assert sorted(j["metadata"]["name"] for j in jobs) == names


@pytest.fixture
def _torch(monkeypatch: pytest.MonkeyPatch) -> None:
    run_examples_as_written(monkeypatch)


@pytest.mark.usefixtures("_torch")
def test_the_asha_example_runs_as_written(muster_home: Path):
    doc = yaml.safe_load((REPO / "examples" / "experiment.yaml").read_text())
    with cluster(muster_home, gpus=2) as (_up, client):
        client.apply([doc])
        exp = finished(client, "mlp-asha", timeout=900)
        status = exp["status"]
        assert exp["status"]["conditions"][-1]["type"] == "Succeeded", status
        assert status["trials"] == 6 and status["trialsFailed"] == 0
        assert status["trialsEarlyStopped"] >= 1  # ASHA paused some at a rung
        best = status["currentOptimalTrial"]
        assert best["objectiveValue"] < 1.0
        listing = run_cli(muster_home, "get", "experiments").stdout
        assert best["bestTrialName"] in listing and "lr=" in listing, listing
        why = run_cli(muster_home, "why", "experiment/mlp-asha").stdout
        assert "experiment/mlp-asha succeeded (MaxTrialsReached): 6 of 6 trials" in why, why
        assert "paused at an ASHA rung" in why, why


@pytest.mark.usefixtures("_torch")
def test_the_katib_example_runs_as_written(muster_home: Path):
    doc = yaml.safe_load((REPO / "examples" / "katib-experiment.yaml").read_text())
    with cluster(muster_home, gpus=2) as (_up, client):
        result = client.apply([doc])
        assert result[0]["kind"] == "Experiment"
        assert any("medianstop" in w for w in result[0]["warnings"])
        exp = finished(client, "mlp-random", timeout=900)
        status = exp["status"]
        assert exp["status"]["conditions"][-1]["type"] == "Succeeded", status
        assert status["trials"] == 4 and status["trialsSucceeded"] + status["trialsEarlyStopped"] == 4
        job = client.get("TrainingJob", "mlp-random-0", "default")
        command = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
        lr = trials(client, "mlp-random")[0]["spec"]["parameterAssignments"][0]["value"]
        assert f"--lr={lr}" in command
