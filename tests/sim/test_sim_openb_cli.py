"""``muster sim openb``: JSON on stdout only, reports written, bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from muster.cli.app import app
from muster.cli.sim import parse_seeds
from tests.sim.tiny_traces import write_openb


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_json_output_and_reports(runner: CliRunner, tmp_path: Path) -> None:
    root = write_openb(tmp_path / "traces")
    out = tmp_path / "out"
    args = ["sim", "openb", "--trace-dir", str(root), "--nodes", "tiny_nodes", "--pods", "tiny_pods"]
    args += ["--policy", "bestfit,fgd", "--seeds", "1-3", "--ratio", "2", "--out", str(out), "-o", "json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [(r["policy"], r["seed"]) for r in doc["runs"]] == [
        (p, s) for p in ("bestfit", "fgd") for s in (1, 2, 3)
    ]
    run = doc["runs"][0]
    assert set(run["allocation"]) == {"90", "95", "100", "110", "130"}
    assert {"fragmentation", "seconds", "failed", "arrivals"} <= set(run)
    assert set(doc["median"]) == {"bestfit", "fgd"}
    assert "expected" not in doc  # no published numbers for a made-up trace
    for suffix in (".csv", ".png", ".md"):
        assert (out / f"openb-tiny_pods{suffix}").stat().st_size > 0
    md = (out / "openb-tiny_pods.md").read_text()
    assert "| bestfit |" in md and "seeds 1-3" in md


def test_bad_policy_and_missing_trace_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(app, ["sim", "openb", "--policy", "fgd,best", "--trace-dir", str(tmp_path)])
    assert res.exit_code == 2 and "unknown 'best'" in res.output
    res = runner.invoke(app, ["sim", "openb", "--trace-dir", str(tmp_path / "none"), "--seeds", "1"])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_seed_ranges() -> None:
    assert parse_seeds("42-45,50") == [42, 43, 44, 45, 50]
    assert parse_seeds("7") == [7]
    with pytest.raises(Exception, match="runs backwards"):
        parse_seeds("5-3")
