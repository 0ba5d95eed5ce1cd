"""Every scenario file passes ``--check``: the shared acceptance ones and ours.

The acceptance scenarios come from ``../shared/scenarios`` when the checkout has it beside it
(or ``MUSTER_SCENARIOS_DIR``), else from the copy in ``tests/scheduler/acceptance``; when both
exist, the copy must be identical.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from muster.sim.replay import check, run
from muster.sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
OWN = Path(__file__).resolve().parent / "scenarios"
COPY = Path(__file__).resolve().parent / "acceptance"


def shared_dir() -> Path:
    return Path(os.environ.get("MUSTER_SCENARIOS_DIR") or REPO.parent / "shared" / "scenarios")


def _acceptance_files() -> list[Path]:
    d = shared_dir() if shared_dir().is_dir() else COPY
    return sorted(d.glob("*.yaml"))


@pytest.mark.parametrize("path", _acceptance_files(), ids=lambda p: p.name)
def test_acceptance_scenario(path: Path) -> None:
    result = run(load_scenario(path))
    assert check(result) == []


def test_acceptance_copy_matches_shared() -> None:
    if not shared_dir().is_dir():
        pytest.skip(f"{shared_dir()} is absent; the copy in {COPY} is what runs")
    shared = {p.name: p.read_bytes() for p in shared_dir().glob("*.yaml")}
    copied = {p.name: p.read_bytes() for p in COPY.glob("*.yaml")}
    assert copied == shared, f"refresh the copy: cp {shared_dir()}/* {COPY}/"


@pytest.mark.parametrize("path", sorted(OWN.glob("*.yaml")), ids=lambda p: p.name)
def test_own_scenario(path: Path) -> None:
    result = run(load_scenario(path))
    assert result.scenario.expect, "every scenario of ours states what it expects"
    assert check(result) == []
