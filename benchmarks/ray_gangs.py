"""Gangs through Ray: `muster up --runtime ray` on a local Ray cluster (a head and GPU nodes
declared through resources, as the tests start it), two-replica gangs that each span two nodes
(one GPU a replica, placement ``spread``), run to completion.

Two phases:

* **idle**: one gang at a time on an empty cluster; the latency of a gang alone;
* **burst**: every gang submitted at once, more than the cluster holds; gangs admitted and
  started per second, and latencies with the queue in them.

Latencies are from submission (the job's creationTimestamp) to admission (the Workload's
QuotaReserved) and to running (the last member's ``status.startTime``: the actor on the Ray
node started the process), and admitted-to-running (the Ray part: pods created, the placement
group reserved on the nodes Muster chose, actors started, the processes launched), p50/p99.

    .venv/bin/python benchmarks/ray_gangs.py [--gangs 40] [--idle 10] [--nodes 2] [--gpus 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from e2e_throughput import _admitted, _pct, _state, _ts  # same definitions of the numbers

from muster.sdk.client import Client
from muster.testing.ray import LocalRayCluster
from muster.testing.up import MusterUp

Obj = dict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gangs", type=int, default=40, help="gangs submitted at once (burst)")
    parser.add_argument("--idle", type=int, default=10, help="gangs run one at a time first")
    parser.add_argument("--nodes", type=int, default=2, help="Ray GPU nodes")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per Ray node")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp,
        LocalRayCluster(gpu_nodes=args.nodes, gpus=args.gpus) as cluster,
    ):
        extra = ["--runtime", "ray", "--ray-address", cluster.address, "--placement", "spread"]
        extra += ["--log-level", "warning"]
        up = MusterUp(Path(tmp), extra_args=extra).start(timeout=120)  # Ray's start is slow here
        try:
            with Client(up.url, up.token, timeout=120) as client:
                _run(client, args)
        finally:
            up.stop()


def _run(client: Client, args: argparse.Namespace) -> None:
    _wait(lambda: len(client.list("Node")["items"]) >= args.nodes + 1, args.timeout)
    print(
        f"cluster: Ray {_ray_version()}, a head and {args.nodes} nodes of {args.gpus} GPUs "
        "(resources), one raylet each on this machine; gangs of 2 replicas x 1 GPU "
        "(`true`), placement spread"
    )
    idle = [_one(client, f"idle-{i:03d}", args.timeout) for i in range(args.idle)]
    _report(f"idle ({args.idle} gangs, one at a time)", idle)
    _burst(client, args)


def _burst(client: Client, args: argparse.Namespace) -> None:
    started = time.perf_counter()
    client.apply([_gang(f"burst-{i:03d}") for i in range(args.gangs)])
    _wait(lambda: _finished(client, "burst-") >= args.gangs, args.timeout)
    rows = [_row(client, f"burst-{i:03d}") for i in range(args.gangs)]
    wall = time.perf_counter() - started
    first = min(r["created"] for r in rows)
    admitted = max(r["admitted"] for r in rows) - first
    running = max(r["running"] for r in rows) - first
    concurrent = args.nodes * args.gpus // 2
    print(f"burst: {args.gangs} gangs at once, {concurrent} fit at a time; wall {wall:.1f} s")
    print(
        f"  admitted: {args.gangs / admitted:.2f} gangs/s "
        f"(the last admitted {admitted:.1f} s after the first submit)"
    )
    print(
        f"  started: {args.gangs / running:.2f} gangs/s "
        f"(the last running {running:.1f} s after the first submit)"
    )
    _report("burst", rows)


def _one(client: Client, name: str, timeout: float) -> dict[str, float]:
    client.apply([_gang(name)])
    _wait(lambda: _finished(client, name) == 1, timeout)
    return _row(client, name)


def _row(client: Client, name: str) -> dict[str, float]:
    job = client.get("TrainingJob", name, "default")
    if _state(job) != "Succeeded":
        raise SystemExit(f"gang {name} did not succeed: {job['status'].get('conditions')}")
    wl = client.get("Workload", name, "default")
    pods = [
        p for p in client.list("Pod")["items"] if p["metadata"]["labels"].get("muster.dev/job-name") == name
    ]
    nodes = {p["spec"]["nodeName"] for p in pods}
    if len(pods) != 2 or len(nodes) != 2:
        raise SystemExit(f"gang {name}: {len(pods)} pods on {sorted(nodes)}; expected 2 on 2 nodes")
    return {
        "created": _ts(job["metadata"]["creationTimestamp"]),
        "admitted": _admitted(wl),
        "running": max(_ts(p["status"]["startTime"]) for p in pods),
    }


def _report(label: str, rows: list[dict[str, float]]) -> None:
    for what, values in (
        ("submit-to-admitted", sorted(r["admitted"] - r["created"] for r in rows)),
        ("submit-to-running", sorted(r["running"] - r["created"] for r in rows)),
        ("admitted-to-running", sorted(r["running"] - r["admitted"] for r in rows)),
    ):
        print(
            f"  {label} {what}: p50 {_pct(values, 50):.2f} s, p99 {_pct(values, 99):.2f} s, "
            f"max {values[-1]:.2f} s"
        )


def _gang(name: str) -> Obj:
    container = {
        "name": "main",
        "command": ["true"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1m"}},
    }
    # Workers only: the job succeeds once both have, so neither pod is cleaned up early.
    replica = {"replicas": 2, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicaSpecs": {"Worker": replica}},
    }


def _finished(client: Client, prefix: str) -> int:
    return sum(
        1
        for j in client.list("TrainingJob")["items"]
        if j["metadata"]["name"].startswith(prefix) and _state(j) in ("Succeeded", "Failed")
    )


def _wait(done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s")
        time.sleep(0.2)  # a benchmark's progress poll, not a test


def _ray_version() -> str:
    import ray

    return str(ray.__version__)


if __name__ == "__main__":
    main()
