"""Replay all of philly.csv (82k jobs) per policy: seconds per replay and the headline metrics.

Each replay runs in one process (``--jobs`` replays at a time), through ``muster sim philly``'s
own code (muster.sim.philly_runs). The target is at most 300 s per replay on one core.

    python benchmarks/sim_philly.py                                   # fifo, priority, fair; off and on
    python benchmarks/sim_philly.py --policies fifo --preemption off  # the default replay only
    python benchmarks/sim_philly.py --pollux 160 --nodes 16 --gpus-per-node 4
    python benchmarks/sim_philly.py --out benchmarks/out              # also write the reports

Traces come from --trace-dir, MUSTER_TRACES_DIR, ../shared/traces or the bundled traces/ (docs/simulator.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from muster.sim.philly_report import Report, write_reports
from muster.sim.philly_runs import PhillySetup, load_inputs, run_variants
from muster.sim.timed import ReplaySpec
from muster.sim.traces import trace_dir

TARGET_SECONDS = 300.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default="fifo,priority,fair")
    ap.add_argument("--preemption", choices=("off", "on", "both"), default="both")
    ap.add_argument("--nodes", type=int, default=None)
    ap.add_argument("--gpus-per-node", type=int, default=None)
    ap.add_argument("--pollux", type=int, default=0)
    ap.add_argument("--checkpoint-interval", type=float, default=1800.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the reports here")
    args = ap.parse_args(argv)
    setup = PhillySetup(
        trace_dir(args.trace_dir), nodes=args.nodes, gpus_per_node=args.gpus_per_node, pollux=args.pollux
    )
    t0 = time.perf_counter()
    inputs = load_inputs(setup)
    load_s = time.perf_counter() - t0
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.preemption]
    specs = [
        ReplaySpec(p, m, checkpoint_interval=args.checkpoint_interval)
        for p in args.policies.split(",")
        for m in modes
    ]
    c = inputs.cluster
    print(f"{len(inputs.jobs)} jobs on {c.nodes} x {c.gpus_per_node} GPUs; trace loaded in {load_s:.1f} s")

    def done(r: object) -> None:
        print(f"  {r.spec.name:22s} {r.seconds:6.1f} s ({r.cycles} cycles)", flush=True)  # type: ignore[attr-defined]

    results = run_variants(setup, specs, args.jobs, on_done=done, inputs=inputs)
    report = Report(results)
    print()
    print(
        "| replay | seconds | cycles | JCT mean h | JCT p50 | p95 | p99 | delay mean h | p50 | p95 | p99 "
        "| util % | preemptions | lost GPU-h |"
    )
    print("|:--|" + "--:|" * 13)
    ok = True
    for m in report.metrics:
        j, w = m.jct, m.wait
        hours = [v / 3600 for v in (j.mean, j.p50, j.p95, j.p99, w.mean, w.p50, w.p95, w.p99)]
        print(
            f"| {m.name} | {m.seconds:.1f} | {m.cycles} | "
            + " | ".join(f"{h:.2f}" for h in hours)
            + f" | {m.utilization_pct:.1f} | {m.preemptions} | {m.lost_gpu_hours:.0f} |"
        )
        ok &= m.seconds <= TARGET_SECONDS
    print(f"\nevery replay within {TARGET_SECONDS:.0f} s: {'yes' if ok else 'NO'}")
    if args.out:
        described = {"jobs": len(inputs.jobs), "cluster": f"{c.nodes} nodes x {c.gpus_per_node} GPUs"}
        paths = write_reports(args.out, "philly-pollux" if args.pollux else "philly", report, described)
        print(f"report: {paths[0]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
