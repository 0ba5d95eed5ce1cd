"""End to end: `muster doctor` finds a fake GPU that a running job holds but never uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from muster.testing import wait_for
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster, python_job, wait_condition

pytestmark = pytest.mark.slow


def test_doctor_reports_an_idle_allocated_gpu(muster_home: Path):
    with cluster(muster_home, gpus=2) as (_up, client):
        healthy = run_cli(muster_home, "doctor")
        assert healthy.returncode == 0, healthy.stderr
        assert "No problems found." in healthy.stdout

        client.apply([python_job("sleepy", "import time\nwhile True: time.sleep(0.1)\n", workers=1, gpus=1)])
        wait_condition(client, "TrainingJob", "sleepy", "Running")

        def idle() -> dict | None:
            done = run_cli(muster_home, "doctor", "--idle-minutes", "0.1", "-o", "json")
            assert done.returncode == 0, done.stderr
            answer = json.loads(done.stdout)
            return next((f for f in answer["findings"] if f["code"] == "IdleGPU"), None)

        finding = wait_for(idle, timeout=60, interval=1, what="doctor to see the idle GPU")
        assert finding["objects"] == ["trainingjob/default/sleepy"]
        assert "mean 0.0%, max 0.0%" in finding["evidence"][0]

        text = run_cli(muster_home, "doctor", "--idle-minutes", "0.1")
        assert "WARNING  IdleGPU: trainingjob default/sleepy holds 1 GPU(s) idle" in text.stdout
        md = run_cli(muster_home, "doctor", "--idle-minutes", "0.1", "-o", "markdown")
        assert md.stdout.startswith("# muster doctor")
        assert "**Fix:**" in md.stdout
