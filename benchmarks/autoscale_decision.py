"""Autoscaler decision time: :func:`muster.scheduler.autoscale.plan` with 1,000 pending gangs
and 50 NodePools (goal: at most 50 ms).

The pools: 50 of them over five GPU models (L4, A10G, A100, H100, H200), 1, 2, 4 or 8 GPUs
per node, on-demand and spot (spot tainted, at 35% of the price), in three zones, some
weighted; 10 pools already have nodes coming up. The cluster: 400 Ready nodes, most of them
full, a tenth with a few GPUs free. The gangs: 1,000, of which 60% one pod of 1-8 GPUs, 30%
gangs of 2-8 pods of 4-8 GPUs, 10% gangs of 4-16 pods of 8 GPUs asking for one zone; a
third ask for a GPU model, 40% tolerate spot. Prints the median and best of ``--runs`` plans
as the autoscaler makes them (the cycle collector paused), the same with the collector running
(interleaved), and what the plan decided.

    python benchmarks/autoscale_decision.py
    python benchmarks/autoscale_decision.py --gangs 5000 --pools 200 --runs 5
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import statistics
import sys
import time

from muster.scheduler import Node, PodSet, Taint, Toleration
from muster.scheduler.autoscale import Bin, Gang, Pool, plan
from muster.util import paused_gc

MODELS = ("L4", "A10G", "A100", "H100", "H200")
ZONES = ("zone-a", "zone-b", "zone-c")
SPOT = Taint("muster.dev/capacity-type", "spot", "NoSchedule")
TOLERATE = (Toleration("muster.dev/capacity-type", "Exists"),)
_GIB = 1 << 30


def node(name: str, gpus: int, model: str, zone: str, spot: bool) -> Node:
    return Node(
        name,
        allocatable={"cpu": 16_000 * gpus, "memory": 128 * _GIB * gpus},
        labels={"nvidia.com/gpu.product": model, "topology.kubernetes.io/zone": zone},
        taints=(SPOT,) if spot else (),
        gpus=gpus,
        gpu_model=model,
        gpu_memory=80 * _GIB,
    )


def make_pools(n: int, rng: random.Random) -> list[Pool]:
    pools = []
    for i in range(n):
        model, zone = MODELS[i % len(MODELS)], ZONES[(i // len(MODELS)) % len(ZONES)]
        gpus = (1, 2, 4, 8)[i % 4]
        spot = i % 2 == 1
        price = gpus * (1.0 + MODELS.index(model)) * (0.35 if spot else 1.0)
        pools.append(
            Pool(
                f"pool-{i:02d}",
                node(f"pool-{i:02d}-template", gpus, model, zone, spot),
                price=price,
                max_nodes=rng.choice((8, 16, 64)),
                nodes=rng.randint(0, 4),
                spot=spot,
                weight=1 if i % 10 == 0 else 0,
            )
        )
    return pools


def make_bins(n: int, pools: list[Pool], rng: random.Random) -> list[Bin]:
    bins = []
    for i in range(n):
        gpus = 8
        template = node(f"ready-{i:04d}", gpus, rng.choice(MODELS), rng.choice(ZONES), False)
        free = [0] * gpus
        if rng.random() < 0.1:
            for d in rng.sample(range(gpus), rng.randint(1, 3)):
                free[d] = 1000
        bins.append(Bin(template, {"cpu": 16_000, "memory": 64 * _GIB}, free, pool=None, ready=True))
    for p in pools[:10]:
        t = p.template
        coming = node(
            f"{p.name}-coming", t.gpus, t.gpu_model, t.labels["topology.kubernetes.io/zone"], p.spot
        )
        bins.append(Bin(coming, dict(t.allocatable), [1000] * t.gpus, pool=p.name, ready=False, eta=60.0))
    return bins


def make_gangs(n: int, rng: random.Random) -> list[Gang]:
    gangs = []
    for i in range(n):
        r = rng.random()
        if r < 0.6:
            pods, gpus, topology = 1, rng.choice((1, 2, 4, 8)), None
        elif r < 0.9:
            pods, gpus, topology = rng.randint(2, 8), rng.choice((4, 8)), None
        else:
            pods, gpus, topology = rng.randint(4, 16), 8, "topology.kubernetes.io/zone"
        models = (rng.choice(MODELS),) if rng.random() < 1 / 3 else ()
        tolerations = TOLERATE if rng.random() < 0.4 else ()
        ps = PodSet(
            "worker",
            pods,
            requests={"cpu": 4000 * gpus, "memory": 32 * _GIB * gpus},
            gpus=gpus,
            gpu_models=models,
            tolerations=tolerations,
            topology_required=topology,
        )
        gangs.append(
            Gang(
                "team-" + str(i % 7),
                f"job-{i:04d}",
                [ps],
                priority=rng.choice((0, 0, 0, 100)),
                queue_time=float(i),
            )
        )
    return gangs


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gangs", type=int, default=1000)
    ap.add_argument("--pools", type=int, default=50)
    ap.add_argument("--ready-nodes", type=int, default=400)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    pools = make_pools(args.pools, rng)
    bins = make_bins(args.ready_nodes, pools, rng)
    gangs = make_gangs(args.gangs, rng)
    # As the autoscaler calls it (the cycle collector paused: muster.util.paused_gc), and, in
    # the same runs interleaved, with the collector running, for comparison.
    times, cpu, times_gc, cpu_gc = [], [], [], []
    out = None
    for _ in range(args.runs):
        for paused, wall, used_cpu in ((True, times, cpu), (False, times_gc, cpu_gc)):
            gc.collect()  # each plan starts from the same collector state
            t0, c0 = time.perf_counter(), time.process_time()
            with paused_gc() if paused else contextlib.nullcontext():
                out = plan(gangs, pools, bins, now=0.0)
            wall.append(time.perf_counter() - t0)
            used_cpu.append(time.process_time() - c0)
    assert out is not None
    median, best = statistics.median(times) * 1000, min(times) * 1000
    used = {}
    for n in out.launch:
        used[n.pool] = used.get(n.pool, 0) + 1
    spot = sum(c for p, c in used.items() if next(x for x in pools if x.name == p).spot)
    print(
        f"autoscale plan: {args.gangs} pending gangs, {args.pools} pools, {len(bins)} nodes "
        f"({args.ready_nodes} Ready)"
    )
    print(
        f"  decision time: median {median:.1f} ms, best {best:.1f} ms over {args.runs} runs; CPU time "
        f"median {statistics.median(cpu) * 1000:.1f} ms, best {min(cpu) * 1000:.1f} ms (goal <= 50 ms)"
    )
    print(
        f"  with the cycle collector running: median {statistics.median(times_gc) * 1000:.1f} ms, "
        f"best {min(times_gc) * 1000:.1f} ms; CPU time median {statistics.median(cpu_gc) * 1000:.1f} ms"
    )
    print(
        f"  decided: {len(out.launch)} new nodes in {len(used)} pools ({spot} spot), "
        f"{len(out.waits)} gangs placed, {len(out.unplaceable)} with no room in any pool"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
