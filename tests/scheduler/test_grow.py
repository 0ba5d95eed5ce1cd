"""Elastic growth (muster.scheduler.grow) as a driver that loops cycles sees it: a resize
applied with apply_decisions binds the added pods, and the next cycle has nothing to add."""

from __future__ import annotations

from pathlib import Path

from muster.scheduler import apply_decisions, schedule
from muster.sim.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def test_a_resize_applied_binds_the_added_pods_and_growth_stops_at_full_size():
    sc = load_scenario(SCENARIOS / "elastic-grows-on-another-node.yaml")
    first = schedule(sc.snapshot, sc.policy)
    assert len(first.resized) == 1
    after = apply_decisions(sc.snapshot, first)
    train = next(w for w in after.admitted if w.name == "train")
    (worker,) = train.pod_sets
    assert worker.count == 3 and [p.node for p in worker.pods] == ["n1", "n2", "n2"]
    table = after.nodes
    n2 = table.index["n2"]
    assert (table.gpu_free[n2][:4] == 0).all()  # the two added 2-GPU pods hold all of n2
    again = schedule(after, sc.policy)
    assert not again.resized and not again.held  # at its full size: nothing to do or say


def test_growth_is_deterministic_and_leaves_the_snapshot_alone():
    sc = load_scenario(SCENARIOS / "elastic-grows-into-what-is-left.yaml")
    before = [(w.name, [ps.count for ps in w.pod_sets]) for w in sc.snapshot.admitted]
    a, b = schedule(sc.snapshot, sc.policy), schedule(sc.snapshot, sc.policy)
    assert [
        (r.name, [(p.count, [(pl.node, pl.gpus) for pl in p.placements]) for p in r.pod_sets])
        for r in a.resized
    ] == [
        (r.name, [(p.count, [(pl.node, pl.gpus) for pl in p.placements]) for p in r.pod_sets])
        for r in b.resized
    ]
    assert [(w.name, [ps.count for ps in w.pod_sets]) for w in sc.snapshot.admitted] == before
