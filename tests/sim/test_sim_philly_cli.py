"""``muster sim philly``: one JSON object on stdout, every report written, bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from muster.cli.app import app
from tests.sim.tiny_traces import write_philly

ROWS = [
    ("2017-10-01 00:00:00", 100.0, 2, "a"),
    ("2017-10-01 00:00:30", 10.0, 1, "b"),
    ("2017-10-01 00:01:00", 40.0, 1, "a"),
]

CONFIG = """cluster: {nodes: 1, gpusPerNode: 2}
queues:
  - {name: a, nominalGpus: 1}
  - {name: b, nominalGpus: 1}
"""


def test_json_and_reports(tmp_path: Path) -> None:
    root = write_philly(tmp_path / "traces", ROWS, name="philly")
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(CONFIG)
    out = tmp_path / "out"
    args = ["sim", "philly", "--trace-dir", str(root), "--config", str(cfg), "--policy", "fifo,fair"]
    args += ["--preemption", "both", "--checkpoint-interval", "20", "--out", str(out), "-o", "json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    names = [r["replay"] for r in doc["runs"]]
    assert names == ["fifo", "fifo+preemption", "fair", "fair+preemption"]
    fifo, fifo_p = doc["runs"][0], doc["runs"][1]
    assert fifo["preemptions"]["count"] == 0 and fifo_p["preemptions"]["count"] == 1
    # without preemption jobs 1 and 2 wait for the 2-GPU job until 100 s (delays 0, 70, 40);
    # with it, job 1 reclaims b's GPU at 30 s
    assert fifo["queueingDelay"]["p50"] == 40 and fifo["jct"]["count"] == 3
    assert fifo_p["queueingDelay"]["mean"] < fifo["queueingDelay"]["mean"]
    assert set(fifo["jct"]) == {"count", "mean", "p50", "p95", "p99"}
    assert [q["nominalGpus"] for q in fifo["queues"]] == [1, 1]
    assert doc["setup"]["cluster"] == "1 nodes x 2 GPUs"
    for name in ("philly.md", "philly-jobs.csv", "philly-utilization.csv", "philly-queues.csv"):
        assert (out / name).stat().st_size > 0
    for name in ("utilization", "jct", "queues"):
        assert (out / f"philly-{name}.png").stat().st_size > 0
    assert "fifo+preemption" in (out / "philly.md").read_text()
    jobs_csv = (out / "philly-jobs.csv").read_text().splitlines()
    assert len(jobs_csv) == 1 + 4 * 3


def test_bad_config_and_policy_exit_2(tmp_path: Path) -> None:
    root = write_philly(tmp_path / "traces", ROWS, name="philly")
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("queues: [{name: a, nominalGpus: -1}]\n")
    res = CliRunner().invoke(app, ["sim", "philly", "--trace-dir", str(root), "--config", str(cfg)])
    assert res.exit_code == 2 and "bad.yaml.queues[0].nominalGpus: must be >= 0" in res.output
    res = CliRunner().invoke(app, ["sim", "philly", "--trace-dir", str(root), "--policy", "lifo"])
    assert res.exit_code == 2 and "unknown 'lifo'" in res.output
