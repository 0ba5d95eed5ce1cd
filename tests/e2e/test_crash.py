"""Crash safety under load: the server is SIGKILLed at random moments of a 500-job burst, and
every job it accepted still runs exactly once and finishes.

Each job's one process appends a line to a file named after the job, so a job started twice
(a start lost and repeated, a pod re-created) shows as two lines. The burst goes in while the
server is killed and started again; a batch whose request failed is sent again once a server
answers (apply is idempotent: what was stored is unchanged, the rest is created). The kill
moments are drawn from a seeded generator; the seed is in every failure message
(``MUSTER_CRASH_SEED`` replays one).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from muster.sdk.client import Client
from muster.sdk.errors import ApiError
from muster.sdk.http import TransportError
from muster.testing import wait_for
from muster.testing.factories import training_job
from muster.testing.up import MusterUp
from tests.e2e.jobs import clean_up

# 500 short jobs through real processes and three restarts: longer than the suite's default.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

JOBS = 500
BATCH = 25
GPUS = 8
KILLS = 3


def test_sigkill_during_a_burst_loses_no_job_and_runs_none_twice(muster_home: Path, tmp_path: Path):
    seed = int(os.environ.get("MUSTER_CRASH_SEED") or time.time_ns() % 1_000_000)
    rng = random.Random(seed)
    marks = tmp_path / "marks"
    marks.mkdir()
    batches = [[_job(i, marks) for i in range(b, min(JOBS, b + BATCH))] for b in range(0, JOBS, BATCH)]
    up = MusterUp(muster_home, extra_args=["--fake-gpus", str(GPUS), "--log-level", "warning"]).start()
    submitter = _Submitter(up, batches)
    submitter.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 4.0))  # somewhere in the burst: submitting, starting, ending
            assert up.proc is not None
            os.kill(up.proc.pid, signal.SIGKILL)
            up.proc.wait(timeout=10)
            up.proc = None
            up.start(timeout=120)  # same home, port and database: it re-adopts what runs
        submitter.join(timeout=300)
        assert not submitter.is_alive(), f"seed {seed}: the burst was not accepted in time"
        with Client(up.url, up.token, timeout=60) as client:
            try:
                wait_for(lambda: _finished(client) >= JOBS, timeout=600, interval=1.0, what="the jobs")
            except TimeoutError:
                jobs = client.list("TrainingJob")["items"]
                stuck = [j for j in jobs if _state(j) not in ("Succeeded", "Failed")]
                raise AssertionError(
                    f"seed {seed}: {len(stuck)} of {len(jobs)} jobs unfinished after 600 s: "
                    + "; ".join(_why(client, j) for j in stuck[:5])
                ) from None
            jobs = client.list("TrainingJob")["items"]
            failed = [j for j in jobs if _state(j) != "Succeeded"]
            assert len(jobs) == JOBS and not failed, f"seed {seed}: not succeeded: " + "; ".join(
                _why(client, j) for j in failed[:5]
            )
            runs = {p.name: len(p.read_text().splitlines()) for p in marks.iterdir()}
            assert sorted(runs) == sorted(j["metadata"]["name"] for j in jobs), f"seed {seed}"
            twice = {name: n for name, n in runs.items() if n != 1}
            assert not twice, f"seed {seed}: jobs that ran more than once: {twice}"
            clean_up(client)
    finally:
        submitter.stop()
        up.stop()


class _Submitter(threading.Thread):
    """Sends every batch, each until a server accepts it (a refused or cut request is sent again
    once a server answers)."""

    def __init__(self, up: MusterUp, batches: list[list[dict[str, Any]]]) -> None:
        super().__init__(name="burst", daemon=True)
        self.up = up
        self.batches = batches
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)

    def run(self) -> None:
        for batch in self.batches:
            while not self._halt.is_set():
                try:
                    with Client(self.up.url, self.up.token, timeout=30) as client:
                        client.apply(batch)
                    break
                except (TransportError, ApiError, AssertionError, OSError):
                    self._halt.wait(0.2)  # the server is down (or starting): try again


def _job(i: int, marks: Path) -> dict[str, Any]:
    name = f"burst-{i:04d}"
    command = ["sh", "-c", f"echo $$ >> {marks / name}"]
    return training_job(name, command=command, gpus=1, restart_policy="Never", image=None)


def _finished(client: Client) -> int:
    return sum(1 for j in client.list("TrainingJob")["items"] if _state(j) in ("Succeeded", "Failed"))


def _state(job: dict[str, Any]) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Succeeded", "Failed") and c["status"] == "True":
            return c["type"]
    return ""


def _why(client: Client, job: dict[str, Any]) -> str:
    """A failed job's conditions and its pods' last states, so a failure names its cause."""
    name = job["metadata"]["name"]
    conditions = [
        f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}"
        for c in (job.get("status") or {}).get("conditions") or []
    ]
    pods = [
        f"{p['metadata']['name']} {(p.get('status') or {}).get('phase')} "
        f"{(p.get('status') or {}).get('reason', '')} {(p.get('status') or {}).get('message', '')}"
        for p in client.list("Pod")["items"]
        if p["metadata"].get("labels", {}).get("muster.dev/job-name") == name
    ]
    return f"{name}: {conditions} pods {pods}"
