"""End to end on ``muster up``: a NodePool of fake-GPU nodes grows for a job that fits
nowhere, ``muster why`` names the node coming up, a spot notice (``muster node interrupt``)
makes the job checkpoint and resume on a replacement node, ``muster cost`` tells what it cost,
and the idle node goes after its TTL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from muster.testing import wait_for
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster, pod_log, python_job, wait_condition

pytestmark = pytest.mark.slow

POOL = {
    "apiVersion": "muster.dev/v1",
    "kind": "NodePool",
    "metadata": {"name": "spot"},
    "spec": {
        "provider": "local",
        "template": {"gpus": 2, "gpuModel": "A100", "gpuMemory": "80Gi", "cpu": "8", "memory": "32Gi"},
        "capacityType": "spot",
        "pricePerHour": 3.6,
        "maxNodes": 2,
        "provisioningDelaySeconds": 12,
        "consolidation": {"ttlSecondsAfterEmpty": 3},
    },
}

# Works in steps of 0.2 s until the file FINISH exists, resuming from its checkpoint;
# checkpoints on SIGTERM.
TRAINER = """
import os, signal, sys, time
ckpt = os.path.join(os.environ["MUSTER_CHECKPOINT_DIR"], "step")
step = int(open(ckpt).read()) if os.path.exists(ckpt) else 0
print("gpus", os.environ["CUDA_VISIBLE_DEVICES"], "from step", step, flush=True)
def save(*_):
    with open(ckpt + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(ckpt + ".tmp", ckpt)
    print("checkpointed at", step, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
while not os.path.exists(os.environ["FINISH"]):
    time.sleep(0.2)
    step += 1
print("done", flush=True)
"""


def test_a_pool_grows_for_a_job_survives_a_spot_notice_and_shrinks(muster_home: Path, tmp_path: Path):
    finish = tmp_path / "finish"
    job = python_job(
        "train", TRAINER, workers=1, gpus=2, run_policy={"backoffLimit": 0}, env={"FINISH": str(finish)}
    )
    template = job["spec"]["replicaSpecs"]["Worker"]["template"]
    template["spec"]["tolerations"] = [{"key": "muster.dev/capacity-type", "operator": "Exists"}]
    template.setdefault("metadata", {})["annotations"] = {"muster.dev/checkpointable": "true"}
    manifests = tmp_path / "pool.yaml"
    manifests.write_text(yaml.safe_dump_all([POOL, job]))
    with cluster(muster_home, gpus=1) as (_up, client):
        applied = run_cli(muster_home, "apply", "-f", str(manifests))
        assert applied.returncode == 0, applied.stderr
        # the node takes 12 s to come up: meanwhile why names it
        why = wait_for(
            lambda: (
                (ex := client.view("why/TrainingJob/default/train"))
                and "waiting for node spot-" in ex["summary"]
                and ex
            ),
            30,
            what="why to name the node coming up",
        )
        assert "of pool spot (ETA" in why["summary"] and why["capacity"]["nodes"][0]["pool"] == "spot"
        wait_condition(client, "TrainingJob", "train", "Running", timeout=60)
        first = client.get("Pod", "train-worker-0", "default")["spec"]["nodeName"]
        assert first.startswith("spot-")
        wait_for(
            lambda: "from step 0" in pod_log(muster_home, "train-worker-0"), 30, what="the trainer to start"
        )
        got = run_cli(muster_home, "get", "nodeclaims")
        assert first in got.stdout and "Ready" in got.stdout, got.stdout

        notice = run_cli(muster_home, "node", "interrupt", first, "--in", "20")
        assert notice.returncode == 0, notice.stderr
        assert f"node/{first} (pool spot" in notice.stdout

        def resumed() -> dict | None:
            job = client.get("TrainingJob", "train", "default")
            records = (job.get("status") or {}).get("preemptions") or []
            return records[-1] if records and records[-1].get("resumedAt") else None

        record = wait_for(resumed, 90, what="the job to resume after the notice")
        assert record["reason"] == "SpotInterrupted" and record["checkpointFound"] is True
        second = client.get("Pod", "train-worker-0", "default")["spec"]["nodeName"]
        assert second != first and second.startswith("spot-")
        wait_for(
            lambda: "gpus 0,1 from step" in pod_log(muster_home, "train-worker-0"), 30, what="the resume"
        )
        finish.touch()
        wait_condition(client, "TrainingJob", "train", "Succeeded", timeout=90)
        assert "from step 0" not in pod_log(muster_home, "train-worker-0"), "resumed from its checkpoint"

        cost = run_cli(muster_home, "cost", "--since", "1h", "-o", "json")
        assert cost.returncode == 0, cost.stderr
        report = json.loads(cost.stdout)
        row = next(r for r in report["rows"] if r["key"] == "default")
        assert row["gpuHours"] > 0 and row["cost"] > 0 and row["jobs"] == 1
        assert any(p["pool"] == "spot" and p["cost"] > 0 for p in report["pools"])
        assert run_cli(muster_home, "cost", "--by", "label:team", "-o", "csv").stdout.startswith(
            "section,key"
        )

        def shrunk() -> bool:
            claims = client.list("NodeClaim")["items"]
            return bool(claims) and all(c["status"]["phase"] == "Terminated" for c in claims)

        wait_for(shrunk, 60, what="the idle nodes to go")
        # The Node objects go at the runtime's next look at its nodes, after their claims.
        wait_for(
            lambda: (
                not [n for n in client.list("Node")["items"] if n["metadata"]["name"].startswith("spot-")]
            ),
            30,
            what="the given-back nodes to leave the cluster",
        )
