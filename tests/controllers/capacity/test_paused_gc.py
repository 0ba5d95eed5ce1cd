"""The autoscaler pauses the cycle collector over a plan (muster.util.paused_gc): the plan makes
no reference cycles, so nothing is left for the collector, and its state is restored after."""

from __future__ import annotations

import gc
import random

import pytest

from muster.scheduler import Node, PodSet
from muster.scheduler.autoscale import Bin, Gang, Pool, plan
from muster.util import paused_gc


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_inside_and_as_it_was_after(enabled: bool):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), paused_gc():
            raise RuntimeError("a plan that fails")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_a_plan_leaves_no_cyclic_garbage():
    rng = random.Random(3)
    pools = [
        Pool(
            f"p{i}",
            Node(f"p{i}-t", allocatable={"cpu": 64_000}, gpus=g, gpu_model="A100"),
            price=g,
            max_nodes=10,
        )
        for i, g in enumerate((1, 2, 4, 8))
    ]
    bins = [Bin(Node("n0", allocatable={"cpu": 64_000}, gpus=8), {"cpu": 8000}, [1000] * 3 + [0] * 5)]
    gangs = [
        Gang(
            "team",
            f"g{i}",
            [PodSet("w", rng.randint(1, 4), requests={"cpu": 1000}, gpus=rng.choice((1, 2, 8)))],
        )
        for i in range(50)
    ]
    gc.collect()
    with paused_gc():
        decided = plan(gangs, pools, bins)
        assert decided.launch  # it did plan something
        del decided
        assert gc.collect() == 0
