"""examples/ddp_train.py as real processes (gloo on CPU): the env line, checkpoint on SIGTERM
with every rank agreeing, exit 143, resume at the saved step, and the same result as a run
that was never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from muster.testing import free_port, skip_or_fail, wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"


@pytest.fixture(autouse=True)
def _torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        skip_or_fail("torch is not installed (pip install -e '.[torch]')")


class Ranks:
    """Two ranks of the script started as plain processes with the torchrun variables."""

    def __init__(self, workdir: Path, *args: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        port = str(free_port())
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs = [workdir / f"rank{r}.log" for r in range(2)]
        for rank, log in enumerate(self.logs):
            env = {
                **os.environ,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "RANK": str(rank),
                "WORLD_SIZE": "2",
                "MUSTER_CHECKPOINT_DIR": str(workdir / "ckpt"),
            }
            with log.open("wb") as out:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, str(SCRIPT), *args],
                        env=env,
                        cwd=workdir,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )

    def output(self, rank: int = 0) -> str:
        return self.logs[rank].read_text()

    def wait(self, timeout: float = 120) -> list[int]:
        try:
            return [p.wait(timeout=timeout) for p in self.procs]
        finally:
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def done(self) -> dict:
        line = next(x for x in self.output(0).splitlines() if x.startswith("MUSTER_DDP_DONE "))
        return json.loads(line.split(" ", 1)[1])


@pytest.mark.slow
def test_sigterm_checkpoints_together_and_a_rerun_resumes_there(tmp_path: Path):
    args = ("--steps", "40", "--checkpoint-every", "10", "--log-every", "5")
    straight = Ranks(tmp_path / "straight", *args)
    assert straight.wait() == [0, 0], straight.output(0) + straight.output(1)
    expected = straight.done()

    run = Ranks(tmp_path / "preempted", *args, "--step-time", "0.2")
    wait_for(lambda: "step 5/40" in run.output(0), timeout=120, what="rank 0 to train a few steps")
    for p in run.procs:  # as the runtime stops a gang: SIGTERM to every rank
        p.send_signal(signal.SIGTERM)
    assert run.wait() == [143, 143], run.output(0) + run.output(1)
    saved = int(run.output(0).split("SIGTERM: saved a checkpoint at step ")[1].split(";")[0])
    assert 5 <= saved < 40
    assert (tmp_path / "preempted" / "ckpt" / f"ckpt-{saved:08d}.pt").is_file()
    assert not list((tmp_path / "preempted" / "ckpt").glob(".*.tmp"))

    resumed = Ranks(tmp_path / "preempted", *args)
    assert resumed.wait() == [0, 0], resumed.output(0) + resumed.output(1)
    assert f"resumed from step {saved}\n" in resumed.output(0)
    got = resumed.done()
    assert got["inSync"] and got["step"] == 40
    assert got["checksum"] == pytest.approx(expected["checksum"], rel=1e-9)
    assert "replicas in sync: True" in resumed.output(1)
    env = json.loads(resumed.output(1).splitlines()[0].split(" ", 1)[1])
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"], env["backend"]) == (
        "1",
        "2",
        "127.0.0.1",
        "gloo",
    )


@pytest.mark.slow
def test_runs_under_torchrun(tmp_path: Path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(SCRIPT),
            "--steps",
            "6",
            "--checkpoint-every",
            "3",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    envs = [
        json.loads(x.split(" ", 1)[1]) for x in result.stdout.splitlines() if x.startswith("MUSTER_DDP_ENV ")
    ]
    assert sorted((e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"]) for e in envs) == [
        ("0", "0", "2"),
        ("1", "1", "2"),
    ]
    assert "MUSTER_DDP_DONE " in result.stdout
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["ckpt-00000003.pt", "ckpt-00000006.pt"]
