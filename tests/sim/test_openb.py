"""openb loaders: good files, and bad cells reported by file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.api.errors import InvalidObject
from muster.scheduler import CPU, MEMORY
from muster.sim import openb
from muster.sim.traces import TraceNotFound, trace_dir
from tests.sim.tiny_traces import TINY_NODES, TINY_PODS, write_openb


def test_tiny_files_load(tmp_path: Path) -> None:
    root = write_openb(tmp_path)
    nodes = openb.load_nodes(openb.nodes_path(root, "tiny_nodes"))
    assert [(n.name, n.gpus, n.gpu_model) for n in nodes] == [("n0", 2, "A"), ("n1", 1, "A"), ("n2", 1, "B")]
    assert nodes[0].allocatable == {CPU: 8000, MEMORY: 32768 * 2**20}
    pods = openb.load_pods(openb.pods_path(root, "tiny_pods.csv"))
    assert [p.name for p in pods] == ["p0", "p1", "p2", "p3", "p4", "p5"]
    assert pods[3].gpus == 0 and pods[3].gpu_milli == 0 and pods[3].gpu_request == 0
    assert pods[5].gpu_models == ("B",) and pods[5].gpu_request == 500
    ps = pods[4].pod_set()
    assert (ps.gpus, ps.gpu_milli, ps.requests[CPU]) == (2, 1000, 1000)


def test_bad_cells_name_file_line_and_column(tmp_path: Path) -> None:
    pods = TINY_PODS.replace("p1,2000,1024,1,500,", "p1,two,1024,1,500,").replace(
        "p4,1000,1024,2,1000,", "p4,1000,1024,2,500,"
    )
    root = write_openb(tmp_path, pods=pods)
    with pytest.raises(InvalidObject) as exc:
        openb.load_pods(openb.pods_path(root, "tiny_pods"))
    assert [str(e).split(",")[0] for e in exc.value.errors] == [
        "tiny_pods.csv:3 cpu_milli: must be a whole number of milli-CPU >= 0"
    ]
    fixed = pods.replace("p1,two", "p1,2000")
    (root / openb.FOLDER / "tiny_pods.csv").write_text(fixed)
    with pytest.raises(InvalidObject, match=r"tiny_pods.csv:6 gpu_milli: must be 1000 for a pod with more"):
        openb.load_pods(openb.pods_path(root, "tiny_pods"))


def test_missing_column_and_duplicate_node(tmp_path: Path) -> None:
    root = write_openb(tmp_path, nodes=TINY_NODES.replace("model", "kind"))
    with pytest.raises(InvalidObject, match=r"tiny_nodes\.csv:1: must have a column 'model'"):
        openb.load_nodes(openb.nodes_path(root, "tiny_nodes"))
    root = write_openb(tmp_path, nodes=TINY_NODES.replace("n2,", "n1,"))
    with pytest.raises(InvalidObject, match="node names must be unique, got 'n1'"):
        openb.load_nodes(openb.nodes_path(root, "tiny_nodes"))


def test_missing_trace_says_how_to_point_at_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUSTER_TRACES_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(TraceNotFound, match="MUSTER_TRACES_DIR"):
        trace_dir()
    root = write_openb(tmp_path)
    with pytest.raises(TraceNotFound, match="no such trace file"):
        openb.pods_path(root, "openb_pod_list_missing")
