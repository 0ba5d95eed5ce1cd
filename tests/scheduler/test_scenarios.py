"""Every scenario file passes ``--check``: the shared ones (../shared/scenarios) and ours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from muster.sim.replay import check, run
from muster.sim.scenario import load_scenario
from muster.testing import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
OWN = Path(__file__).resolve().parent / "scenarios"


def shared_dir() -> Path:
    return Path(os.environ.get("MUSTER_SCENARIOS_DIR") or REPO.parent / "shared" / "scenarios")


def _shared_files() -> list[Path]:
    d = shared_dir()
    return sorted(d.glob("*.yaml")) if d.is_dir() else []


@pytest.mark.parametrize("path", _shared_files() or [None], ids=lambda p: p.name if p else "absent")
def test_shared_scenario(path: Path | None) -> None:
    if path is None:
        skip_or_fail(f"shared scenarios not found at {shared_dir()} (set MUSTER_SCENARIOS_DIR)")
        return
    result = run(load_scenario(path))
    assert check(result) == []


@pytest.mark.parametrize("path", sorted(OWN.glob("*.yaml")), ids=lambda p: p.name)
def test_own_scenario(path: Path) -> None:
    result = run(load_scenario(path))
    assert result.scenario.expect, "every scenario of ours states what it expects"
    assert check(result) == []
