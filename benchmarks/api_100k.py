"""The API and a restart with 100,000 stored jobs, on SQLite and on PostgreSQL.

The store is filled with what 100,000 finished one-pod jobs leave behind: each job (Succeeded),
its Workload (Finished), an Event and its pod's cost-ledger UsageRecord, copied from a real
job that ran through ``muster up`` first (so the objects have the controllers' shapes and
sizes), with fresh names and uids. Finished pods are not among them: beyond
``MUSTER_FINISHED_POD_LIMIT`` they are collected.
Then ``muster up --fake-gpus 8`` starts on that store, and the script prints:

* restart: process start to ``/readyz``, and to a job submitted right then running (the
  manager's cache filled and its first full pass done);
* list all jobs over HTTP, parsed: in one request (``chunk_size=0``, the list before paging) and
  paged 500 at a time (what ``Client.list`` and ``muster get`` do now), and the first page of
  500 alone (``limit=500``: what a paged list's first screen costs); get, watch-resume (a
  watch from a revision 100 changes back: time to its first event) and ``why``
  (``GET /api/v1/why``) latency, p50 and p99; ``muster doctor`` (``GET /api/v1/doctor``), p50;
* the server's resident memory (VmRSS) after all that.

    .venv/bin/python benchmarks/api_100k.py [--jobs 100000] [--stores sqlite,postgresql] [--list-reps 5]
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from muster.sdk.client import Client
from muster.store import open_store
from muster.store.events import events_for
from muster.testing.factories import training_job
from muster.testing.postgres import PostgresUnavailable, start_postgres
from muster.testing.up import MusterUp

Obj = dict[str, Any]
_BATCH = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--samples", type=int, default=200, help="gets and whys measured")
    parser.add_argument("--list-reps", type=int, default=5, help="whole lists measured, each way")
    args = parser.parse_args()
    for store in args.stores.split(","):
        store = store.strip()
        with tempfile.TemporaryDirectory(prefix="muster-100k-") as tmp:
            if store == "sqlite":
                _run(args, "sqlite", f"sqlite:///{tmp}/muster.db", Path(tmp))
                continue
            try:
                pg = start_postgres()
            except PostgresUnavailable as exc:
                print(f"postgresql skipped: {exc}")
                continue
            try:
                _run(args, "postgresql", pg.create_database(), Path(tmp))
            finally:
                pg.stop()


def _run(args: argparse.Namespace, label: str, url: str, tmp: Path) -> None:
    template = _template(tmp / "template")
    started = time.perf_counter()
    _fill(url, template, args.jobs)
    filled = time.perf_counter() - started
    store = open_store(url)
    counts = store.counts()
    store.close()
    total = sum(counts.values())
    print(f"\n{label}: {total} objects stored ({counts}) in {filled:.0f} s")

    home = tmp / "home"
    extra = ["--fake-gpus", "8", "--log-level", "warning", "--store", url]
    t0 = time.perf_counter()
    up = MusterUp(home, extra_args=extra).start(timeout=600)
    ready = time.perf_counter() - t0
    try:
        with Client(up.url, up.token, timeout=600) as client:
            client.apply([_job("after-restart")])
            _wait(lambda: _phase(client, "after-restart") in ("Running", "Succeeded"), 600)
            running = time.perf_counter() - t0
            _print(label, "restart: to ready", ready, "s")
            _print(label, "restart: to a new job running", running, "s")
            names = [f"bench-{i:06d}" for i in random.Random(1).sample(range(args.jobs), args.samples)]
            _lists(label, client, args.list_reps, args.samples)
            _pcts(
                label,
                "get a job",
                [_timed(lambda n=n: client.get("TrainingJob", n, "default")) for n in names],
            )
            _pcts(label, "watch resume (first event)", [_watch_resume(client) for _ in range(20)])
            whys = [_timed(lambda n=n: client.view(f"why/TrainingJob/default/{n}")) for n in names[:50]]
            _pcts(label, "why a job", whys)
            doctors = [_timed(lambda: client.view("doctor")) for _ in range(args.list_reps)]
            _pcts(label, "doctor", doctors)
            assert up.proc is not None
            _print(label, "server RSS", _rss(up.proc.pid) / 2**20, "MiB")
    finally:
        up.stop()


def _lists(label: str, client: Client, reps: int, samples: int) -> None:
    """The whole list in one request and in pages of 500 (interleaved), and the first page alone."""
    whole, paged = [], []
    for _ in range(reps):
        whole.append(_timed(lambda: client.list("TrainingJob", chunk_size=0)))
        paged.append(_timed(lambda: client.list("TrainingJob", chunk_size=500)))
    _pcts(label, "list all jobs, one request", whole)
    _pcts(label, "list all jobs, pages of 500", paged)
    first = [_timed(lambda: next(client.list_pages("TrainingJob", limit=500))) for _ in range(samples)]
    _pcts(label, "list: first page (limit 500)", first)


def _template(home: Path) -> tuple[Obj, Obj, list[Obj], Obj]:
    """A job that really ran: its stored job, Workload, Events and its pod's UsageRecord."""
    up = MusterUp(home, extra_args=["--fake-gpus", "1", "--log-level", "warning"]).start(timeout=600)
    try:
        with Client(up.url, up.token) as client:
            client.apply([_job("template")])
            _wait(lambda: _phase(client, "template") == "Succeeded", 600)
    finally:
        up.stop()
    store = open_store(f"sqlite:///{home}/muster.db")
    try:
        job = store.get("TrainingJob", "template", "default")
        wl = store.get("Workload", "template", "default")
        events = events_for(store, job)
        usage = next(r for r in store.list("UsageRecord").items if r["spec"].get("job") == "template")
    finally:
        store.close()
    return job, wl, events, usage


def _fill(url: str, template: tuple[Obj, Obj, list[Obj], Obj], jobs: int) -> None:
    job, wl, events, usage = template
    store = open_store(url)
    try:
        for first in range(0, jobs, _BATCH):
            batch = store.batch()  # type: ignore[attr-defined]
            for i in range(first, min(jobs, first + _BATCH)):
                name = f"bench-{i:06d}"
                stored = batch.create(_renamed(job, name))
                w = _renamed(wl, name)
                w["metadata"]["ownerReferences"][0].update(name=name, uid=stored["metadata"]["uid"])
                batch.create(w)
                for e in events[-1:]:  # its last Event (Succeeded)
                    ev = copy.deepcopy(e)
                    ev["metadata"] = {"name": f"{name}.{i:x}", "namespace": "default"}
                    ev["involvedObject"] = {
                        **ev["involvedObject"],
                        "name": name,
                        "uid": stored["metadata"]["uid"],
                    }
                    batch.create(ev)
                rec = copy.deepcopy(usage)
                uid = f"{i:08x}-0000-4000-8000-000000000000"
                rec["metadata"] = {"name": f"pod-{uid}"}
                rec["spec"].update(uid=uid, job=name, name=f"{name}-worker-0")
                batch.create(rec)
            batch.commit()
    finally:
        store.close()


def _renamed(obj: Obj, name: str) -> Obj:
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    out["metadata"] = {
        k: v for k, v in meta.items() if k in ("namespace", "labels", "annotations", "ownerReferences")
    }
    out["metadata"]["name"] = name
    labels = out["metadata"].get("labels")
    if labels:
        for key, value in list(labels.items()):
            if value == "template":
                labels[key] = name
    return out


def _watch_resume(client: Client) -> float:
    rv = int(client.list("PriorityClass")["metadata"]["resourceVersion"])
    started = time.perf_counter()
    stream = client.watch("TrainingJob", resource_version=str(max(0, rv - 100)), timeout=30)
    try:
        next(iter(stream))
    finally:
        stream.close()
    return time.perf_counter() - started


def _job(name: str) -> Obj:
    return training_job(name, command=["true"], gpus=1, image=None)


def _phase(client: Client, name: str) -> str:
    job = client.get("TrainingJob", name, "default")
    for c in reversed((job.get("status") or {}).get("conditions") or []):
        if c["status"] == "True" and c["type"] != "Created":
            return c["type"]
    return ""


def _wait(cond: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s")
        time.sleep(0.05)


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _pcts(label: str, what: str, values: list[float]) -> None:
    values = sorted(values)
    p99 = statistics.quantiles(values, n=100, method="inclusive")[98] if len(values) > 1 else values[0]
    print(f"{label:<12}{what:<34}p50 {1000 * statistics.median(values):9.1f} ms   p99 {1000 * p99:9.1f} ms")


def _print(label: str, what: str, value: float, unit: str) -> None:
    print(f"{label:<12}{what:<34}{value:9.1f} {unit}")


if __name__ == "__main__":
    main()
