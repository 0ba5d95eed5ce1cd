"""The tutorial end to end (docs/tutorial.md): `muster up --fake-gpus 2` as a process started
from the repository root, the team queues, the DDP example training for real (torch, gloo),
its logs, `why`, `top`, and a preemption by an urgent job after which it resumes from its
checkpoint. The manifests are the shipped ones; only the number of steps is made smaller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from muster.sdk.client import Client
from muster.testing import skip_or_fail, wait_for
from muster.testing.up import MusterUp, cli_env, muster_command, run_cli
from tests.e2e.jobs import cluster, python_job

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def up(muster_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MusterUp]:
    try:
        import torch  # noqa: F401
    except ImportError:
        skip_or_fail("torch is not installed (pip install -e '.[torch]')")
    # As the tutorial says: started from the repository root, in the environment that has
    # torch (`python3` there is this interpreter), so "$(PWD)/examples/ddp_train.py" resolves.
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PWD", str(ROOT))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    with cluster(muster_home, gpus=2) as (server, _client):  # deletes every job and waits out its pods
        yield server


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, timeout=120)


def smaller(tmp_path: Path, name: str, steps: int, step_time: float, every: int = 10) -> str:
    """A copy of an example manifest whose training runs ``steps`` steps."""
    docs = list(yaml.safe_load_all((EXAMPLES / name).read_text()))
    for doc in docs:
        specs = doc["spec"].get("replicaSpecs") or doc["spec"].get("pytorchReplicaSpecs")
        for replica in specs.values():
            container = replica["template"]["spec"]["containers"][0]
            container["args"] = [
                "--steps", str(steps), "--checkpoint-every", str(every), "--step-time", str(step_time),
                "--log-every", "5",
            ]  # fmt: skip
    path = tmp_path / name.replace("/", "-")
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def state(client: Client, name: str) -> str:
    job = client.get("TrainingJob", name)
    true = [c for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"]
    return max(true, key=lambda c: c.get("lastTransitionTime") or "")["type"] if true else "Created"


def wait_state(up: MusterUp, name: str, wanted: str, timeout: float = 240) -> None:
    with Client(up.url, up.token) as client:

        def reached() -> bool:
            now = state(client, name)
            if now == "Failed" and wanted != "Failed":
                raise AssertionError(f"{name} failed:\n{cli(up.home, 'why', 'job/' + name).stdout}")
            return now == wanted

        try:
            wait_for(reached, timeout=timeout, interval=0.5, what=f"trainingjob/{name} to be {wanted}")
        except TimeoutError as exc:
            why = cli(up.home, "why", f"job/{name}").stdout
            logs = cli(up.home, "logs", f"job/{name}", "--all-replicas").stdout
            raise AssertionError(f"{exc}\n{why}\n{logs}\n--- muster up ---\n{up.log()[-4000:]}") from None


def env_lines(logs: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.split("MUSTER_DDP_ENV ", 1)[1])
        for line in logs.splitlines()
        if "MUSTER_DDP_ENV " in line
    ]


def test_the_ddp_example_and_its_kubeflow_twin_run_to_success(up: MusterUp, tmp_path: Path):
    home = up.home
    assert cli(home, "apply", "-f", "examples/queues.yaml").returncode == 0
    applied = cli(home, "apply", "-f", smaller(tmp_path, "trainingjob.yaml", steps=20, step_time=0))
    assert applied.returncode == 0, applied.stderr
    wait_state(up, "ddp", "Succeeded")

    logs = cli(home, "logs", "job/ddp", "--all-replicas").stdout
    assert "[master-0] no checkpoint: starting at step 0" in logs
    assert "[master-0] MUSTER_DDP_DONE " in logs
    assert "[worker-0] rank 1: replicas in sync: True" in logs
    ranks = {e["RANK"]: e for e in env_lines(logs)}
    assert set(ranks) == {"0", "1"} and {e["WORLD_SIZE"] for e in ranks.values()} == {"2"}
    assert ranks["0"]["MASTER_PORT"] == ranks["1"]["MASTER_PORT"]
    assert {ranks["0"]["CUDA_VISIBLE_DEVICES"], ranks["1"]["CUDA_VISIBLE_DEVICES"]} == {"0", "1"}

    why = cli(home, "why", "job/ddp").stdout
    assert why.startswith("trainingjob/ddp succeeded")
    gpus = cli(home, "top", "gpus").stdout.splitlines()
    assert len(gpus) == 3 and all(line.rstrip().endswith("-") for line in gpus[1:])  # nothing holds them

    # The same job as a Kubeflow PyTorchJob, applied as Kubeflow users write it.
    kubeflow = cli(home, "apply", "-f", smaller(tmp_path, "pytorchjob.yaml", steps=10, step_time=0))
    assert kubeflow.stdout.strip() == "trainingjob/ddp-kubeflow created", kubeflow.stderr
    wait_state(up, "ddp-kubeflow", "Succeeded")
    assert (
        "[worker-0] rank 1: replicas in sync: True"
        in cli(home, "logs", "job/ddp-kubeflow", "--all-replicas").stdout
    )


def test_a_preempted_job_checkpoints_waits_and_resumes(up: MusterUp, tmp_path: Path):
    home = up.home
    cli(home, "apply", "-f", "examples/queues.yaml")
    cli(home, "apply", "-f", smaller(tmp_path, "trainingjob.yaml", steps=100, step_time=0.15))
    wait_state(up, "ddp", "Running")
    follower = subprocess.Popen(
        [*muster_command(), "logs", "job/ddp", "--all-replicas", "-f"],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: "step 10/100" in cli(home, "logs", "job/ddp").stdout,
            timeout=120,
            what="ddp to train 10 steps",
        )
        top = cli(home, "top", "queues").stdout.splitlines()
        gpu = next(line.split() for line in top if line.startswith("team-a") and "nvidia.com/gpu" in line)
        assert gpu[4:] == ["2/1", "(200%)", "1", "1", "0", "1"]  # it borrows team-b's GPU

        urgent = yaml.safe_load((EXAMPLES / "urgent.yaml").read_text())
        urgent["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"][-1] = (
            "import time; print('urgent work', flush=True); time.sleep(3)"
        )
        (tmp_path / "urgent.yaml").write_text(yaml.safe_dump(urgent))
        assert cli(home, "apply", "-f", str(tmp_path / "urgent.yaml")).returncode == 0

        # ddp gives its borrowed GPU back: its ranks checkpoint on SIGTERM, and it waits.
        def preempted() -> str | None:
            out = cli(home, "why", "job/ddp").stdout
            return out if "Preemptions:" in out and "by default/urgent" in out else None

        why = wait_for(preempted, timeout=120, interval=0.5, what="ddp to be preempted by urgent")
        assert "InCohortReclamation" in why
        wait_state(up, "urgent", "Succeeded")
        wait_state(up, "ddp", "Succeeded")
        out, _ = follower.communicate(timeout=120)  # the follow ends by itself with the job
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    saved = int(out.split("[master-0] SIGTERM: saved a checkpoint at step ")[1].split(";")[0])
    assert f"[master-0] resumed from step {saved}\n" in out
    assert "[worker-0] rank 1: replicas in sync: True" in out
    assert follower.returncode == 0
    previous = cli(home, "logs", "job/ddp", "--previous").stdout
    assert f"SIGTERM: saved a checkpoint at step {saved}; exiting 143" in previous
    # why tells whether the resumed run found a checkpoint, and which.
    data = json.loads(cli(home, "why", "job/ddp", "-o", "json").stdout)
    (pre,) = data["preemptions"]
    assert (pre["preemptor"], pre["checkpointFound"]) == ("default/urgent", True)
    assert pre["checkpoint"] == f"ckpt-{saved:08d}.pt"
    assert f"checkpoint ckpt-{saved:08d}.pt found" in cli(home, "why", "job/ddp").stdout


def test_why_a_job_failed_names_the_replica_its_exit_code_and_its_log(up: MusterUp, tmp_path: Path):
    # Rank 1 fails only once rank 0 of the same attempt has written its line: the restart
    # stops the gang in the pass that sees rank 1 fail, so under load rank 0 could be stopped
    # before its interpreter printed anything, and the previous logs below would lack it.
    script = (
        "import os, sys, time\n"
        "attempt, rank = os.environ['MUSTER_RESTART_COUNT'], os.environ['RANK']\n"
        "print('attempt', attempt, 'rank', rank, flush=True)\n"
        f"mark = os.path.join({str(tmp_path)!r}, 'rank0-' + attempt)\n"
        "if rank == '0':\n"
        "    open(mark, 'w').close(); time.sleep(600)\n"
        "deadline = time.monotonic() + 60\n"
        "while not os.path.exists(mark) and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "print('ValueError: the data shard is empty', flush=True); sys.exit(3)\n"
    )
    with Client(up.url, up.token) as client:
        client.apply([python_job("flaky", script, workers=2, run_policy={"backoffLimit": 1})])
    wait_state(up, "flaky", "Failed")
    why = cli(up.home, "why", "job/flaky")
    assert why.returncode == 0, why.stderr
    assert why.stdout.startswith(
        "trainingjob/flaky failed: BackoffLimitExceeded (worker-1: Error, exit code 3)"
    )
    assert "Log tail of worker-1 (muster logs flaky-worker-1):\n  | attempt 1 rank 1\n" in why.stdout
    assert "  | ValueError: the data shard is empty\n" in why.stdout
    data = json.loads(cli(up.home, "why", "job/flaky", "-o", "json").stdout)
    assert (data["failure"]["pod"]["replica"], data["failure"]["pod"]["exitCode"]) == ("worker-1", 3)
    logs = cli(up.home, "logs", "job/flaky", "--all-replicas", "--previous").stdout.splitlines()
    assert "[worker-0] attempt 0 rank 0" in logs and "[worker-1] attempt 0 rank 1" in logs
