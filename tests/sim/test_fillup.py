"""The FGD fill-up experiment on a 3-node, 6-pod trace computed by hand, and on the real trace.

Hand computation (bestfit, arrivals p0..p5, see tiny_traces.py; scores are
floor(100 * (1 - 0.5 * cpu_left / 128000 - 0.5 * gpu_left / 8000)) after placing):

1. p0 (1 GPU): n0 91, n1 97, n2 98 -> n2.
2. p1 (500m): n0 88, n1 94 -> n1 (device 0 keeps 500m).
3. p2 (600m): only n0 fits -> n0 device 0 (best fit, lowest index on a tie).
4. p3 (CPU only, 2 cores): n0 89, n1 95, n2 99 -> n2.
5. p4 (2 whole GPUs): no node has two free -> dropped.
6. p5 (500m of model B): n2 is the only B node and has nothing free -> dropped.

Fragmentation with every pod shape typical (frequency 1/6 each): at the end n0 has devices
[400, 1000] and 7000m CPU: F = (400 + 400 + 400 + 1400 + 1400 + 1400) / 6 = 900; n1 has
[500] and 6000m CPU: F = (500 + 0 + 500 + 500 + 500 + 500) / 6 = 416.67; n2 is full: 0.
On the empty cluster F is 666.67 + 500 + 333.33 = 1500.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from muster.sim import openb
from muster.sim.fillup import arrivals, binned, run_fillup, typical_set
from muster.sim.fillup_runs import OpenbSetup, load_workload, median_curves, run_all
from tests.sim.tiny_traces import write_openb


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[list, list]:
    root = write_openb(tmp_path)
    nodes = openb.load_nodes(openb.nodes_path(root, "tiny_nodes"))
    pods = openb.load_pods(openb.pods_path(root, "tiny_pods"))
    return nodes, pods


def test_bestfit_allocation_and_fragmentation_by_hand(tiny) -> None:
    nodes, pods = tiny
    typical = typical_set(pods, coverage=1.0)
    assert len(typical) == 6 and all(abs(t.frequency - 1 / 6) < 1e-12 for t in typical)
    run = run_fillup(nodes, pods, range(6), "bestfit", seed=1, typical=typical)
    assert run.capacity == 4000
    assert run.arrived.tolist() == [0, 1000, 1500, 2100, 2100, 4100, 4600]
    assert run.used.tolist() == [0, 1000, 1500, 2100, 2100, 2100, 2100]
    assert run.failed == 2
    assert run.idle.tolist() == [4000, 3000, 2500, 1900, 1900, 1900, 1900]
    assert run.frag[0] == pytest.approx(1500.0)
    assert run.frag[-1] == pytest.approx(900 + 2500 / 6)


def test_fgd_prefers_the_node_whose_fragmentation_drops_most(tiny) -> None:
    """p0 under FGD: F falls by 166.67 on n0, 500 on n1 (its only GPU is taken) and
    333.33 on n2, so the scores are 54, 62 and 58 and n1 wins (bestfit picked n2)."""
    nodes, pods = tiny
    typical = typical_set(pods, coverage=1.0)
    run = run_fillup(nodes, pods, [0], "fgd", seed=1, typical=typical)
    assert run.used.tolist() == [0, 1000]
    assert run.frag[1] == pytest.approx(1500 - 500)


def test_binning_follows_the_published_scripts(tiny) -> None:
    """Arrived 0, 25, 37.5, 52.5, 52.5, 102.5, 115 % round half-to-even to 0, 25, 38, 52,
    52, 102, 115; a percentage with no line takes the lines within 1 of it."""
    nodes, pods = tiny
    run = run_fillup(nodes, pods, range(6), "bestfit", seed=1, typical=typical_set(pods, 1.0))
    b = binned(run)
    assert b.allocation[25] == 25.0
    assert b.allocation[38] == 37.5 and b.allocation[37] == 37.5  # 37 from its neighbour 38
    assert b.allocation[52] == 52.5
    assert np.isnan(b.allocation[100])  # 99..101 hold no line
    assert b.allocation[101] == 52.5  # from 102
    assert b.fragmentation[0] == pytest.approx(round(1500 / 4000 * 100, 2))
    assert b.frag_ratio[115] == pytest.approx(round((900 + 2500 / 6) / 1900 * 100, 2))


def test_inflation_stops_before_the_target_and_is_seeded(tiny) -> None:
    _, pods = tiny
    # the pods request 4600 milli; 2x capacity of 4000 is 8000
    a = arrivals(pods, 4000, seed=7, ratio=2.0)
    assert sorted(a[:6]) == list(range(6))  # every original pod once, shuffled
    total = sum(pods[i].gpu_request for i in a)
    assert total <= 8000
    assert a == arrivals(pods, 4000, seed=7, ratio=2.0)
    assert a != arrivals(pods, 4000, seed=8, ratio=2.0)
    # below the pods' own request the list is thinned instead
    down = arrivals(pods, 4000, seed=7, ratio=0.5)
    assert sum(pods[i].gpu_request for i in down) <= 2000 and len(down) < 6


def test_runs_are_deterministic_by_seed(tmp_path: Path) -> None:
    setup = OpenbSetup(write_openb(tmp_path), "tiny_nodes", "tiny_pods", ratio=2.0, coverage=1.0)
    one = run_all(setup, ["random", "fgd"], [3, 4])
    two = run_all(setup, ["random", "fgd"], [3, 4])
    assert [(r.policy, r.seed) for r in one] == [("random", 3), ("random", 4), ("fgd", 3), ("fgd", 4)]
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.curves.allocation, b.curves.allocation)
        np.testing.assert_array_equal(a.curves.fragmentation, b.curves.fragmentation)
    med = median_curves(one)
    assert set(med) == {"random", "fgd"}


def test_real_trace_loads_as_published(real_traces: Path) -> None:
    """perf.md §1.2: 1213 GPU nodes with 6212 GPUs; 8152 pods: 1088 CPU-only, 3078 sharing,
    3911 x 1, 16 x 2, 15 x 4, 44 x 8 GPUs; 35 typical shapes cover 95%."""
    work = load_workload(OpenbSetup(real_traces))
    assert len(work.nodes) == 1213 and work.capacity == 6212 * 1000
    pods = work.pods
    assert len(pods) == 8152
    assert sum(p.gpus == 0 for p in pods) == 1088
    assert sum(p.gpus == 1 and p.gpu_milli < 1000 for p in pods) == 3078
    whole = [p.gpus for p in pods if p.gpu_milli == 1000]
    assert [whole.count(k) for k in (1, 2, 4, 8)] == [3911, 16, 15, 44]
    assert len(work.typical) == 35
    assert [p.name for p in pods] == sorted(p.name for p in pods)
