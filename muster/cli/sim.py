"""``muster sim``: trace-driven simulation with the scheduler core.

``muster sim openb`` runs the FGD fill-up experiment on Alibaba's GPU-sharing trace;
``muster sim philly`` replays Microsoft's Philly jobs on a virtual clock. Both print a table
(or, with ``-o json``, exactly one JSON object on stdout), show progress on stderr, and
write CSV, PNG and Markdown reports into ``--out``. Exit status 2: bad options or a trace
that is missing or malformed (each problem names the file, row and column).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from muster.api.errors import InvalidObject
from muster.cli.app import app, console, err_console
from muster.scheduler import PLACEMENT_POLICIES

__all__ = ["parse_seeds", "sim_app"]

sim_app = typer.Typer(
    name="sim", help="Replay real workload traces through the scheduler core.", no_args_is_help=True
)
app.add_typer(sim_app)

FGD_POLICIES = "random,dotprod,gpu-clustering,gpu-packing,bestfit,fgd"
T = TypeVar("T")


class Output(StrEnum):
    table = "table"
    json = "json"


# options every sim command has
JOBS = typer.Option(1, min=1, help="Worker processes (one run each at a time).")
OUT = typer.Option(Path("sim-results"), help="Directory for the CSV, PNG and Markdown reports.")
TRACE_DIR = typer.Option(None, help="Traces root (default MUSTER_TRACES_DIR or ../shared/traces).")
OUTPUT = typer.Option(Output.table, "-o", "--output", help="table (default) or json.")


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45`` or a mix (``42-44,50``) -> sorted distinct seeds."""
    seeds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise typer.BadParameter(
                f"{part!r} is not a seed or a range like 42-51", param_hint="--seeds"
            ) from None
        if b < a:
            raise typer.BadParameter(f"range {part!r} runs backwards; write {b}-{a}", param_hint="--seeds")
        seeds.update(range(a, b + 1))
    if not seeds:
        raise typer.BadParameter("give at least one seed, e.g. 42 or 42-51", param_hint="--seeds")
    return sorted(seeds)


def parse_policies(text: str, known: tuple[str, ...], hint: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    bad = [p for p in names if p not in known]
    if bad or not names:
        raise typer.BadParameter(
            f"unknown {', '.join(repr(b) for b in bad) or 'empty list'}; choose from {', '.join(known)}",
            param_hint=hint,
        )
    return names


@sim_app.command("openb")
def openb_cmd(
    nodes: str = typer.Option(
        "openb_node_list_gpu_node", help="Node list: a file name in alibaba-gpu-v2023/csv or a path."
    ),
    pods: str = typer.Option(
        "openb_pod_list_default", help="Pod list: a file name in alibaba-gpu-v2023/csv or a path."
    ),
    policy: str = typer.Option(FGD_POLICIES, "--policy", help="Placement policies, comma-separated."),
    seeds: str = typer.Option("42-51", help="Seeds, e.g. 42-51 or 42,43."),
    ratio: float = typer.Option(1.3, min=0.01, help="Inflate arrivals to this multiple of GPU capacity."),
    coverage: float = typer.Option(0.95, min=0.01, max=1.0, help="Share of pods the typical pod set covers."),
    jobs: int = JOBS,
    out: Path = OUT,
    trace_dir: Path | None = TRACE_DIR,
    output: Output = OUTPUT,
) -> None:
    """FGD fill-up experiment (reference/perf.md §2.1): allocation and fragmentation as pods arrive.

    Pods are shuffled per seed, inflated to --ratio x GPU capacity by sampling with
    replacement, and placed one at a time by the scheduler core; failed pods are dropped.
    Prints the median allocation at 90/95/100/110/130% arrived (and the paper's numbers
    where they exist) and writes openb-<pods>.csv/.png/.md into --out.
    """
    from muster.sim.expected import load_expected
    from muster.sim.fillup_report import summary_json, terminal_table, write_reports
    from muster.sim.fillup_runs import OpenbSetup, load_workload, median_curves, run_all
    from muster.sim.traces import trace_dir as find_traces

    policies = parse_policies(policy, PLACEMENT_POLICIES, "--policy")
    seed_list = parse_seeds(seeds)
    root = _checked(lambda: find_traces(trace_dir))
    setup = OpenbSetup(root, nodes, pods, ratio, coverage)
    work = _checked(lambda: load_workload(setup))
    total = len(policies) * len(seed_list)
    with _progress(f"fill-up {setup.workload_name}", total) as advance:
        runs = run_all(
            setup,
            policies,
            seed_list,
            jobs,
            on_done=lambda r: advance(f"{r.policy} seed {r.seed}", 1.0),
            work=work,
        )
    medians = median_curves(runs)
    expected = load_expected(root, setup.workload_name, ratio) if setup.default_cluster else None
    report = write_reports(out, setup, runs, medians, expected)
    if output is Output.json:
        print(json.dumps(summary_json(runs, medians, expected)))
        return
    console.print(terminal_table(medians, expected, len(seed_list)))
    console.print(f"reports: {report} and its .csv and .png")


def _checked(fn: Callable[[], T]) -> T:
    """Run a loader; print a missing or malformed trace as errors and exit 2."""
    from muster.sim.traces import TraceNotFound

    try:
        return fn()
    except TraceNotFound as exc:
        err_console.print(str(exc))
        raise typer.Exit(2) from exc
    except InvalidObject as exc:
        for e in exc.errors:
            err_console.print(str(e))
        raise typer.Exit(2) from exc
    except ValueError as exc:
        err_console.print(str(exc))
        raise typer.Exit(2) from exc


@contextmanager
def _progress(what: str, total: int) -> Iterator[Callable[[str, float], None]]:
    """A progress bar on stderr; yields ``advance(description, steps)``."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console.rich(), transient=True) as bar:
        task = bar.add_task(what, total=total)

        def advance(now: str, steps: float) -> None:
            bar.update(task, advance=steps, description=f"{what}: {now}")

        yield advance


class Preemption(StrEnum):
    off = "off"
    on = "on"
    both = "both"


@sim_app.command("philly")
def philly_cmd(
    policy: str = typer.Option("fifo", "--policy", help="fifo, priority, fair; comma-separated to compare."),
    preemption: Preemption = typer.Option(Preemption.off, help="off, on, or both (each policy twice)."),
    checkpoint_interval: float = typer.Option(
        1800.0,
        min=0,
        help="Seconds between checkpoints; a preempted job loses what it ran since the last (0: all).",
    ),
    requeue_delay: float = typer.Option(
        30.0, min=0, help="Seconds a preempted job takes to stop before it requeues."
    ),
    nodes: int | None = typer.Option(
        None, min=1, help="Nodes (default 100, or 16 with --pollux; or the config's)."
    ),
    gpus_per_node: int | None = typer.Option(
        None, min=1, help="GPUs per node (default 8, or 4 with --pollux)."
    ),
    config: Path | None = typer.Option(
        None, help="YAML with cluster and queues (quotas); see docs/simulator.md."
    ),
    start_day: float = typer.Option(
        0.0, min=0, help="Replay from this many days after the first submission."
    ),
    days: float | None = typer.Option(None, min=0.001, help="Replay this many days (default: to the end)."),
    pollux: int = typer.Option(0, min=0, help="Sample this many jobs as Pollux does (e.g. 160) instead."),
    sample_seed: int = typer.Option(0, help="Seed of the --pollux sample."),
    interval: float = typer.Option(
        0.0, min=0, help="Scheduling period in seconds (0: a cycle at every event)."
    ),
    placement: str = typer.Option("binpack", help="Node placement policy of the scheduler core."),
    seed: int = typer.Option(0, help="Seed of the scheduler's tie-breaking."),
    trace: str = typer.Option("philly", help="Trace file: a name in philly/ or a path."),
    jobs: int = JOBS,
    out: Path = OUT,
    trace_dir: Path | None = TRACE_DIR,
    output: Output = OUTPUT,
) -> None:
    """Timed replay of Philly jobs: arrivals at submit times, virtual clusters as queues with quotas.

    Jobs run for their durations on identical GPU nodes; each virtual cluster is a
    ClusterQueue in one cohort (quotas from --config or each one's share of the GPU-time).
    Prints JCT, queueing delay, utilization and preemptions per policy and writes
    philly*.csv/.png/.md into --out.
    """
    from muster.sim.philly_report import Report, summary_json, terminal_table, write_reports
    from muster.sim.philly_runs import PhillySetup, load_inputs, run_variants
    from muster.sim.timed import POLICIES, ReplaySpec
    from muster.sim.traces import trace_dir as find_traces

    names = parse_policies(policy, POLICIES, "--policy")
    parse_policies(placement, PLACEMENT_POLICIES, "--placement")
    modes = {Preemption.off: [False], Preemption.on: [True], Preemption.both: [False, True]}[preemption]
    specs = [
        ReplaySpec(p, m, checkpoint_interval, requeue_delay, interval, placement, seed)
        for p in names
        for m in modes
    ]
    root = _checked(lambda: find_traces(trace_dir))
    setup = PhillySetup(root, trace, config, nodes, gpus_per_node, start_day, days, pollux, sample_seed)
    inputs = _checked(lambda: load_inputs(setup))
    described = {
        "jobs": len(inputs.jobs),
        "cluster": f"{inputs.cluster.nodes} nodes x {inputs.cluster.gpus_per_node} GPUs",
        "quotas": "from " + config.name if config else "derived from GPU-time shares",
        "checkpoint interval s": checkpoint_interval,
        "requeue delay s": requeue_delay,
        "scheduling": f"every {interval:g} s" if interval else "at every event",
        "placement": placement,
    }
    if pollux:
        described["sample"] = f"Pollux-style, {pollux} jobs, seed {sample_seed}"
    elif start_day or days:
        described["window"] = (
            f"days {start_day:g} to {start_day + days:g}" if days else f"from day {start_day:g}"
        )
    with _progress("philly replay", len(specs)) as advance:
        results = run_variants(
            setup,
            specs,
            jobs,
            on_done=lambda r: advance(r.spec.name, 1.0),
            inputs=inputs,
            on_progress=lambda spec, share: advance(f"{spec.name} {share:.0%}", 0.0),
        )
    report = Report(results)
    stem = "philly-pollux" if pollux else "philly"
    paths = write_reports(out, stem, report, described)
    if output is Output.json:
        print(json.dumps(summary_json(report, described)))
        return
    console.print(terminal_table(report))
    console.print(f"reports: {paths[0]} and {len(paths) - 1} more in {out}")
