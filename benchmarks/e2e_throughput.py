"""End-to-end throughput of the control plane: `muster up --fake-gpus 8` as a process, 1,000
one-pod TrainingJobs (`true`, one GPU each) submitted at once, run to completion.

Prints jobs completed per second (first submission to last completion) and the latency from
submission (the job's creationTimestamp) to running (its pod's startTime, when the runtime
saw the process start), p50 and p99; also submission to admission. Every number is measured
through the whole stack: REST apply, store, watch, TrainingJob controller, scheduler loop,
pod executor, local runtime and shim.

    .venv/bin/python benchmarks/e2e_throughput.py [--jobs 1000] [--gpus 8] [--batch 100] [--sync normal]

``--sync normal`` runs the SQLite store with ``?synchronous=normal`` (no fsync per commit;
still safe against a crash of the process), the default is ``full``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path

from muster.sdk.client import Client
from muster.testing.up import MusterUp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="jobs per apply request")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--sync", choices=("full", "normal"), default="full", help="SQLite synchronous mode")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        store = f"sqlite:///{tmp}/muster.db?synchronous={args.sync}"
        extra = ["--fake-gpus", str(args.gpus), "--log-level", "warning", "--store", store]
        with MusterUp(Path(tmp), extra_args=extra) as up, Client(up.url, up.token, timeout=120) as client:
            _run(args, up, client)


def _run(args: argparse.Namespace, up: MusterUp, client: Client) -> None:
    started = time.perf_counter()
    for first in range(0, args.jobs, args.batch):
        client.apply([_job(i) for i in range(first, min(args.jobs, first + args.batch))])
    submitted = time.perf_counter() - started
    done = _wait(client, args.jobs, args.timeout)
    wall = time.perf_counter() - started
    jobs = {j["metadata"]["name"]: j for j in client.list("TrainingJob")["items"]}
    pods = {p["metadata"]["labels"]["muster.dev/job-name"]: p for p in client.list("Pod")["items"]}
    workloads = {w["metadata"]["name"]: w for w in client.list("Workload")["items"]}
    created = {n: _ts(j["metadata"]["creationTimestamp"]) for n, j in jobs.items()}
    to_running = sorted(_ts(pods[n]["status"]["startTime"]) - created[n] for n in jobs if n in pods)
    to_admitted = sorted(_admitted(workloads[n]) - created[n] for n in jobs if n in workloads)
    admitted_to_running = sorted(
        _ts(pods[n]["status"]["startTime"]) - _admitted(workloads[n])
        for n in jobs
        if n in pods and n in workloads
    )
    span = max(_ts(j["status"]["completionTime"]) for j in jobs.values()) - min(created.values())
    failed = sum(1 for j in jobs.values() if _state(j) != "Succeeded")
    print(
        f"jobs: {args.jobs} one-pod jobs (`true`, 1 GPU each) on {args.gpus} fake GPUs, "
        f"SQLite synchronous={args.sync}; {failed} not succeeded"
    )
    print(f"submission: {submitted:.1f} s for {args.jobs} jobs in batches of {args.batch}")
    print(
        f"completed: {done} in {span:.1f} s (first submission to last completion): {done / span:.1f} jobs/s"
    )
    print(f"wall clock including the client's polling: {wall:.1f} s")
    for label, values in (
        ("submit-to-admitted", to_admitted),
        ("submit-to-running", to_running),
        ("admitted-to-running", admitted_to_running),
    ):
        p50, p99 = _pct(values, 50), _pct(values, 99)
        print(f"{label} latency: p50 {p50:.2f} s, p99 {p99:.2f} s, max {values[-1]:.2f} s")


def _job(i: int) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "metadata": {"name": f"job-{i:05d}", "namespace": "default"},
        "spec": {
            "replicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "command": ["true"],
                                    "resources": {
                                        "limits": {"nvidia.com/gpu": "1"},
                                        "requests": {"cpu": "1m"},
                                    },
                                }
                            ]
                        }
                    },
                }
            }
        },
    }


def _wait(client: Client, total: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        finished = sum(1 for j in client.list("TrainingJob")["items"] if _state(j) in ("Succeeded", "Failed"))
        if finished >= total or time.monotonic() > deadline:
            return finished
        time.sleep(1.0)  # a benchmark's progress poll, not a test


def _state(job: dict) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Succeeded", "Failed") and c["status"] == "True":
            return c["type"]
    return ""


def _admitted(wl: dict) -> float:
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == "QuotaReserved" and c["status"] == "True":
            return _ts(c["lastTransitionTime"])
    return float("nan")


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _pct(values: list[float], p: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(p) - 1]


if __name__ == "__main__":
    main()
