"""End to end with PyTorch DDP (gloo on CPU, fake GPUs): the environment contract and the
preemption handshake (SIGTERM, checkpoint, requeue, resume at the step reached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.testing import wait_for
from tests.e2e.jobs import (
    DDP_SCRIPT,
    PYTHON,
    cluster,
    condition,
    held_job,
    job_doc,
    priority_class,
    progress,
    wait_condition,
)

pytest.importorskip("torch", reason="the DDP tests need the torch extra (pip install -e '.[torch]')")

pytestmark = pytest.mark.slow


def test_two_replica_ddp_job_trains_and_each_replica_sees_its_rank(muster_home: Path):
    with cluster(muster_home, gpus=4) as (up, client):
        doc = job_doc("ddp", [PYTHON, DDP_SCRIPT], workers=1, master=True, env={"TRAIN_STEPS": "5"})
        client.apply([doc])
        job = wait_condition(client, "TrainingJob", "ddp", "Succeeded", timeout=120)
        assert job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
        seen = {e["rank"]: e for e in progress(up.home, "ddp") if e["event"] == "env"}
        wl = client.get("Workload", "ddp", "default")
        port = wl["metadata"]["annotations"]["muster.dev/master-port"]
        placed = {a["name"]: a["pods"][0]["gpus"] for a in wl["status"]["admission"]["podSetAssignments"]}
        ckpt = str(up.home / "checkpoints" / "default" / "ddp")
        for rank, pod_set in ((0, "master"), (1, "worker")):
            env = seen[rank]
            assert (env["RANK"], env["WORLD_SIZE"], env["PET_NNODES"], env["PET_NODE_RANK"]) == (
                str(rank),
                "2",
                "2",
                str(rank),
            )
            assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", port)
            assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g) for g in placed[pod_set])
            assert env["MUSTER_CHECKPOINT_DIR"] == ckpt and env["MUSTER_RESTART_COUNT"] == "0"
            assert env["PYTHONUNBUFFERED"] == "1"
        assert seen[0]["CUDA_VISIBLE_DEVICES"] != seen[1]["CUDA_VISIBLE_DEVICES"]
        assert [e["step"] for e in progress(up.home, "ddp") if e["event"] == "done"] == [5]


def test_preempted_job_checkpoints_requeues_and_resumes_where_it_stopped(muster_home: Path, tmp_path: Path):
    release = tmp_path / "release"
    urgent_done = tmp_path / "urgent-done"
    with cluster(muster_home, gpus=2) as (up, client):
        low = job_doc(
            "low",
            [PYTHON, DDP_SCRIPT],
            workers=2,
            env={"TRAIN_STEPS": "6", "TRAIN_HOLD_AT": "3", "TRAIN_RELEASE_FILE": str(release)},
            run_policy={"backoffLimit": 0},  # a preemption must not count as a failure
        )
        client.apply([priority_class("urgent", 100), low])
        wait_condition(client, "TrainingJob", "low", "Running", timeout=120)
        # Every rank now holds at step 3 (until the release file exists).
        _wait_step(up.home, 3)
        urgent = held_job(
            "urgent",
            urgent_done,
            gpus=2,
            priorityClassName="urgent",
        )
        client.apply([urgent])
        # Preempted, then requeued behind the preemptor: it waits for quota again.
        preempted = wait_condition(
            client, "TrainingJob", "low", "Queued", reason="QuotaExhausted", timeout=60
        )
        record = preempted["status"]["preemptions"][0]
        assert record["preemptor"] == "default/urgent" and record["reason"] == "InClusterQueue"
        checkpoints = [e["step"] for e in progress(up.home, "low") if e["event"] == "checkpoint"]
        assert checkpoints == [3]
        wait_condition(client, "TrainingJob", "urgent", "Running", timeout=60)
        release.touch()  # from now on nothing holds the victim back
        urgent_done.touch()
        wait_condition(client, "TrainingJob", "urgent", "Succeeded", timeout=60)
        done = wait_condition(client, "TrainingJob", "low", "Succeeded", timeout=120)
        assert done["status"].get("restartCount", 0) == 0
        events = progress(up.home, "low")
        assert [e["step"] for e in events if e["event"] == "resume"] == [3]
        assert [e["step"] for e in events if e["event"] == "done"] == [6]
        # Stepping resumed after the checkpoint: steps 4..6 ran once, after the resume.
        steps = [e["step"] for e in events if e["event"] == "step"]
        assert steps == [1, 2, 3, 4, 5, 6]
        dirs = {e["MUSTER_CHECKPOINT_DIR"] for e in events if e["event"] == "env"}
        assert dirs == {str(up.home / "checkpoints" / "default" / "low")}
        assert condition(done, "Preempted")["status"] == "False"


def _wait_step(home: Path, step: int) -> None:
    wait_for(
        lambda: any(e["event"] == "step" and e["step"] >= step for e in progress(home, "low")),
        timeout=120,
        what=f"the victim to reach step {step}",
    )
