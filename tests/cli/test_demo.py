from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from muster.cli.main import app


def test_demo_runs_the_tour(muster_home: Path):
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "$ muster apply -f" in out and "trainingjob/mnist created" in out
    assert "job.yaml[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0" in out
    assert "(exit status 2)" in out
    assert "MODIFIED  trainingjob/mnist" in out and "DELETED   trainingjob/mnist" in out
    assert list(muster_home.iterdir()) == []  # the demo's home was a temporary directory
