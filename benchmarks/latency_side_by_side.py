"""Idle submit-to-running latency of two (or more) versions of Muster, side by side.

Whole runs of ``e2e_throughput.py`` one after the other swing by more than a few milliseconds
on a shared VM (the same code gave a p50 of 40 to 69 ms within an hour here), so this script
runs one ``muster up --fake-gpus 8`` per version at the same time, on the same store kind, and
submits the jobs alternately, one at a time: every version sees the same noise. Each job is one
pod that writes its start time (``date +%s.%N``); its latency is that time minus the moment
just before the client's apply, as in ``e2e_throughput.py``. ``--burst N`` first runs N one-pod
``true`` jobs on each server (a server that has just done work: finished pods kept, a cost
record per pod, full resyncs over them).

A version is a checkout of this repository: its directory goes first on that server's
``PYTHONPATH``, so the installed environment serves them all::

    git worktree add /tmp/base HEAD~3
    .venv/bin/python benchmarks/latency_side_by_side.py --tree base=/tmp/base --tree new=. \\
        [--store sqlite|postgresql] [--jobs 60] [--burst 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from muster.sdk.client import Client
from muster.testing.factories import training_job
from muster.testing.postgres import PostgresServer, start_postgres
from muster.testing.up import MusterUp

_WARM_UP = 3  # jobs per server not counted (first imports, first forks)
Server = tuple[str, MusterUp, Client, Path]  # label, process, client, where its jobs mark their start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a checkout (repeat)")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=60, help="latency jobs per server")
    parser.add_argument("--burst", type=int, default=0, help="one-pod true jobs run first on each server")
    args = parser.parse_args()
    trees = [parse_tree(t) for t in args.tree]
    postgres = start_postgres() if args.store == "postgresql" else None
    servers: list[Server] = []
    try:
        for label, root in trees:
            servers.append(_start(label, root, postgres))
        for _label, _up, client, _marks in servers:
            _burst(client, args.burst)
        latencies: dict[str, list[float]] = {label: [] for label, _ in trees}
        for i in range(args.jobs + _WARM_UP):
            for label, _up, client, marks in servers:
                took = _one(client, marks, f"lat-{i:04d}")
                if i >= _WARM_UP:
                    latencies[label].append(took)
        print(f"\n{args.store}: {args.jobs} jobs per server, alternating; burst {args.burst}")
        for label, values in latencies.items():
            values.sort()
            print(
                f"{label:12s} p50 {statistics.median(values):7.1f} ms   p90 {_pct(values, 0.9):7.1f} ms   "
                f"p99 {_pct(values, 0.99):7.1f} ms"
            )
    finally:
        for _label, up, client, _marks in servers:
            client.close()
            up.stop()
        if postgres is not None:
            postgres.stop()


def parse_tree(text: str) -> tuple[str, str]:
    """``LABEL=PATH`` of a checkout of this repository, as (label, absolute path)."""
    label, sep, path = text.partition("=")
    root = Path(path).resolve()
    if not sep or not (root / "muster" / "__init__.py").is_file():
        raise SystemExit(f"--tree {text!r}: give LABEL=PATH of a checkout of this repository")
    return label, str(root)


def up_from(root: str, home: Path, postgres: PostgresServer | None) -> MusterUp:
    """``muster up --fake-gpus 8`` of the checkout at ``root`` (first on its ``PYTHONPATH``),
    on SQLite in ``home`` or on a new database of ``postgres``, started."""
    url = postgres.create_database() if postgres is not None else f"sqlite:///{home}/muster.db"
    os.environ["PYTHONPATH"] = root  # MusterUp passes this process's environment on
    try:
        up = MusterUp(home, extra_args=["--fake-gpus", "8", "--log-level", "warning", "--store", url])
        up.start(timeout=120)
    finally:
        del os.environ["PYTHONPATH"]
    return up


def _start(label: str, root: str, postgres: PostgresServer | None) -> Server:
    home = Path(tempfile.mkdtemp(prefix=f"muster-{label}-"))
    up = up_from(root, home, postgres)
    marks = home / "marks"
    marks.mkdir()
    return label, up, Client(up.url, up.token, timeout=60), marks


def _burst(client: Client, jobs: int) -> None:
    for first in range(0, jobs, 100):
        client.apply([_job(f"burst-{i:05d}", ["true"]) for i in range(first, min(jobs, first + 100))])
    deadline = time.monotonic() + 600
    while sum(1 for j in client.list("TrainingJob")["items"] if _done(j)) < jobs:
        if time.monotonic() > deadline:
            raise SystemExit(f"the burst of {jobs} jobs did not finish in 10 minutes")
        time.sleep(0.5)


def _one(client: Client, marks: Path, name: str) -> float:
    mark = marks / name
    started = time.time()
    client.apply([_job(name, ["sh", "-c", f"date +%s.%N > {mark}"])])
    deadline = time.monotonic() + 60
    while not (mark.exists() and mark.read_text().strip()):
        if time.monotonic() > deadline:
            raise SystemExit(f"job {name} did not start in 60 s")
        time.sleep(0.001)
    took = (float(mark.read_text()) - started) * 1000
    while not _done(client.get("TrainingJob", name, "default")):  # the next job finds it idle
        if time.monotonic() > deadline:
            raise SystemExit(f"job {name} did not finish in 60 s")
        time.sleep(0.02)
    return took


def _job(name: str, command: list[str]) -> dict[str, Any]:
    return training_job(name, workers=1, command=command, gpus=1, restart_policy="Never", image=None)


def _done(job: dict[str, Any]) -> bool:
    return any(
        c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p * len(values)))]


if __name__ == "__main__":
    main()
