"""End to end on ``muster up --fake-gpus``: an elastic TrainingJob admitted small grows back to
maxReplicas when capacity returns, through the checkpoint handshake (SIGTERM, checkpoint,
restart at the new world size, resume) of docs/trainingjob.md, "Elastic jobs".

The trainer is :mod:`muster.testing.checkpoint_trainer` (plain Python, no torch, so it starts
in a blink)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from muster.testing import wait_for
from tests.e2e.jobs import PYTHON, cluster, held_job, job_doc, wait_condition

pytestmark = pytest.mark.slow

TRAINER = [PYTHON, "-m", "muster.testing.checkpoint_trainer"]


def test_elastic_job_grows_back_from_its_checkpoint_when_capacity_returns(muster_home: Path, tmp_path: Path):
    log, release, blocker_done = tmp_path / "train.jsonl", tmp_path / "release", tmp_path / "blocker-done"
    with cluster(muster_home, gpus=4) as (_up, client):
        client.apply([held_job("blocker", blocker_done, gpus=2)])
        wait_condition(client, "TrainingJob", "blocker", "Running", timeout=30)
        env = {"TRAIN_LOG": str(log), "TRAIN_RELEASE_FILE": str(release), "TRAIN_STEPS": "5"}
        client.apply(
            [
                job_doc(
                    "train",
                    TRAINER,
                    workers=4,
                    env={**env, "TRAIN_HOLD_AT": "2"},
                    run_policy={"backoffLimit": 0},  # a resize is no failure
                    elasticPolicy={"minReplicas": 1, "maxReplicas": 4, "growCooldownSeconds": 0},
                )
            ]
        )
        wait_condition(client, "TrainingJob", "train", "Running", timeout=30)
        # Running means the processes started, not that the trainer's SIGTERM handler is in
        # place: a resize that came before it would end rank 0 without its checkpoint (seen in
        # CI under load). Rank 0 notes its start once the handler is set.
        wait_for(lambda: log.exists() and '"start"' in log.read_text(), timeout=30, what="rank 0 to start")
        wl = client.get("Workload", "train", "default")
        assert [a["count"] for a in wl["status"]["admission"]["podSetAssignments"]] == [2]
        blocker_done.touch()  # capacity returns: the job grows to 4 workers
        wait_for(
            lambda: (_resizes(client) or [{}])[-1].get("started"),
            timeout=30,
            what="the job to restart at its new size",
        )
        release.touch()
        done = wait_condition(client, "TrainingJob", "train", "Succeeded", timeout=30)
        assert done["status"].get("restartCount", 0) == 0
        (resize,) = done["status"]["resizes"]
        assert (resize["from"], resize["to"], resize["reason"]) == (2, 4, "CapacityReturned")
        assert resize["checkpoint"] == "step.json"
        events = [json.loads(line) for line in log.read_text().splitlines()]
        starts = [(e["world"], e["nnodes"], e["step"]) for e in events if e["event"] == "start"]
        assert starts == [("2", "2", 0), ("4", "4", 2)]  # resumed where it stopped, at the new size
        assert [e["step"] for e in events if e["event"] == "checkpoint"] == [2]
        assert [e["step"] for e in events if e["event"] == "done"] == [5]


def _resizes(client) -> list[dict]:
    return client.get("TrainingJob", "train", "default")["status"].get("resizes") or []
