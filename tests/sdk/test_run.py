"""python -m muster.sdk.run: one task function in its pod."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from muster.sdk.run import main
from tests.sdk import flows

FLOWS = Path(flows.__file__).resolve()


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    inputs, outputs = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    outputs.mkdir()
    monkeypatch.setenv("MUSTER_INPUTS_DIR", str(inputs))
    monkeypatch.setenv("MUSTER_OUTPUTS_DIR", str(outputs))
    monkeypatch.delenv("RANK", raising=False)
    return inputs, outputs


def test_a_path_result_becomes_the_return_artifact(dirs):
    _inputs, outputs = dirs
    assert main([f"{FLOWS}:make_rows", "--param", "n=2", "--param", 'tag="y"', "--returns", "artifact"]) == 0
    assert json.loads((outputs / "return" / "1.json").read_text()) == {"i": 1, "tag": "y"}
    assert not (outputs / "rows").exists()  # moved, not copied


def test_artifacts_come_in_as_paths_and_values_go_out_as_json(dirs):
    inputs, outputs = dirs
    (inputs / "rows").mkdir()
    (inputs / "rows" / "0.json").write_text('{"i": 0}')
    assert main([f"{FLOWS}:count", "--artifact", "rows", "--param", "scale=3", "--returns", "parameter"]) == 0
    assert json.loads((outputs / "return.json").read_text()) == {"count": 3, "pid": True}


def test_only_rank_zero_writes_the_result(dirs, monkeypatch: pytest.MonkeyPatch):
    inputs, outputs = dirs
    (inputs / "rows").mkdir()
    monkeypatch.setenv("RANK", "1")
    assert main([f"{FLOWS}:count", "--artifact", "rows", "--param", "scale=3"]) == 0
    assert not (outputs / "return.json").exists()


def test_failures_exit_1_with_the_traceback(dirs, capsys: pytest.CaptureFixture[str]):
    assert main([f"{FLOWS}:count", "--artifact", "rows", "--param", "scale=3"]) == 1  # no input
    assert "FileNotFoundError" in capsys.readouterr().err
    assert main([f"{FLOWS}:nope"]) == 1
    assert "is not a @task function" in capsys.readouterr().err
    assert main([f"{FLOWS}:total", "--param", "a=not json"]) == 1
    assert "--param a: 'not json' is not JSON" in capsys.readouterr().err


def test_as_a_module(dirs):
    _inputs, outputs = dirs
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "muster.sdk.run",
            f"{FLOWS}:total",
            "--param",
            'a={"count": 1}',
            "--param",
            'b={"count": 2.5}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((outputs / "return.json").read_text()) == 3.5
