"""End to end through the whole control plane, side by side with Slurm.

Muster runs as ``muster up --fake-gpus 8`` (a process of its own, on SQLite and on a throwaway
PostgreSQL); Slurm as slurmctld + slurmd + munged from Debian's packages on this host, with 8
GPUs declared as gres and no device files (benchmarks/slurm_local.py writes the config and
starts and stops the daemons; without Slurm installed its column is skipped, saying why).
Every figure is measured on each system in turn, repetition after repetition (interleaved),
with the same jobs:

* throughput: N one-pod ``true`` jobs (1 GPU each) submitted at once (Muster: apply requests of
  ``--batch`` jobs; Slurm: one job array), first submission to last completion, seen by the
  client (a watch for Muster, ``squeue`` every 0.1 s for Slurm);
* CPU per job: CPU seconds the daemons spent during the throughput run, with everything they
  started and reaped (Muster's server with its shims and the jobs; slurmctld and slurmd with
  slurmstepd and the jobs), divided by N: what bounds throughput on a busy machine;
* host CPU stolen: the share of the machine's CPU time its hypervisor gave to other guests
  during the throughput run (``/proc/stat``'s steal; 0 on bare metal). On a shared virtual
  machine the same code's throughput varies with it by a third and more, so compare runs
  only where it was low;
* idle latency: one job at a time on the idle cluster (``--latency-jobs``), submit (just
  before the client call: the SDK's request, the ``sbatch`` command) to the moment the job's
  process wrote its start time (``date +%s.%N``), p50 and p99;
* gang: a ``--gang-size``-replica job (1 GPU per replica; Slurm: ``-n 4 --gres=fakegpu:4``
  with ``srun``), submit to the last replica's start time, p50 over ``--gang-runs``.

Then the Muster/Slurm ratio of each figure (above 1: Muster takes longer, or gets less done
for throughput).

    .venv/bin/python benchmarks/e2e_throughput.py [--jobs 1000] [--reps 2] [--stores sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cpu_meter import CpuMeter, HostSteal
from slurm_local import GRES, LocalSlurm, SlurmUnavailable

from muster.sdk.client import Client
from muster.testing.factories import training_job
from muster.testing.postgres import PostgresServer, PostgresUnavailable, start_postgres
from muster.testing.up import MusterUp

Figures = dict[str, float]
THROUGHPUT = "throughput (jobs/s)"
STOLEN = "host CPU stolen (%)"  # the run's conditions, not a figure of the system: no ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the throughput run")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="Muster: jobs per apply request")
    parser.add_argument("--latency-jobs", type=int, default=100)
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--gang-runs", type=int, default=10)
    parser.add_argument("--reps", type=int, default=2, help="repetitions, interleaved across systems")
    parser.add_argument("--stores", default="sqlite,postgresql", help="Muster stores: sqlite, postgresql")
    parser.add_argument("--no-slurm", action="store_true", help="Muster only")
    args = parser.parse_args()

    with _systems(args) as systems:
        results: dict[str, list[Figures]] = {name: [] for name in systems}
        for rep in range(args.reps):
            for name, run in systems.items():
                print(f"repetition {rep + 1}/{args.reps}: {name} ...", flush=True)
                results[name].append(run(args))
    _report(args, results)


@contextmanager
def _systems(args: argparse.Namespace) -> Iterator[dict[str, Callable[[argparse.Namespace], Figures]]]:
    systems: dict[str, Callable[[argparse.Namespace], Figures]] = {}
    postgres: PostgresServer | None = None
    slurm: LocalSlurm | None = None
    try:
        for store in args.stores.split(","):
            store = store.strip()
            if store == "postgresql":
                try:
                    postgres = start_postgres()
                except PostgresUnavailable as exc:
                    print(f"muster-postgresql skipped: {exc}")
                    continue
                pg = postgres
                systems["muster-postgresql"] = lambda a, pg=pg: _muster(a, pg.create_database())
            elif store == "sqlite":
                systems["muster-sqlite"] = lambda a: _muster(a, None)
            else:
                raise SystemExit(f"unknown store {store!r}: use sqlite or postgresql")
        if not args.no_slurm:
            try:
                slurm = LocalSlurm(gpus=args.gpus).start()
            except SlurmUnavailable as exc:
                print(f"slurm skipped: {exc}")
            else:
                systems["slurm"] = lambda a, s=slurm: _slurm(a, s)
        yield systems
    finally:
        if slurm is not None:
            slurm.stop()
        if postgres is not None:
            postgres.stop()


# -- Muster --------------------------------------------------------------------------------


def _muster(args: argparse.Namespace, store_url: str | None) -> Figures:
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        home = Path(tmp)
        store = store_url or f"sqlite:///{home}/muster.db"
        extra = ["--fake-gpus", str(args.gpus), "--log-level", "warning", "--store", store]
        meter = CpuMeter("muster")
        with MusterUp(home, extra_args=extra) as up, Client(up.url, up.token, timeout=120) as client:
            assert up.proc is not None
            meter.add(up.proc.pid)  # its shims and their jobs are born into the meter's cgroup
            figures = muster_throughput(args, client, meter)
            marks = home / "marks"
            marks.mkdir()
            latencies = []
            for i in range(args.latency_jobs):
                name = f"lat-{i:04d}"
                started = time.time()
                client.apply([_job(name, ["sh", "-c", f"date +%s.%N > {marks / name}"])])
                latencies.append(_wait_mark(marks / name) - started)
                _wait_job(client, name)
            figures.update(_latency("latency", latencies))
            gangs = []
            for i in range(args.gang_runs):
                name = f"gang-{i:03d}"
                cmd = ["sh", "-c", f'date +%s.%N > {marks}/{name}-"$RANK"']
                started = time.time()
                client.apply([_job(name, cmd, replicas=args.gang_size)])
                gangs.append(max(_wait_mark(marks / f"{name}-{r}") for r in range(args.gang_size)) - started)
                _wait_job(client, name)
            figures["gang p50 (s)"] = statistics.median(gangs)
        meter.close()
    return figures


def muster_throughput(args: argparse.Namespace, client: Client, meter: CpuMeter) -> Figures:
    """``args.jobs`` one-pod ``true`` jobs applied ``args.batch`` at a time through ``client``:
    jobs/s from the first apply to the last job finished (seen on a watch), the CPU ``meter``
    counted per job, and the host's steal meanwhile (also benchmarks/throughput_ab.py's run)."""
    names = [f"job-{i:05d}" for i in range(args.jobs)]
    done = threading.Event()
    finished: set[str] = set()
    since = client.list("TrainingJob")["metadata"]["resourceVersion"]
    stream = client.watch("TrainingJob", resource_version=since)

    def follow() -> None:
        for event in stream:
            obj = event["object"]
            if _state(obj):
                finished.add(obj["metadata"]["name"])
                if len(finished) >= args.jobs:
                    done.set()
                    return

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    cpu = meter.seconds()
    steal = HostSteal()
    started = time.time()
    for first in range(0, args.jobs, args.batch):
        client.apply([_job(n, ["true"]) for n in names[first : first + args.batch]])
    if not done.wait(3600):
        raise SystemExit(f"only {len(finished)} of {args.jobs} jobs finished in an hour")
    wall = time.time() - started
    cpu = meter.seconds() - cpu
    stream.close()
    failed = sum(1 for j in client.list("TrainingJob")["items"] if _state(j) == "Failed")
    if failed:
        print(f"  warning: {failed} jobs failed")
    return {
        THROUGHPUT: args.jobs / wall,
        "CPU per job (ms)": 1000 * cpu / args.jobs,
        STOLEN: steal.percent() or 0.0,
    }


def _job(name: str, command: list[str], replicas: int = 1) -> dict[str, Any]:
    return training_job(name, workers=replicas, command=command, gpus=1, restart_policy="Never", image=None)


def _wait_job(client: Client, name: str) -> None:
    deadline = time.monotonic() + 120
    while not _state(client.get("TrainingJob", name, "default")):
        if time.monotonic() > deadline:
            raise SystemExit(f"job {name} did not finish in 120 s")
        time.sleep(0.02)


def _state(job: dict[str, Any]) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Succeeded", "Failed") and c["status"] == "True":
            return c["type"]
    return ""


# -- Slurm --------------------------------------------------------------------------------


def _slurm(args: argparse.Namespace, slurm: LocalSlurm) -> Figures:
    marks = Path(tempfile.mkdtemp(prefix="muster-slurm-marks-"))
    try:
        cpu = slurm.meter.seconds()
        steal = HostSteal()
        started = time.time()
        array = f"--array=0-{args.jobs - 1}"
        slurm.run(["sbatch", array, f"--gres={GRES}:1", "-c1", "-o", "/dev/null", "--wrap", "true"])
        while slurm.active_jobs():
            time.sleep(0.1)
        wall = time.time() - started
        cpu = slurm.meter.seconds() - cpu
        figures: Figures = {
            THROUGHPUT: args.jobs / wall,
            "CPU per job (ms)": 1000 * cpu / args.jobs,
            STOLEN: steal.percent() or 0.0,
        }
        latencies = []
        for i in range(args.latency_jobs):
            mark = marks / f"lat-{i:04d}"
            started = time.time()
            wrap = f"date +%s.%N > {mark}"
            slurm.run(["sbatch", f"--gres={GRES}:1", "-c1", "-o", "/dev/null", "--wrap", wrap])
            latencies.append(_wait_mark(mark) - started)
            _wait_idle(slurm)
        figures.update(_latency("latency", latencies))
        gangs = []
        n = args.gang_size
        for i in range(args.gang_runs):
            stem = marks / f"gang-{i:03d}"
            wrap = f"srun -n {n} sh -c 'date +%s.%N > {stem}-$SLURM_PROCID'"
            started = time.time()
            slurm.run(["sbatch", f"-n{n}", f"--gres={GRES}:{n}", "-c1", "-o", "/dev/null", "--wrap", wrap])
            gangs.append(max(_wait_mark(Path(f"{stem}-{r}")) for r in range(n)) - started)
            _wait_idle(slurm)
        figures["gang p50 (s)"] = statistics.median(gangs)
        return figures
    finally:
        shutil.rmtree(marks, ignore_errors=True)


def _wait_idle(slurm: LocalSlurm) -> None:
    deadline = time.monotonic() + 120
    while slurm.active_jobs():
        if time.monotonic() > deadline:
            raise SystemExit("a Slurm job did not finish in 120 s")
        time.sleep(0.02)


# -- shared ----------------------------------------------------------------------------------


def _wait_mark(path: Path, timeout: float = 120) -> float:
    """The start time a job's process wrote into ``path`` (waited for)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            text = path.read_text().strip()
            if text:
                return float(text)
        except (FileNotFoundError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} was not written in {timeout:.0f} s")
        time.sleep(0.002)  # the client's own poll of a file: cheap, and a small error


def _latency(name: str, values: list[float]) -> Figures:
    values = sorted(values)
    return {f"{name} p50 (ms)": 1000 * _pct(values, 50), f"{name} p99 (ms)": 1000 * _pct(values, 99)}


def _pct(values: list[float], p: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


def _report(args: argparse.Namespace, results: dict[str, list[Figures]]) -> None:
    print(
        f"\n{args.jobs} one-pod `true` jobs, {args.gpus} GPUs, {args.latency_jobs} idle-latency jobs, "
        f"{args.gang_runs} gangs of {args.gang_size}; median of {args.reps} interleaved repetitions"
    )
    figures = list(next(iter(results.values()))[0]) if results else []
    names = list(results)
    print(f"{'figure':<22}" + "".join(f"{n:>20}" for n in names))
    medians = {n: {f: statistics.median(r[f] for r in results[n]) for f in figures} for n in names}
    for f in figures:
        print(f"{f:<22}" + "".join(f"{medians[n][f]:>20.2f}" for n in names))
    if "slurm" in medians:
        print("\nMuster/Slurm (time-like figures: above 1 is slower; throughput: below 1 is slower)")
        for n in names:
            if n == "slurm":
                continue
            ratios = ", ".join(
                f"{f} {medians[n][f] / medians['slurm'][f]:.2f}" for f in figures if f != STOLEN
            )
            print(f"  {n}: {ratios}")


if __name__ == "__main__":
    main()
