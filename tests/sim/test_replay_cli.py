"""``muster sched replay``: exit codes 0/1/2, JSON shape, table output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from muster.cli.app import app

SCENARIOS = Path(__file__).resolve().parents[1] / "scheduler" / "scenarios"

BASE = """
name: tiny
clusterQueues:
  - name: q
    quota:
      default: {cpu: 4, nvidia.com/gpu: 4}
nodes:
  - {name: n1, capacity: {cpu: 8, nvidia.com/gpu: 4}, gpuModel: A100}
pending:
  - {name: w, queue: q, podSets: [{count: 2, requests: {cpu: 1, nvidia.com/gpu: 1}}]}
  - {name: big, queue: q, podSets: [{count: 1, requests: {cpu: 8}}]}
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "scenario.yaml"
    p.write_text(text)
    return p


def test_check_passes_with_exit_0(runner: CliRunner) -> None:
    path = SCENARIOS / "gpu-share-packs-one-device.yaml"
    result = runner.invoke(app, ["sched", "replay", str(path), "--check"])
    assert result.exit_code == 0, result.output
    assert "decisions match expect" in result.output
    assert "s1" in result.output  # the table lists the workloads


def test_mismatch_exits_1_with_a_readable_diff(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "expect:\n  admitted: [big]\n  reasons: {w: QuotaExhausted}\n")
    result = runner.invoke(app, ["sched", "replay", str(path), "--check"])
    assert result.exit_code == 1
    assert "admitted: expected ['big'], got ['w']" in result.output
    assert "reasons.w: expected QuotaExhausted, but w is not pending" in result.output


def test_json_output_shape(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    result = runner.invoke(app, ["sched", "replay", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"admitted", "preempted", "pending", "stats"}
    (adm,) = out["admitted"]
    assert adm["name"] == "w" and adm["clusterQueue"] == "q" and adm["namespace"] == "default"
    assert adm["flavors"] == {"cpu": "default", "nvidia.com/gpu": "default"}
    (ps,) = adm["podSets"]
    assert ps["name"] == "main" and ps["count"] == 2
    assert ps["placements"] == [{"node": "n1", "pods": 2, "gpus": [[0], [1]]}]
    (pend,) = out["pending"]
    assert pend["name"] == "big" and pend["reason"] == "ExceedsMaxQuota"
    assert "8 cpu" in pend["message"] and "at most 4" in pend["message"]
    stats = out["stats"]
    assert set(stats) == {"snapshotSeconds", "cycleSeconds", "workloadsConsidered", "podsPlaced"}
    assert stats["workloadsConsidered"] == 2 and stats["podsPlaced"] == 2
    assert stats["cycleSeconds"] >= 0 and stats["snapshotSeconds"] >= 0


def test_check_with_json_reports_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "expect:\n  admitted: [w]\n")
    result = runner.invoke(app, ["sched", "replay", str(path), "-o", "json", "--check"])
    assert result.exit_code == 0
    json.loads(result.stdout)  # stdout stays pure JSON
    assert "decisions match expect" in result.stderr


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE.replace("name: tiny", "name: tiny\nbogus: 1"), "bogus: unknown field"),
        (BASE.replace("count: 2", "count: 0"), "pending[0].podSets[0].count: must be >= 1, got 0"),
        (
            BASE.replace("cpu: 1,", "cpu: lots,"),
            "pending[0].podSets[0].requests.cpu: 'lots' is not a quantity",
        ),
        (
            BASE.replace("queue: q, podSets: [{count: 2", "queue: nope, podSets: [{count: 2"),
            "pending[0].queue",
        ),
        (BASE + "expect:\n  reasons: {w: Bogus}\n", "expect.reasons.w: must be one of"),
        ("name: x\n", "clusterQueues: required field is missing"),
        ("- just a list\n", "a scenario must be a mapping"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_invalid_file_exits_2_naming_the_field(
    runner: CliRunner, tmp_path: Path, text: str, needle: str
) -> None:
    path = write(tmp_path, text)
    result = runner.invoke(app, ["sched", "replay", str(path)])
    assert result.exit_code == 2
    assert needle in result.stderr, result.stderr


def test_missing_file_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["sched", "replay", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_no_expect_block_is_not_a_failure(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["sched", "replay", str(write(tmp_path, BASE)), "--check"])
    assert result.exit_code == 0
    assert "no expect block" in result.output


def test_elastic_growth_in_the_table_and_json(runner: CliRunner) -> None:
    path = (
        Path(__file__).resolve().parents[1]
        / "scheduler"
        / "scenarios"
        / "elastic-grows-into-what-is-left.yaml"
    )
    table = runner.invoke(app, ["sched", "replay", str(path)])
    assert table.exit_code == 0, table.output
    assert "grown" in table.output and "worker 2 -> 5" in table.output and "QuotaExhausted" in table.output
    out = json.loads(runner.invoke(app, ["sched", "replay", str(path), "-o", "json"]).output)
    (grown,) = out["resized"]
    assert grown["previous"] == {"worker": 2} and grown["podSets"][0]["count"] == 5
    assert [h["reason"] for h in out["held"]] == ["QuotaExhausted"]
