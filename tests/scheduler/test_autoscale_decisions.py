"""The autoscaler's decisions, pool by pool and gang by gang, are those stored in
``autoscale_decisions.json`` for fixed inputs: the benchmark's (``benchmarks/autoscale_decision.py``,
several seeds) and a varied mix on top of them (GPU shares, anti-affinity, several pod sets,
flavor options, pool limits, minNodes, idle nodes). The planner's speed-ups must not change a
decision; a deliberate change of behaviour regenerates the file:

    python tests/scheduler/test_autoscale_decisions.py --write
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from muster.scheduler import Flavor, PodSet, Toleration
from muster.scheduler.autoscale import Bin, Gang, Pool, ScalePlan, plan

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("autoscale_decisions.json")
SMALL = (120, 15, 60)  # gangs, pools, Ready nodes: decisions stored in full
FULL = (1000, 50, 400)  # the benchmark's size: decisions stored as a digest
SEEDS = (1, 2, 3)
FULL_SEEDS = (1, 2, 3, 4, 5, 6, 7)


def _bench():
    spec = importlib.util.spec_from_file_location(
        "autoscale_decision", ROOT / "benchmarks/autoscale_decision.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def inputs(seed: int, size: tuple[int, int, int], varied: bool) -> tuple[list[Gang], list[Pool], list[Bin]]:
    gangs_n, pools_n, ready_n = size
    rng = random.Random(seed)
    pools = BENCH.make_pools(pools_n, rng)
    bins = BENCH.make_bins(ready_n, pools, rng)
    gangs = BENCH.make_gangs(gangs_n, rng)
    if varied:
        _vary(pools, bins, gangs, rng)
    return gangs, pools, bins


def _vary(pools: list[Pool], bins: list[Bin], gangs: list[Gang], rng: random.Random) -> None:
    """What the benchmark leaves out: shares, anti-affinity, pod sets, options, limits, idle."""
    for i, p in enumerate(pools):
        if i % 7 == 3:
            p.limits = {"nvidia.com/gpu": rng.choice((8, 16, 32)) * 1000}
        if i % 5 == 4:
            p.min_nodes = p.nodes + rng.randint(1, 2)
        p.ttl = rng.choice((60.0, 300.0))
    for i, b in enumerate(bins):
        if b.pool is None and i % 13 == 0:
            b.pool = pools[i % len(pools)].name
            b.gpu_free = [1000] * len(b.gpu_free)
            b.empty_since = -rng.choice((30.0, 100.0, 400.0))
        if i % 17 == 5:
            b.gpu_free = [rng.choice((0, 250, 500, 1000)) for _ in b.gpu_free]
    spot_flavor = Flavor("spot", tolerations=(Toleration("muster.dev/capacity-type", "Exists"),))
    zone_a = Flavor("zone-a", node_labels={"topology.kubernetes.io/zone": "zone-a"})
    for i, g in enumerate(gangs):
        ps = g.pod_sets[0]
        r = rng.random()
        if r < 0.1:
            ps.gpus, ps.gpu_milli = 1, rng.choice((250, 500))
        elif r < 0.15:
            ps.gpus, ps.gpu_memory = 1, rng.choice((20, 40)) << 30
        elif r < 0.2:
            ps.anti_affinity = True
        elif r < 0.3:
            g.pod_sets.append(
                PodSet("head", 1, requests={"cpu": 2000, "memory": 8 << 30}, gpus=rng.choice((0, 1)))
            )
        if i % 11 == 0:
            g.options = [
                [()] * len(g.pod_sets),
                [(zone_a,)] * len(g.pod_sets),
                [(spot_flavor,)] * len(g.pod_sets),
            ]


def decisions(out: ScalePlan) -> dict:
    reasons = sorted(set(out.unplaceable.values()))
    return {
        "launch": [n.pool + " " + ",".join(n.gangs) for n in out.launch],
        "waits": {k: ",".join(v) for k, v in out.waits.items()},
        "reasons": reasons,
        "unplaceable": {k: reasons.index(v) for k, v in out.unplaceable.items()},
        "remove": [list(r) for r in out.remove],
    }


def digest(d: dict) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def compute() -> dict:
    out: dict = {"small": {}, "full": {}}
    for varied in (False, True):
        for seed in SEEDS:
            for ready_verdict in (True, False) if varied and seed == 1 else (True,):
                gangs, pools, bins = inputs(seed, SMALL, varied)
                key = f"seed={seed} varied={varied} ready_verdict={ready_verdict}"
                out["small"][key] = decisions(plan(gangs, pools, bins, 0.0, ready_verdict=ready_verdict))
        for seed in FULL_SEEDS:
            gangs, pools, bins = inputs(seed, FULL, varied)
            out["full"][f"seed={seed} varied={varied}"] = digest(decisions(plan(gangs, pools, bins, 0.0)))
    return out


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def computed() -> dict:
    return compute()


def test_small_plans_decide_as_stored_pool_by_pool_and_gang_by_gang(stored: dict, computed: dict) -> None:
    assert computed["small"].keys() == stored["small"].keys()
    for key, want in stored["small"].items():
        got = computed["small"][key]
        for part in ("launch", "waits", "reasons", "unplaceable", "remove"):
            assert got[part] == want[part], f"{key}: {part} differs"


def test_benchmark_size_plans_decide_as_stored(stored: dict, computed: dict) -> None:
    assert computed["full"] == stored["full"]


def test_the_varied_inputs_reach_what_the_benchmark_leaves_out(computed: dict) -> None:
    """A guard on the guard: the varied mix really exercises removals, minNodes and limits."""
    varied = [d for k, d in computed["small"].items() if "varied=True" in k]
    assert any(d["remove"] for d in varied)
    assert any(n.endswith(" ") for d in varied for n in d["launch"])  # a node for minNodes, no gang
    assert any("resource limits" in r for d in varied for r in d["reasons"])


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    FIXTURE.write_text(json.dumps(compute(), sort_keys=True, indent=0) + "\n")
