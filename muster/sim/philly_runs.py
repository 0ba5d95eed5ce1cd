"""Setting up and running Philly replays: which jobs, which cluster and queues, which policies.

The jobs are the whole of ``philly.csv``, a window of days of it, or a Pollux-style sample
(``pollux``: that many jobs; the cluster then defaults to Pollux's 16 nodes x 4 GPUs). Jobs
asking for more GPUs than the cluster has are left out of the replay and counted. Each
:class:`~muster.sim.timed.ReplaySpec` is one independent replay; several run in worker
processes (:mod:`muster.sim.pool`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from muster.sim.philly import PhillyJobs, load_philly, philly_path, pollux_sample
from muster.sim.philly_config import ClusterConfig, QueueConfig, ReplayConfig, load_config, queue_configs
from muster.sim.pool import run_items
from muster.sim.timed import ReplayResult, ReplaySpec, TimedReplay

__all__ = ["POLLUX_CLUSTER", "PhillyInputs", "PhillySetup", "load_inputs", "run_variants"]

POLLUX_CLUSTER = ClusterConfig(nodes=16, gpus_per_node=4)


@dataclass(frozen=True, slots=True)
class PhillySetup:
    """Where the jobs come from and what they run on. ``nodes``/``gpus_per_node`` override
    the config file's cluster; ``days`` None means to the end of the trace."""

    trace_root: Path
    trace: str = "philly"
    config: Path | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    start_day: float = 0.0
    days: float | None = None
    pollux: int = 0
    sample_seed: int = 0


@dataclass(slots=True)
class PhillyInputs:
    jobs: PhillyJobs
    cluster: ClusterConfig
    queues: list[QueueConfig]
    trace_jobs: int  # in the trace before windowing and sampling


def load_inputs(setup: PhillySetup) -> PhillyInputs:
    """Load the trace and config, select the jobs, settle the cluster and the queues (raises
    ``InvalidObject``, ``TraceNotFound`` or ValueError with what to change)."""
    all_jobs = load_philly(philly_path(setup.trace_root, setup.trace))
    jobs = all_jobs.window(setup.start_day, setup.days) if (setup.start_day or setup.days) else all_jobs
    if setup.pollux:
        jobs = pollux_sample(jobs, setup.pollux, seed=setup.sample_seed)
    if not len(jobs):
        raise ValueError("no jobs in the chosen window; widen --days or move --start-day")
    cfg = load_config(setup.config) if setup.config else ReplayConfig()
    base = cfg.cluster if ("cluster" in cfg.model_fields_set or not setup.pollux) else POLLUX_CLUSTER
    cluster = base.model_copy(
        update={
            k: v for k, v in (("nodes", setup.nodes), ("gpus_per_node", setup.gpus_per_node)) if v is not None
        }
    )
    cfg = cfg.model_copy(update={"cluster": cluster})
    source = setup.config.name if setup.config else "config"
    queues = queue_configs(cfg, jobs.queues, jobs.gpu_seconds_by_queue(), source)
    return PhillyInputs(jobs, cluster, queues, len(all_jobs))


def run_variants(
    setup: PhillySetup,
    specs: Sequence[ReplaySpec],
    jobs: int = 1,
    on_done: Callable[[ReplayResult], None] | None = None,
    inputs: PhillyInputs | None = None,
    on_progress: Callable[[ReplaySpec, float], None] | None = None,
) -> list[ReplayResult]:
    """One replay per spec, returned in the order given. ``on_progress`` hears how far each
    replay is (share of arrivals) when they run in this process (``jobs`` 1)."""
    out: list[ReplayResult] = []
    if jobs <= 1 and on_progress is not None:
        data = inputs if inputs is not None else load_inputs(setup)

        def one(spec: ReplaySpec) -> ReplayResult:
            replay = TimedReplay(data.jobs, data.cluster, data.queues, spec)
            return replay.run(progress=lambda share: on_progress(spec, share))

        results = (one(spec) for spec in specs)
    else:
        results = run_items(setup, list(specs), load_inputs, _run_spec, jobs, inputs=inputs)
    for r in results:
        out.append(r)
        if on_done:
            on_done(r)
    rank = {s: i for i, s in enumerate(specs)}
    out.sort(key=lambda r: rank[r.spec])
    return out


def _run_spec(inputs: PhillyInputs, setup: PhillySetup, spec: ReplaySpec) -> ReplayResult:
    return TimedReplay(inputs.jobs, inputs.cluster, inputs.queues, spec).run()
