"""Capacity that follows demand, on the Philly trace: what a fixed cluster, on-demand pools and
spot pools cost, and what the jobs' completion times become (docs/capacity.md, "Measured").

Three replays of the same jobs (Philly, days ``--start-day`` to ``--start-day + --days``,
FIFO queues per virtual cluster, quotas from GPU-time shares of the largest cluster):

(a) a fixed cluster sized for the peak: as many 8-GPU nodes as the most GPUs the jobs ask
    for at once (each job counted from its submission for its duration), paid for the whole
    replay at the on-demand price;
(b) an on-demand NodePool of the same largest size, scaled by the autoscaler from zero:
    nodes up ``--delay`` seconds after they are asked for, removed after ``--ttl`` idle;
(c) the same as a spot pool at ``--spot-discount`` of the on-demand price (the clouds quote
    60-70% off), interrupted at ``--spot-rate`` per node-hour with a two-minute notice; jobs
    checkpoint every ``--checkpoint-minutes`` and lose what they ran since the last one.

Goal: (c) costs at most 40% of (a) with its 99th-percentile JCT within 1.3x of (a)'s.

    python benchmarks/sim_capacity.py                       # days 30-37
    python benchmarks/sim_capacity.py --days 1 --spot-rate 0.05
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from rich.console import Console

from muster.sim.capacity_runs import capacity_table, run_capacity, write_capacity_reports
from muster.sim.elastic import ElasticSpec, SimPool, peak_demand
from muster.sim.philly import load_philly, philly_path
from muster.sim.philly_config import ClusterConfig
from muster.sim.timed import ReplaySpec
from muster.sim.traces import trace_dir

ON_DEMAND = 24.48  # an 8 x V100 node per hour (AWS p3.16xlarge, us-east-1, on demand)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start-day", type=float, default=30.0)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--delay", type=float, default=180.0, help="seconds from asking for a node to Ready")
    ap.add_argument("--ttl", type=float, default=600.0, help="seconds an empty node stays")
    ap.add_argument("--spot-discount", type=float, default=0.35, help="spot price over on-demand price")
    ap.add_argument("--spot-rate", type=float, default=0.01, help="interruptions per spot node-hour")
    ap.add_argument("--checkpoint-minutes", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=30.0, help="seconds between autoscaler decisions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("sim-results"))
    args = ap.parse_args(argv)
    root = trace_dir()
    jobs = load_philly(philly_path(root)).window(args.start_day, args.days)
    peak = peak_demand(jobs)
    nodes = math.ceil(peak / 8)
    spec = ReplaySpec(policy="fifo", checkpoint_interval=args.checkpoint_minutes * 60.0)
    od = SimPool("on-demand", 8, ON_DEMAND, nodes, delay=args.delay, ttl=args.ttl)
    spot = SimPool(
        "spot", 8, ON_DEMAND * args.spot_discount, nodes, spot=True, delay=args.delay, ttl=args.ttl
    )
    fixed = ClusterConfig(nodes=nodes, gpus_per_node=8)
    empty = fixed.model_copy(update={"nodes": 0})
    runs = [
        ("(a) fixed, sized for the peak", fixed, ElasticSpec((), static_price=ON_DEMAND)),
        ("(b) on-demand pool", empty, ElasticSpec((od,), autoscale_interval=args.interval, seed=args.seed)),
        (
            "(c) spot pool",
            empty,
            ElasticSpec((spot,), spot_rate=args.spot_rate, autoscale_interval=args.interval, seed=args.seed),
        ),
    ]
    console = Console()
    console.print(
        f"Philly days {args.start_day:g}-{args.start_day + args.days:g}: {len(jobs)} jobs, peak demand "
        f"{peak} GPUs -> {nodes} nodes x 8 GPUs; on-demand {ON_DEMAND}/node-h, spot "
        f"{ON_DEMAND * args.spot_discount:.2f}/node-h, {args.spot_rate:g} interruptions per spot node-hour, "
        f"checkpoints every {args.checkpoint_minutes:g} min, nodes up after {args.delay:g} s, "
        f"idle TTL {args.ttl:g} s"
    )
    rows = []
    for name, cluster, elastic in runs:
        rows += run_capacity(jobs, cluster, [(name, spec, elastic)])
        console.print(f"  {name}: done in {rows[-1].seconds:.0f} s")
    console.print(capacity_table(rows, baseline=rows[0].name))
    a, c = rows[0], rows[2]
    console.print(
        f"(c) cost / (a) cost = {c.cost / a.cost:.3f} (goal <= 0.40); (c) p99 JCT / (a) p99 JCT = "
        f"{c.jct.p99 / a.jct.p99:.3f} (goal <= 1.3); autoscaler decisions: mean "
        f"{rows[1].plan_ms:.2f} ms (b), {c.plan_ms:.2f} ms (c)"
    )
    described = {
        "window": f"days {args.start_day:g} to {args.start_day + args.days:g}",
        "jobs": len(jobs),
        "peak demand GPUs": peak,
        "on-demand price per node-hour": ON_DEMAND,
        "spot price per node-hour": round(ON_DEMAND * args.spot_discount, 2),
        "spot interruptions per node-hour": args.spot_rate,
        "checkpoint minutes": args.checkpoint_minutes,
        "provisioning delay s": args.delay,
        "idle TTL s": args.ttl,
    }
    paths = write_capacity_reports(args.out, "capacity-abc", rows, described)
    console.print(f"reports: {paths[0]}, {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
