"""End to end on ``muster up --fake-gpus``: an elastic TrainingJob admitted small grows back to
maxReplicas when capacity returns, through the checkpoint handshake (SIGTERM, checkpoint,
restart at the new world size, resume) of docs/trainingjob.md, "Elastic jobs".

The trainer is plain Python (no torch, so it starts in a blink): every rank counts steps; on
SIGTERM rank 0 saves the step (written aside, then renamed) and every rank exits 143; on start
it resumes from the saved step. Rank 0 logs to ``TRAIN_LOG`` (outside the checkpoint
directory, so the newest file there is the checkpoint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from muster.testing import wait_for
from tests.e2e.jobs import PYTHON, cluster, held_job, job_doc, wait_condition

pytestmark = pytest.mark.slow

TRAINER = """
import json, os, signal, sys, time
from pathlib import Path
ck, rank = Path(os.environ["MUSTER_CHECKPOINT_DIR"]), int(os.environ["RANK"])
log, release = Path(os.environ["TRAIN_LOG"]), Path(os.environ["TRAIN_RELEASE_FILE"])
steps, hold = int(os.environ["TRAIN_STEPS"]), int(os.environ["TRAIN_HOLD_AT"])
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
saved = ck / "step.json"
step = json.loads(saved.read_text())["step"] if saved.exists() else 0
def note(**e):
    if rank == 0:
        with open(log, "a") as f:
            f.write(json.dumps(e) + "\\n")
note(event="start", world=os.environ["WORLD_SIZE"], nnodes=os.environ["PET_NNODES"], step=step)
while step < steps:
    if stop:
        if rank == 0:
            aside = ck / "step.tmp"
            aside.write_text(json.dumps({"step": step}))
            aside.replace(saved)
            note(event="checkpoint", step=step)
        sys.exit(143)
    if step >= hold and not release.exists():
        time.sleep(0.02)
        continue
    step += 1
note(event="done", step=step)
"""


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
                    [PYTHON, "-c", TRAINER],
                    workers=4,
                    env={**env, "TRAIN_HOLD_AT": "2"},
                    run_policy={"backoffLimit": 0},  # a resize is no failure
                    elasticPolicy={"minReplicas": 1, "maxReplicas": 4, "growCooldownSeconds": 0},
                )
            ]
        )
        wait_condition(client, "TrainingJob", "train", "Running", timeout=30)
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
