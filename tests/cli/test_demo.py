from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from muster.cli.app import app


def test_demo_runs_the_tour(muster_home: Path):
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "FAKE-GPU" in out  # the node, registered with its fake GPUs
    assert "$ muster apply -f" in out and "trainingjob/mnist created" in out
    # The job was admitted, ran on two fake GPUs and succeeded; each replica saw its rank.
    assert "trainingjob/mnist  Running" in out and "trainingjob/mnist  Succeeded" in out
    assert "mnist-worker-0: RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1" in out
    assert "mnist-worker-1: RANK=1 WORLD_SIZE=2" in out
    assert "job.yaml[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0" in out
    assert "(exit status 2)" in out
    assert "trainingjob/mnist deleted" in out
    # Act 2: the low-priority job is preempted by the urgent one, checkpoints, resumes there.
    assert "job/ddp: Preempted by default/urgent (InCohortReclamation)" in out
    saved = int(out.split("job/ddp master: SIGTERM: saved a checkpoint at step ")[1].split(";")[0])
    assert f"job/ddp master: resumed from step {saved}" in out
    assert "job/urgent: Succeeded" in out and "job/ddp: Succeeded" in out
    summary = out.split("summary")[-1]
    ddp_row = next(line for line in summary.splitlines() if "ddp" in line).split("│")
    # one preemption, no restart (a restart's reason is printed below the summary)
    assert [c.strip() for c in ddp_row[-3:-1]] == ["1", "0"], summary
    assert list(muster_home.iterdir()) == []  # the demo's home was a temporary directory
