"""End to end: `muster up --fake-gpus N` runs TrainingJobs as real processes.

Replicas are plain Python here; the DDP cases (torch) are in test_ddp.py. Jobs that must stay
up until the test has seen something wait for a file the test creates, never for time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml

from muster.testing import wait_for
from muster.testing.cluster import cluster_queue
from muster.testing.factories import local_queue
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster, condition, job_doc, pod_log, python_job, serve, wait_condition

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def wait_file(path: Path) -> str:
    """A replica script that waits until ``path`` exists, then exits 0."""
    return f"import os, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)\n"


def test_gang_larger_than_free_gpus_starts_nothing_and_says_why(muster_home: Path, tmp_path: Path):
    with cluster(muster_home, gpus=4) as (_up, client):
        # A queue with more quota than the machine has GPUs: quota fits, the gang does not.
        client.apply(
            [
                cluster_queue("roomy", {"default": {"cpu": "64", "memory": "1Ti", "nvidia.com/gpu": "32"}}),
                local_queue("roomy", "roomy"),
                python_job("huge", "print('never')", workers=3, gpus=2, queueName="roomy"),
            ]
        )
        job = wait_condition(client, "TrainingJob", "huge", "Queued", reason="InsufficientResources")
        message = condition(job, "Queued")["message"]
        assert "GPU" in message
        wl = client.get("Workload", "huge", "default")
        assert wl["status"]["pending"]["reason"] == "InsufficientResources"
        assert wl["status"]["pending"]["message"] == message
        assert client.list("Pod")["items"] == []


def test_on_failure_restarts_the_whole_gang_then_backoff_limit_fails_the_job(muster_home: Path):
    # Rank 1 fails once rank 0 of the same run has started (a marker file), every run.
    script = (
        "import os, sys, time\n"
        "run, ck = os.environ['MUSTER_RESTART_COUNT'], os.environ['MUSTER_CHECKPOINT_DIR']\n"
        "marker = os.path.join(ck, 'rank0-run' + run)\n"
        "print('run', run, flush=True)\n"
        "if os.environ['RANK'] == '1':\n"
        "    while not os.path.exists(marker): time.sleep(0.05)\n"
        "    sys.exit(3)\n"
        "open(marker, 'w').close()\n"
        "time.sleep(600)\n"
    )
    with cluster(muster_home) as (up, client):
        client.apply([python_job("flaky", script, workers=2, run_policy={"backoffLimit": 1})])
        job = wait_condition(client, "TrainingJob", "flaky", "Failed", reason="BackoffLimitExceeded")
        message = condition(job, "Failed")["message"]
        assert "pod flaky-worker-1 failed: Error (exit code 3)" in message
        assert "restarted 1 time(s) and backoffLimit is 1" in message
        assert job["status"]["restartCount"] == 1
        # Both replicas ran twice: the healthy one was stopped and restarted with the gang.
        for pod in ("flaky-worker-0", "flaky-worker-1"):
            assert pod_log(up.home, pod).splitlines()[0] == "run 1"
            assert (up.home / "logs" / "default" / pod / "main.log.1").read_text().splitlines()[0] == "run 0"
        wait_for(
            lambda: not [p for p in client.list("Pod")["items"] if p["status"]["phase"] == "Running"],
            timeout=30,
        )
        wl = client.get("Workload", "flaky", "default")
        assert condition(wl, "Finished")["reason"] == "Failed"


def test_exit_code_policy_permanent_and_retryable(muster_home: Path):
    permanent = "import sys; sys.exit(2)"
    # Killed by a signal on its first run (137 = 128 + SIGKILL), fine on the next.
    retryable = (
        "import os, signal\n"
        "if os.environ['MUSTER_RESTART_COUNT'] == '0': os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    with cluster(muster_home) as (_up, client):
        client.apply(
            [
                python_job("perm", permanent, restart_policy="ExitCode", run_policy={"backoffLimit": 3}),
                python_job("retry", retryable, restart_policy="ExitCode", run_policy={"backoffLimit": 3}),
                # A program that does not exist fails for good, whatever the policy.
                job_doc("missing", ["/no/such/trainer"], run_policy={"backoffLimit": 3}),
            ]
        )
        missing = wait_condition(client, "TrainingJob", "missing", "Failed", reason="ReplicaFailed")
        assert "(exit code 127)" in condition(missing, "Failed")["message"]
        assert "it could not start" in condition(missing, "Failed")["message"]
        assert missing["status"].get("restartCount", 0) == 0
        failed = wait_condition(client, "TrainingJob", "perm", "Failed", reason="ReplicaFailed")
        assert "(exit code 2)" in condition(failed, "Failed")["message"]
        assert "exit codes 1-127 are permanent" in condition(failed, "Failed")["message"]
        assert failed["status"].get("restartCount", 0) == 0
        done = wait_condition(client, "TrainingJob", "retry", "Succeeded")
        assert done["status"]["restartCount"] == 1


def test_oom_is_classified(muster_home: Path):
    hog = "import time\nblob = b'x' * (400 * 1024 * 1024)\ntime.sleep(60)\n"
    with cluster(muster_home) as (_up, client):
        client.apply([python_job("hog", hog, gpus=0, memory="100Mi", restart_policy="Never")])
        job = wait_condition(client, "TrainingJob", "hog", "Failed", timeout=60)
        message = condition(job, "Failed")["message"]
        assert "pod hog-worker-0 failed: OOMKilled (exit code 137)" in message
        pod = client.get("Pod", "hog-worker-0", "default")
        assert pod["status"]["reason"] == "OOMKilled"


def test_active_deadline_fails_the_job(muster_home: Path):
    with cluster(muster_home) as (_up, client):
        client.apply(
            [python_job("slow", "import time; time.sleep(600)", run_policy={"activeDeadlineSeconds": 2})]
        )
        wait_condition(client, "TrainingJob", "slow", "Running")
        job = wait_condition(client, "TrainingJob", "slow", "Failed", reason="DeadlineExceeded", timeout=30)
        assert "activeDeadlineSeconds (2s)" in condition(job, "Failed")["message"]
        # Its pod was stopped (SIGTERM) and removed.
        wait_for(lambda: client.list("Pod")["items"] == [], timeout=30, what="the pod to go")


def test_job_over_team_quota_waits_and_starts_when_another_finishes(muster_home: Path, tmp_path: Path):
    release = tmp_path / "release"
    team = cluster_queue("team-a", {"default": {"cpu": "2", "nvidia.com/gpu": "2"}})
    lq = local_queue("team-a", "team-a", namespace="team-a")
    with cluster(muster_home, gpus=8) as (_up, client):
        first = python_job("first", wait_file(release), gpus=2, namespace="team-a", queueName="team-a")
        second = python_job("second", "print('second ran')", gpus=2, namespace="team-a", queueName="team-a")
        client.apply([team, lq, first])
        wait_condition(client, "TrainingJob", "first", "Running", namespace="team-a")
        client.apply([second])
        waiting = wait_condition(
            client, "TrainingJob", "second", "Queued", reason="QuotaExhausted", namespace="team-a"
        )
        assert "team-a" in condition(waiting, "Queued")["message"]
        assert [p["metadata"]["name"] for p in client.list("Pod", "team-a")["items"]] == ["first-worker-0"]
        release.touch()
        wait_condition(client, "TrainingJob", "first", "Succeeded", namespace="team-a")
        wait_condition(client, "TrainingJob", "second", "Succeeded", namespace="team-a")


def test_sigkill_of_the_server_loses_nothing(muster_home: Path, tmp_path: Path):
    done_while_down, done_after = tmp_path / "a", tmp_path / "b"
    script = (
        "import os, time\n"
        f"flag = {str(done_while_down)!r} if os.environ['RANK'] == '0' else {str(done_after)!r}\n"
        "while not os.path.exists(flag): time.sleep(0.05)\n"
        "print('rank', os.environ['RANK'], 'done', flush=True)\n"
    )
    with cluster(muster_home) as (up, client):
        client.apply([python_job("survivor", script, workers=2)])
        wait_condition(client, "TrainingJob", "survivor", "Running")
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in client.list("Pod")["items"]}
        assert up.proc is not None
        os.kill(up.proc.pid, signal.SIGKILL)
        up.proc.wait(timeout=10)
        up.proc = None
        # While no server runs, one replica ends; the other runs on.
        done_while_down.touch()
        wait_for(
            lambda: "done" in (up.home / "logs/default/survivor-worker-0/main.log").read_text(), timeout=30
        )
        with cluster(muster_home, port=up.port) as (_again, client2):
            pods = {p["metadata"]["name"]: p for p in client2.list("Pod")["items"]}
            assert {n: p["metadata"]["uid"] for n, p in pods.items()} == before  # re-adopted, not re-created
            wait_for(
                lambda: client2.get("Pod", "survivor-worker-0", "default")["status"]["phase"] == "Succeeded",
                timeout=30,
                what="the replica that ended while the server was down to be recorded",
            )
            assert client2.get("Pod", "survivor-worker-0", "default")["status"]["reason"] == "Completed"
            assert client2.get("Pod", "survivor-worker-1", "default")["status"]["phase"] == "Running"
            done_after.touch()
            job = wait_condition(client2, "TrainingJob", "survivor", "Succeeded")
            assert job["status"].get("restartCount", 0) == 0
            for name in before:
                assert (up.home / "logs" / "default" / name / "main.log.1").exists() is False  # started once


def test_kubeflow_pytorchjob_applies_unchanged_and_runs(muster_home: Path):
    docs = list(yaml.safe_load_all((EXAMPLES / "kubeflow-pytorchjob.yaml").read_text()))
    with cluster(muster_home) as (up, client):
        client.apply(docs)
        wait_condition(client, "TrainingJob", "pytorch-ddp-hello", "Succeeded")
        master = pod_log(up.home, "pytorch-ddp-hello-master-0", container="pytorch")
        port = client.get("Workload", "pytorch-ddp-hello", "default")["metadata"]["annotations"][
            "muster.dev/master-port"
        ]
        assert (
            master.strip()
            == f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE=3 RANK=0 PET_NNODES=3 PET_NODE_RANK=0"
        )


def test_quickstart_runs_as_written(muster_home: Path):
    docs = [
        d
        for f in ("queues.yaml", "train.yaml")
        for d in yaml.safe_load_all((EXAMPLES / "quickstart" / f).read_text())
    ]
    with cluster(muster_home) as (up, client):
        client.apply(docs)
        job = wait_condition(client, "TrainingJob", "mnist", "Succeeded")
        assert client.get("Workload", "mnist", "default")["spec"]["priority"] == 1000
        assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] >= 1
        port = client.get("Workload", "mnist", "default")["metadata"]["annotations"]["muster.dev/master-port"]
        gpus = client.get("Pod", "mnist-worker-1", "default")["spec"]["gpus"]
        assert pod_log(up.home, "mnist-worker-1", container="trainer").strip() == (
            f"RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={port} CUDA_VISIBLE_DEVICES={gpus[0]}"
        )


def test_without_gpus_up_says_so_and_why_and_doctor_name_the_cause(muster_home: Path):
    """`muster up` on a machine without GPUs (and no --fake-gpus) warns at start-up; a job that
    asks for a GPU is explained by "no node has GPUs", not by a request to lower to 0."""
    from muster.runtime.local.gpus import open_gpu_source

    source = open_gpu_source()
    try:
        if source.devices():
            pytest.skip("this machine has GPUs: the no-GPU start-up cannot be seen here")
    finally:
        source.close()
    with serve(muster_home, []) as (up, client):
        wait_for(
            lambda: "warning: no GPU found: no node has GPUs" in up.log(), timeout=30, what="the warning"
        )
        assert "muster up --fake-gpus 4" in up.log()
        client.create(python_job("train", "print('never')", workers=1, gpus=1))
        wait_condition(client, "TrainingJob", "train", "Queued", reason="ExceedsMaxQuota")
        why = run_cli(up.home, "why", "job/train")
        assert why.returncode == 0, why.stderr
        headline = why.stdout.splitlines()[0]
        assert headline.startswith(
            "trainingjob/train is waiting in ClusterQueue default (position 1 of 1): no node has GPUs"
        )
        assert "request to at most 0" not in why.stdout and "--fake-gpus 4" in why.stdout
        doctor = run_cli(up.home, "doctor")
        assert "NoGPUs: no node has GPUs: 1 workload(s) that ask for GPUs can never run" in doctor.stdout
