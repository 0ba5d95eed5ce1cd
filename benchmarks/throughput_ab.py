"""Throughput of two (or more) checkouts of Muster, in interleaved runs, each with the host's steal.

On a shared VM the same code's throughput moves by a third from one run to the next, mostly
with the CPU time the host gives to other guests (``/proc/stat``'s steal). This script measures
``e2e_throughput.py``'s throughput (``--jobs`` one-pod ``true`` jobs on 8 fake GPUs, applied 100
at a time, on a fresh ``muster up``) for each checkout in turn, pair after pair, records the
steal during each run, and sums each checkout up over the runs where the host took less than
``--quiet`` percent of the CPU: a change is judged on those, side by side, never on one run
against an older one. The order turns each pair (AB, BA, ...): the host can also slow steadily
over a session with no steal shown (132 -> 106 jobs/s over eight runs of one code), which a
fixed order would charge to the checkouts that run later. Each checkout's figure is then also
the median, over the pairs, of its throughput over the first checkout's in the same pair. A
checkout goes first on its server's ``PYTHONPATH`` (as in ``latency_side_by_side.py``), so the
installed environment serves them all::

    git worktree add /tmp/base HEAD~3
    .venv/bin/python benchmarks/throughput_ab.py --tree base=/tmp/base --tree new=. \\
        [--pairs 3] [--store sqlite|postgresql] [--jobs 1000] [--quiet 1.0]

Set ``TMPDIR`` to a tmpfs (``/dev/shm``) to leave the disk out of it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from cpu_meter import CpuMeter
from e2e_throughput import STOLEN, THROUGHPUT, Figures, muster_throughput
from latency_side_by_side import parse_tree, up_from

from muster.sdk.client import Client
from muster.testing.postgres import PostgresServer, start_postgres


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a checkout (repeat)")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each checkout, interleaved")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=1000, help="one-pod true jobs a run")
    parser.add_argument(
        "--quiet", type=float, default=1.0, help="%% of the CPU stolen under which a run counts"
    )
    args = parser.parse_args()
    args.batch = 100
    trees = [parse_tree(t) for t in args.tree]
    postgres = start_postgres() if args.store == "postgresql" else None
    runs: dict[str, list[Figures]] = {label: [] for label, _ in trees}
    try:
        for pair in range(args.pairs):
            turn = pair % len(trees)
            for label, root in trees[turn:] + trees[:turn]:
                figures = _run(args, root, postgres)
                runs[label].append(figures)
                shown = "   ".join(f"{name} {value:.1f}" for name, value in figures.items())
                print(f"pair {pair + 1}  {label:<12} {shown}", flush=True)
    finally:
        if postgres is not None:
            postgres.stop()
    _summary(args, runs)


def _run(args: argparse.Namespace, root: str, postgres: PostgresServer | None) -> Figures:
    with tempfile.TemporaryDirectory(prefix="muster-ab-") as tmp:
        up = up_from(root, Path(tmp), postgres)
        meter = CpuMeter("ab")
        try:
            assert up.proc is not None
            meter.add(up.proc.pid)
            with Client(up.url, up.token, timeout=120) as client:
                return muster_throughput(args, client, meter)
        finally:
            up.stop()
            meter.close()


def _summary(args: argparse.Namespace, runs: dict[str, list[Figures]]) -> None:
    print(
        f"\n{args.store}, {args.jobs} jobs a run; counted: runs with under {args.quiet:g}% of the CPU stolen"
    )
    quiet = {
        label: [f[THROUGHPUT] for f in figures if f[STOLEN] < args.quiet] for label, figures in runs.items()
    }
    first = quiet[next(iter(runs))]  # the others are compared to the first checkout
    base = statistics.median(first) if first else None
    for label, figures in runs.items():
        every = ", ".join(f"{f[THROUGHPUT]:.1f} ({f[STOLEN]:.1f}%)" for f in figures)
        if not quiet[label]:
            print(f"{label:<12} no quiet run; all (stolen): {every}")
            continue
        median = statistics.median(quiet[label])
        ratio = f", {median / base:.3f}x the first" if base else ""
        paired = _paired(args, runs[label], runs[next(iter(runs))])
        print(f"{label:<12} {median:.1f} jobs/s (median of {len(quiet[label])}{ratio}{paired})")
        print(f"{'':<12} all (stolen): {every}")


def _paired(args: argparse.Namespace, figures: list[Figures], first: list[Figures]) -> str:
    """The median over the pairs (both runs quiet) of ``figures``' throughput over ``first``'s."""
    ratios = [
        f[THROUGHPUT] / b[THROUGHPUT]
        for f, b in zip(figures, first, strict=True)
        if f[STOLEN] < args.quiet and b[STOLEN] < args.quiet and b[THROUGHPUT] > 0
    ]
    if not ratios or figures is first:
        return ""
    return f", pair by pair {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"


if __name__ == "__main__":
    main()
