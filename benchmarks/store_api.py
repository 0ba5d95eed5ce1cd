"""Store throughput and list latency through the REST API, on SQLite and on PostgreSQL.

For each store it starts `muster up` as a separate process (a throwaway PostgreSQL for the
second), then measures over HTTP with the SDK client:

* creates/s: N TrainingJobs by one POST each, from 1 client and from C concurrent clients;
  and by POST /apply in batches of 500 documents;
* list latency with N objects stored: the whole list (parsed by the client, and as bytes
  only: the server's share), a label-selected 1 %, and one GET.

``sqlite-normal`` is SQLite with ``?synchronous=normal`` (no fsync per commit). The throwaway
PostgreSQL runs with fsync=off, so its write numbers are an upper bound for a real server.

    .venv/bin/python benchmarks/store_api.py [--objects 10000] [--clients 8] [--stores sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from muster.sdk.client import Client
from muster.testing.factories import training_job
from muster.testing.postgres import PostgresUnavailable, start_postgres
from muster.testing.up import MusterUp


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000, help="objects created (and then listed)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for the second create run")
    parser.add_argument(
        "--stores",
        default="sqlite,sqlite-normal,postgresql",
        help="comma-separated: sqlite (the default, synchronous=full), sqlite-normal, postgresql",
    )
    parser.add_argument("--list-runs", type=int, default=10, help="repetitions of each list measurement")
    args = parser.parse_args()

    print(
        f"objects={args.objects} clients={args.clients} (each create is one HTTP request and one transaction)"
    )
    print(f"{'store':<14}{'measure':<48}{'value':>14}")
    for store in args.stores.split(","):
        try:
            for measure, value in bench(store.strip(), args.objects, args.clients, args.list_runs):
                print(f"{store:<14}{measure:<48}{value:>14}", flush=True)
        except PostgresUnavailable as exc:
            print(f"{store:<14}skipped: {exc}")
    return 0


def bench(store: str, n: int, clients: int, list_runs: int) -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        pg = start_postgres() if store == "postgresql" else None
        try:
            extra = []
            if pg:
                extra = ["--store", pg.create_database()]
            elif store == "sqlite-normal":
                extra = ["--store", f"sqlite:///{tmp}/muster.db?synchronous=normal"]
            elif store != "sqlite":
                raise SystemExit(f"unknown store {store!r}: use sqlite, sqlite-normal or postgresql")
            with MusterUp(Path(tmp) / "home", extra_args=[*extra, "--log-level", "warning"]) as up:
                third = n // 3
                rate = _create(up, "seq", third, clients=1)
                results.append(("creates/s, POST, 1 client", f"{rate:,.0f}"))
                rate = _create(up, "par", third, clients=clients)
                results.append((f"creates/s, POST, {clients} clients", f"{rate:,.0f}"))
                rate = _apply(up, "bulk", n - 2 * third, batch=500)
                results.append(("creates/s, POST /apply, 500 per request", f"{rate:,.0f}"))
                with Client(up.url, up.token, timeout=120) as client:
                    total = len(client.list("TrainingJob", "default")["items"])
                    assert total == n, f"expected {n} objects, found {total}"
                    whole = _timed(lambda: client.list("TrainingJob", "default"), list_runs)
                    results.append((f"list all {n:,}, parsed (median / p95 ms)", _ms(whole)))
                    url = f"{up.url}/apis/muster.dev/v1/namespaces/default/trainingjobs"
                    with httpx.Client(headers={"Authorization": f"Bearer {up.token}"}, timeout=120) as raw:
                        wire = _timed(lambda: raw.get(url).content, list_runs)
                    results.append((f"list all {n:,}, bytes only (median / p95 ms)", _ms(wire)))
                    some = _timed(
                        lambda: client.list("TrainingJob", "default", selector="shard=7"), list_runs
                    )
                    results.append((f"list -l shard=7 ({n // 100:,} of {n:,}) ms", _ms(some)))
                    one = _timed(lambda: client.get("TrainingJob", "seq-00042", "default"), list_runs * 10)
                    results.append(("get one (median / p95 ms)", _ms(one)))
        finally:
            if pg:
                pg.stop()
    return results


def _doc(prefix: str, i: int) -> dict:
    return training_job(f"{prefix}-{i:05d}", labels={"shard": str(i % 100), "bench": prefix})


def _create(up: MusterUp, prefix: str, count: int, clients: int) -> float:
    def work(worker: int) -> None:
        with Client(up.url, up.token) as client:
            for i in range(worker, count, clients):
                client.create(_doc(prefix, i))

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(work, w) for w in range(clients)]:
            future.result()
    return count / (time.perf_counter() - started)


def _apply(up: MusterUp, prefix: str, count: int, batch: int) -> float:
    started = time.perf_counter()
    with Client(up.url, up.token, timeout=300) as client:
        for start in range(0, count, batch):
            client.apply([_doc(prefix, i) for i in range(start, min(count, start + batch))])
    return count / (time.perf_counter() - started)


def _timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm-up: connection set-up and caches
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"{statistics.median(ordered) * 1000:.1f} / {p95 * 1000:.1f}"


if __name__ == "__main__":
    sys.exit(main())
