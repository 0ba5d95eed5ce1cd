"""examples/pipeline.yaml and examples/pipeline.py on `muster up --fake-gpus 2`: prepare ->
two-replica DDP training (torch, gloo) -> evaluate. The YAML and the SDK pipelines compute the
same numbers, and a second run of the YAML is entirely cached: no pod starts."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from muster.sdk.client import Client
from tests.e2e.jobs import run_examples_as_written
from tests.e2e.workflows import REPO, wait_phase, workflow_cluster

pytestmark = pytest.mark.slow

EXAMPLES = REPO / "examples"


@pytest.fixture(autouse=True)
def _torch(monkeypatch: pytest.MonkeyPatch) -> None:
    run_examples_as_written(monkeypatch)


def test_yaml_and_sdk_pipelines_agree_and_a_rerun_is_cached(muster_home: Path):
    doc = yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text())
    with workflow_cluster(muster_home, gpus=2) as (_up, client):
        client.apply([doc])
        wf = wait_phase(client, "pipeline", timeout=300)
        nodes = wf["status"]["nodes"]
        assert [nodes[t]["phase"] for t in ("prepare", "train", "evaluate")] == ["Succeeded"] * 3
        yaml_loss = float(nodes["evaluate"]["outputs"]["parameters"]["loss"])
        train_loss = float(nodes["train"]["outputs"]["parameters"]["loss"])
        assert 0 < yaml_loss < 0.1 and 0 < train_loss < 0.1  # it learned the linear map
        job = client.get("TrainingJob", _job_of(client, "pipeline"), "default")
        assert sorted(job["status"]["replicaStatuses"]) == ["Master", "Worker"]

        sdk = subprocess.run(
            [sys.executable, str(EXAMPLES / "pipeline.py"), "--name", "sdk"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "MUSTER_HOME": str(muster_home)},
        )
        assert sdk.returncode == 0, sdk.stdout + sdk.stderr
        assert f"test loss {yaml_loss}" in sdk.stdout
        sdk_nodes = client.get("Workflow", "sdk", "default")["status"]["nodes"]
        # the same data (equal bytes: one stored artifact) and the same training result
        assert (
            sdk_nodes["prepare"]["outputs"]["artifacts"]["return"]
            == nodes["prepare"]["outputs"]["artifacts"]["dataset"]
        )
        assert float(sdk_nodes["evaluate"]["outputs"]["parameters"]["return"]) == yaml_loss

        pods = len(client.list("Pod")["items"])
        again = copy.deepcopy(doc)
        again["metadata"]["name"] = "pipeline-again"
        client.apply([again])
        rerun = wait_phase(client, "pipeline-again")["status"]["nodes"]
        assert {t: n["phase"] for t, n in rerun.items()} == dict.fromkeys(
            ("prepare", "train", "evaluate"), "Cached"
        )
        assert rerun["evaluate"]["outputs"] == nodes["evaluate"]["outputs"]
        assert len(client.list("Pod")["items"]) == pods  # nothing ran


def _job_of(client: Client, workflow: str) -> str:
    jobs = client.list("TrainingJob", "default", f"muster.dev/workflow={workflow}")["items"]
    assert len(jobs) == 1
    return str(jobs[0]["metadata"]["name"])
