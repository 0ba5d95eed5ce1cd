"""The README's `muster sim openb` and `muster sim philly` work from a fresh clone: with no
../shared/traces and no MUSTER_TRACES_DIR they read the gzipped traces in the repository's
traces/ folder, whose README says where each file comes from and under which licence."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.sim import openb, traces
from muster.sim.expected import load_expected
from muster.sim.philly import philly_path

BUNDLED = traces.REPO_ROOT / "traces"


@pytest.fixture
def fresh_clone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ../shared next to the checkout, no MUSTER_TRACES_DIR."""
    monkeypatch.delenv("MUSTER_TRACES_DIR", raising=False)
    monkeypatch.setattr(traces, "SHARED_TRACES", tmp_path / "no-shared" / "traces")


def test_the_bundled_traces_are_the_default_and_documented(fresh_clone: None) -> None:
    assert traces.trace_dir() == BUNDLED
    readme = (BUNDLED / "README.md").read_text()
    for name in ("openb_node_list_gpu_node.csv.gz", "openb_pod_list_default.csv.gz", "philly.csv.gz"):
        assert name in readme
    assert "7a6c496e4f4b6ce6150be8f881cb051bf2abff42" in readme  # the clusterdata commit
    assert "c793c7089bd307462686339d29707925c461f9a9" in readme  # the adaptdl commit
    assert "CC-BY-4.0" in readme and "research" in readme
    expected = load_expected(BUNDLED, "openb_pod_list_default")
    assert expected is not None and expected.get("allocation", "fgd", 100) is not None


def test_the_readmes_traces_are_found_from_a_fresh_clone(fresh_clone: None) -> None:
    """What `muster sim openb` and `muster sim philly` open with their default options (the
    loaders read these files in test_fillup and test_philly; the runs are tested on small
    traces in test_sim_openb_cli and test_sim_philly_cli)."""
    root = traces.trace_dir()
    assert openb.nodes_path(root) == root / openb.FOLDER / "openb_node_list_gpu_node.csv.gz"
    assert openb.pods_path(root) == root / openb.FOLDER / "openb_pod_list_default.csv.gz"
    assert philly_path(root) == root / "philly" / "philly.csv.gz"
    table = traces.read_csv(philly_path(root), ("timestamp", "num_gpus"))
    assert len(table) == 82247
