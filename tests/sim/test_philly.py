"""Philly loader, Pollux-style sampling, replay config and derived quotas; the real file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from muster.api.errors import InvalidObject
from muster.sim.philly import load_philly, philly_path, pollux_sample
from muster.sim.philly_config import ReplayConfig, derive_quotas, load_config, queue_configs
from muster.sim.philly_runs import PhillySetup, load_inputs
from tests.sim.tiny_traces import write_philly

ROWS = [
    ("2017-10-02 03:00:00", 3600.0, 1, "vcA"),
    ("2017-10-01 02:30:00", 120.0, 4, "vcB"),  # earliest, listed second
    ("2017-10-01 12:00:00", 30.0, 1, "vcA"),  # under 60 s: never sampled
    ("2017-10-03 09:59:59", 600.0, 2, "vcB"),
]


def test_loads_sorted_by_submit_time(tmp_path: Path) -> None:
    j = load_philly(philly_path(write_philly(tmp_path, ROWS), "tiny"))
    assert j.queues == ["vcA", "vcB"]
    assert j.submit.tolist() == [0.0, 34200.0, 88200.0, 199799.0]
    assert j.gpus.tolist() == [4, 1, 1, 2] and j.queue.tolist() == [1, 0, 0, 1]
    assert j.gpu_seconds_by_queue().tolist() == [3630.0, 1680.0]
    w = j.window(0.5, 1.0)  # 12:30 on day 0 to 12:30 on day 1
    assert w.submit.tolist() == [88200.0 - 43200.0]


def test_pollux_sample_keeps_qualifying_jobs_at_their_time_of_day(tmp_path: Path) -> None:
    j = load_philly(philly_path(write_philly(tmp_path, ROWS), "tiny"))
    s = pollux_sample(j, count=3, start_hour=2, hours=8, seed=1)
    # 02:30 -> 1800 s, 03:00 -> 3600 s, 09:59:59 -> 28799 s after 02:00; the 30 s job is out
    assert s.submit.tolist() == [1800.0, 3600.0, 28799.0]
    assert sorted(s.duration.tolist()) == [120.0, 600.0, 3600.0]
    with pytest.raises(ValueError, match="only 3 jobs fit"):
        pollux_sample(j, count=4)


def test_bad_rows_are_named(tmp_path: Path) -> None:
    root = write_philly(tmp_path, [("2017-10-02 03:00", 10.0, 1, "a"), ("2017-10-02 03:00:00", -1.0, 0, "a")])
    with pytest.raises(InvalidObject) as exc:
        load_philly(philly_path(root, "tiny"))
    got = [str(e).split(",")[0] for e in exc.value.errors]
    assert got == [
        "tiny.csv:2 timestamp: must be a time like 2017-10-09 07:01:55",
        "tiny.csv:3 duration: must be seconds >= 0",
        "tiny.csv:3 num_gpus: must be a GPU count >= 1",
    ]


def test_derived_quotas_add_up_by_largest_remainder() -> None:
    assert derive_quotas([3, 3, 3], 10) == [4, 3, 3]
    assert derive_quotas([0.5, 0.25, 0.25], 10) == [5, 3, 2]
    assert derive_quotas([0, 0], 5) == [3, 2]
    assert sum(derive_quotas([7, 1, 1, 13], 64)) == 64


def test_config_file_errors_and_missing_queues(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {nodes: 0, gpusPerNode: 8}\nqueues: [{name: a, nominalGpus: 2, weight: 3}]\n")
    with pytest.raises(InvalidObject) as exc:
        load_config(bad)
    text = str(exc.value)
    assert "bad.yaml.cluster.nodes: must be >= 1" in text and "queues[0].weight: unknown field" in text
    good = tmp_path / "good.yaml"
    good.write_text(
        "cluster: {nodes: 2, gpusPerNode: 4}\nqueues:\n  - {name: a, nominalGpus: 6, fairWeight: 2}\n"
    )
    cfg = load_config(good)
    assert cfg.cluster.gpus == 8
    with pytest.raises(InvalidObject, match=r"must list every virtual cluster.*\['b'\]"):
        queue_configs(cfg, ["a", "b", "c"], [5.0, 1.0, 0.0], "good.yaml")
    qs = queue_configs(cfg, ["a", "c"], [5.0, 0.0])
    assert [(q.name, q.nominal_gpus, q.fair_weight) for q in qs] == [("a", 6, 2.0), ("c", 0, 1.0)]
    derived = queue_configs(ReplayConfig(), ["a", "b"], [3.0, 1.0])
    assert [q.nominal_gpus for q in derived] == [600, 200]


def test_pollux_setup_defaults_to_16_nodes_of_4_gpus(tmp_path: Path) -> None:
    root = write_philly(tmp_path, ROWS, name="philly")
    inputs = load_inputs(PhillySetup(root, pollux=2, sample_seed=3))
    assert (inputs.cluster.nodes, inputs.cluster.gpus_per_node) == (16, 4) and len(inputs.jobs) == 2
    assert sum(q.nominal_gpus for q in inputs.queues) == 64
    inputs = load_inputs(PhillySetup(root, nodes=3))
    assert (inputs.cluster.nodes, inputs.cluster.gpus_per_node) == (3, 8) and len(inputs.jobs) == 4


def test_real_philly_trace_loads_as_documented(real_traces: Path) -> None:
    """philly/README.md: 82,247 jobs; GPU counts 1 -> 76,627 ... 128 -> 3; VC 6214e9 41,226."""
    j = load_philly(philly_path(real_traces))
    assert len(j) == 82247
    counts = dict(zip(*np.unique(j.gpus, return_counts=True), strict=True))
    assert counts == {1: 76627, 2: 1818, 4: 1870, 8: 1643, 12: 7, 16: 199, 24: 7, 32: 67, 64: 6, 128: 3}
    per_vc = dict(zip(j.queues, np.bincount(j.queue).tolist(), strict=True))
    assert per_vc["6214e9"] == 41226 and per_vc["11cb48"] == 16091 and len(j.queues) == 15
    assert np.all(np.diff(j.submit) >= 0)
    assert np.median(j.duration) == 1144.0
