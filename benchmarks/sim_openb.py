"""The FGD fill-up table on openb: our medians next to the simulator's, and seconds per run.

Runs every policy for every seed through ``muster sim``'s own code (muster.sim.fillup_runs),
then prints, per policy, the median GPU allocation over seeds at each report point with the
published median beside it (reference/perf.md §2.1), whether 100% and 130% are within
±0.5 percentage points, and the per-run seconds (one core each).

    python benchmarks/sim_openb.py                        # 6 policies x seeds 42-51, one process
    python benchmarks/sim_openb.py --jobs 2 --seeds 42-43 --policies fgd,bestfit
    python benchmarks/sim_openb.py --out benchmarks/out   # also writes the CSV/PNG/Markdown report

Traces come from --trace-dir, MUSTER_TRACES_DIR, ../shared/traces or the bundled traces/ (docs/simulator.md).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from muster.cli.sim import FGD_POLICIES, parse_seeds
from muster.sim.expected import load_expected
from muster.sim.fillup import REPORT_POINTS
from muster.sim.fillup_report import write_reports
from muster.sim.fillup_runs import OpenbSetup, load_workload, median_curves, run_all
from muster.sim.traces import trace_dir

TOLERANCE = 0.5  # percentage points, at 100% and 130% arrived


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", default=FGD_POLICIES)
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--pods", default="openb_pod_list_default")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--trace-dir", default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the reports here")
    args = ap.parse_args(argv)
    root = trace_dir(args.trace_dir)
    setup = OpenbSetup(root, pods=args.pods)
    policies = [p for p in args.policies.split(",") if p]
    seeds = parse_seeds(args.seeds)
    work = load_workload(setup)
    print(
        f"{len(work.nodes)} nodes, {work.capacity // 1000} GPUs, {len(work.pods)} pods, "
        f"{len(work.typical)} typical shapes; {len(policies)} policies x {len(seeds)} seeds, "
        f"--jobs {args.jobs}"
    )
    started = time.perf_counter()

    def done(r: object) -> None:
        print(
            f"  {r.policy:15s} seed {r.seed}: {r.seconds:6.1f} s, {r.failed} of {r.arrivals} pods failed",
            flush=True,
        )  # type: ignore[attr-defined]

    runs = run_all(setup, policies, seeds, args.jobs, on_done=done, work=work)
    wall = time.perf_counter() - started
    medians = median_curves(runs)
    expected = load_expected(root, setup.workload_name, setup.ratio)
    print()
    print("Median GPU allocation, % of capacity, by arrived % (ours / simulator's / difference):")
    print("| policy | " + " | ".join(f"{k}%" for k in REPORT_POINTS) + " | within ±0.5 pp at 100 and 130 |")
    print("|:--|" + "--:|" * len(REPORT_POINTS) + ":-:|")
    ok_all = True
    for policy, m in medians.items():
        cells, ok = [], True
        for k in REPORT_POINTS:
            ours = float(m.allocation[k])
            ref = expected.get("allocation", policy, k) if expected else None
            if ref is None:
                cells.append(f"{ours:.2f}")
                continue
            cells.append(f"{ours:.2f} / {ref:.2f} / {ours - ref:+.2f}")
            if k in (100, 130) and abs(ours - ref) > TOLERANCE:
                ok = False
        ok_all &= ok
        print(f"| {policy} | " + " | ".join(cells) + f" | {'yes' if ok else 'NO'} |")
    print()
    print("Seconds per run (one core):")
    print("| policy | runs | mean | max | schedule() share |")
    print("|:--|--:|--:|--:|--:|")
    for policy in medians:
        mine = [r for r in runs if r.policy == policy]
        secs = [r.seconds for r in mine]
        share = sum(r.schedule_seconds for r in mine) / sum(secs)
        print(f"| {policy} | {len(mine)} | {statistics.fmean(secs):.1f} | {max(secs):.1f} | {share:.0%} |")
    print(
        f"\nwall time {wall:.0f} s for {len(runs)} runs; "
        f"all within ±{TOLERANCE} pp: {'yes' if ok_all else 'NO'}"
    )
    if args.out:
        print(f"report: {write_reports(args.out, setup, runs, medians, expected)}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
