"""How fast the observability views compute on a large cluster (pure functions, no HTTP).

A synthetic cluster of N 8-GPU nodes, each GPU held by a one-pod admitted Workload on 7 of
every 8 GPUs, W pending Workloads, and a GPU history of every GPU (one reading every 5 s for
the idle window). Measured:

* metrics: one scrape of the control plane's collector (queues, jobs, pods, nodes, per-GPU
  readings), rendered to the Prometheus text format;
* why: the explanation of a pending 4-GPU job (per-node verdicts, fragmentation, the
  scheduler core's what-if snapshots and, with ``--cordoned K`` empty nodes cordoned, the
  what-ifs that find the cordoned node as the root cause);
* doctor: every check over the whole cluster and its GPU history.

    .venv/bin/python benchmarks/observe_views.py [--nodes 500] [--pending 2000] [--minutes 10]
        [--cordoned 0]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from muster.controllers.insight.doctor import diagnose
from muster.controllers.insight.explain import WhyContext, explain
from muster.controllers.insight.findings import Inputs, Thresholds
from muster.controllers.insight.metrics import ClusterState, ControlPlaneMetrics
from muster.controllers.nodes.gpumonitor import GpuReading
from muster.testing.cluster import admitted, cluster_queue, condition, gpu_node, pod, workload
from muster.testing.factories import flavor, local_queue

Obj = dict[str, Any]
GPUS = 8
NOW = 1_800_000_000.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=500, help="8-GPU nodes")
    parser.add_argument("--pending", type=int, default=2000, help="pending Workloads")
    parser.add_argument("--minutes", type=float, default=10.0, help="GPU history kept, minutes")
    parser.add_argument("--cordoned", type=int, default=0, help="empty 8-GPU nodes, cordoned, besides")
    args = parser.parse_args()
    c = build(args.nodes, args.pending, args.minutes, args.cordoned)
    gpus = args.nodes * GPUS
    print(
        f"cluster: {args.nodes} nodes, {gpus} GPUs, {len(c['workloads'])} Workloads "
        f"({args.pending} pending), {len(c['pods'])} pods, {sum(len(h) for h in c['history'].values()):,} "
        "GPU readings"
    )
    _metrics(c)
    _why(c)
    _doctor(c, args.minutes)
    return 0


def build(nodes: int, pending: int, minutes: float, cordoned: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "nodes": [],
        "pods": [],
        "workloads": [],
        "cluster_queues": [cluster_queue("default", {"default": {"nvidia.com/gpu": str(nodes * GPUS)}})],
        "local_queues": [local_queue("default", "default")],
        "flavors": [flavor("default")],
        "history": {},
    }
    readings = int(minutes * 60 / 5) + 1
    for n in range(nodes):
        name = f"n{n:04d}"
        out["nodes"].append(gpu_node(name, gpus=GPUS))
        for g in range(GPUS - 1):  # one GPU free per node: a 4-GPU pod fits nowhere
            job = f"j-{name}-{g}"
            wl = admitted(workload(job, pods=1, owner=job), "default", name, [[g]])
            out["workloads"].append(wl)
            out["pods"].append(pod(f"{job}-worker-0", job=job, node=name, gpus=[g]))
            util = 0.01 if g == 0 else 0.9
            out["history"][f"GPU-{name}-{g}"] = [
                GpuReading(NOW - 5 * i, g, util, 1 << 30, 80 << 30, 60.0, 300.0)
                for i in reversed(range(readings))
            ]
    for n in range(cordoned):  # room for the pending pods, but nothing new is placed there
        node = gpu_node(f"c{n:04d}", gpus=GPUS)
        node["spec"]["unschedulable"] = True
        out["nodes"].append(node)
    for i in range(pending):
        out["workloads"].append(
            workload(
                f"p{i:05d}",
                pods=1,
                requests={"nvidia.com/gpu": "4"},
                created="2026-01-01T00:00:00Z",
                pending=(
                    "InsufficientResources",
                    "0/N nodes ...",
                    {"freeGpus": nodes, "largestFreeGpuBlock": 1},
                ),
                conditions=[condition("QuotaReserved", "False", "InsufficientResources")],
            )
        )
    return out


def _timed(fn: Callable[[], Any], runs: int = 5) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def _metrics(c: dict[str, Any]) -> None:
    kinds = {
        "Node": c["nodes"],
        "Pod": c["pods"],
        "Workload": c["workloads"],
        "ClusterQueue": c["cluster_queues"],
        "LocalQueue": c["local_queues"],
        "TrainingJob": [],
    }
    metrics = ControlPlaneMetrics()
    latest = {u: h[-1] for u, h in c["history"].items()}
    metrics.attach(ClusterState(list=lambda kind: kinds.get(kind, []), latest=lambda: latest))
    registry = CollectorRegistry()
    registry.register(metrics)
    took, text = _timed(lambda: generate_latest(registry))
    lines = text.count(b"\n")
    print(f"metrics: one scrape in {1000 * took:.0f} ms ({len(text) / 1024:.0f} KiB, {lines:,} lines)")


def _why(c: dict[str, Any]) -> None:
    target = c["workloads"][-1]

    def context() -> WhyContext:  # a fresh one per run: it keeps the snapshots it builds
        return WhyContext(
            workload=target,
            cluster_queues=c["cluster_queues"],
            local_queues=c["local_queues"],
            workloads=c["workloads"],
            nodes=c["nodes"],
            all_pods=c["pods"],
            flavors=c["flavors"],
            now=NOW,
        )

    took, ex = _timed(lambda: explain(target, context()), runs=3)
    cause = f"; root cause: {ex.root_cause.message}" if ex.root_cause else ""
    print(f"why: a pending 4-GPU Workload explained in {1000 * took:.0f} ms: {ex.blocker}{cause}")


def _doctor(c: dict[str, Any], minutes: float) -> None:
    inputs = Inputs(
        nodes=c["nodes"],
        pods=c["pods"],
        workloads=c["workloads"],
        cluster_queues=c["cluster_queues"],
        local_queues=c["local_queues"],
        flavors=c["flavors"],
        history=c["history"],
        sample_seconds=5.0,
        now=NOW,
    )
    thresholds = Thresholds(idle_minutes=minutes - 0.5)
    took, findings = _timed(lambda: diagnose(inputs, thresholds), runs=3)
    codes: dict[str, int] = {}
    for f in findings:
        codes[f.code] = codes.get(f.code, 0) + 1
    print(f"doctor: {len(findings)} findings in {1000 * took:.0f} ms ({codes})")


if __name__ == "__main__":
    raise SystemExit(main())
