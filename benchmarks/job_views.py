"""How fast the job views answer: pod logs over HTTP, `why` and `top` on a busy cluster.

Serves a store in this process (a real uvicorn on a free port) and measures with the SDK
client, as the CLI does:

* logs: reading a log of L lines whole (MB/s and lines/s through the API), the last 100
  lines of it, and the delay from a line appended to a followed log to the client seeing it;
* why: the server gathering the context of a pending job (every Workload, queue and event
  listed) and building the explanation, with W Workloads in the cluster, as `muster why` asks;
* top: `top nodes|gpus|queues` computations over N nodes, their pods and W Workloads
  (the pure functions only, and end to end including the lists).

    .venv/bin/python benchmarks/job_views.py [--lines 1000000] [--workloads 5000] [--nodes 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from muster.controllers.insight.usage import gpu_usage, node_usage, queue_usage
from muster.runtime.base import Container, DeviceBinding, PodLaunch, PodRef
from muster.runtime.local.logs import container_log
from muster.runtime.local.runtime import LocalRuntime
from muster.sdk.client import Client
from muster.store import Store, open_store
from muster.testing.cluster import admitted, cluster_queue, condition, ddp_job, gpu_node, pod, workload
from muster.testing.factories import local_queue
from muster.testing.server import serve


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines in the log read whole")
    parser.add_argument("--workloads", type=int, default=5_000, help="Workloads in the cluster")
    parser.add_argument("--nodes", type=int, default=500, help="8-GPU nodes in the cluster")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["MUSTER_HOME"] = str(home)
        store = open_store(f"sqlite:///{home / 'muster.db'}?synchronous=normal")
        try:
            with serve(store) as running, running.client() as client:
                _logs(client, home, args.lines)
                _fill(store, args.nodes, args.workloads)
                _why(client)
                _top(client)
        finally:
            store.close()
    return 0


def _logs(client: Client, home: Path, lines: int) -> None:
    path = container_log(home, "default", "big", "main")
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "step 123456 loss 0.123456 lr 0.001 tokens/s 98765.4 gpu-mem 71.2GiB\n"
    path.write_text(line * lines)
    size = path.stat().st_size
    t = time.perf_counter()
    count = sum(1 for _ in client.logs("big"))
    took = time.perf_counter() - t
    assert count == lines
    print(f"logs: {lines:,} lines ({size / 2**20:.0f} MiB) whole in {took:.2f} s: "
          f"{size / 2**20 / took:.0f} MiB/s, {lines / took:,.0f} lines/s")  # fmt: skip
    t = time.perf_counter()
    tail = list(client.logs("big", tail_lines=100))
    print(f"logs: --tail 100 of it in {1000 * (time.perf_counter() - t):.0f} ms ({len(tail)} lines)")

    # Follow latency: a process the local runtime runs prints its clock every 50 ms.
    runtime = LocalRuntime(home=home)
    gate = home / "gate"
    code = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(gate)!r}):\n"
        "    print(repr(time.time()), flush=True); time.sleep(0.05)\n"
    )
    launch = PodLaunch(PodRef("default", "live", "u1"), (Container("main", (sys.executable, "-c", code)),))
    runtime.start(launch, DeviceBinding())
    delays = []
    stream = client.logs("live", follow=True)
    for text in stream:
        delays.append(time.time() - float(text))
        if len(delays) == 100:
            break
    stream.close()
    gate.touch()
    delays.sort()
    print(f"logs -f: a line reaches the client after {1000 * statistics.median(delays):.0f} ms median, "
          f"{1000 * delays[94]:.0f} ms p95 (the follow polls the file every 100 ms)")  # fmt: skip
    while not any(c.final for c in runtime.poll(0.5)):
        pass
    runtime.release(launch.ref)
    runtime.close()


def _fill(store: Store, nodes: int, workloads: int) -> None:
    objs = [gpu_node(f"node-{i:04d}", gpus=8) for i in range(nodes)]
    objs.append(cluster_queue("default", {"default": {"nvidia.com/gpu": str(8 * nodes)}}))
    objs.append(local_queue("default"))
    half = workloads // 2
    for i in range(half):  # admitted, one pod on each of 2 GPUs of some node
        node = f"node-{i % nodes:04d}"
        gpus = [(2 * (i // nodes)) % 8, (2 * (i // nodes) + 1) % 8]
        objs.append(admitted(workload(f"run-{i}", pods=2), "default", node, [[gpus[0]], [gpus[1]]]))
        objs += [
            pod(f"run-{i}-worker-{k}", job=f"run-{i}", replica=("Worker", k), node=node, gpus=[gpus[k]])
            for k in range(2)
        ]
    for i in range(workloads - half):
        objs.append(workload(f"wait-{i}", priority=i % 7))
    objs.append(ddp_job("ddp", conditions=[condition("Queued")]))
    details = {"clusterQueue": "default", "shortfalls": []}
    objs.append(workload("ddp", pending=("QuotaExhausted", "no quota", details), owner="ddp"))
    for start in range(0, len(objs), 2000):
        store.apply(objs[start : start + 2000])
    print(f"cluster: {nodes} nodes, {workloads:,} Workloads ({half:,} admitted), {2 * half:,} pods")


def _why(client: Client) -> None:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        ex = client.view("why/TrainingJob/default/ddp")  # what `muster why job/ddp` asks
        times.append(time.perf_counter() - t)
    assert ex["queue"] is not None and ex["queue"]["position"] is not None
    queue = ex["queue"]
    print(f"why job/ddp: {1000 * min(times):.0f} ms (position {queue['position']} of {queue['pending']})")


def _top(client: Client) -> None:
    t = time.perf_counter()
    nodes, pods = client.list("Node")["items"], client.list("Pod")["items"]
    cqs, lqs = client.list("ClusterQueue")["items"], client.list("LocalQueue")["items"]
    wls = client.list("Workload")["items"]
    listed = time.perf_counter() - t
    for name, fn in (
        ("nodes", lambda: node_usage(nodes, pods)),
        ("gpus", lambda: gpu_usage(nodes, pods)),
        ("queues", lambda: queue_usage(cqs, lqs, wls)),
    ):
        t = time.perf_counter()
        rows = fn()
        print(f"top {name}: {1000 * (time.perf_counter() - t):.0f} ms over the objects ({len(rows)} rows)")
    print(f"top: listing nodes, pods, queues and Workloads took {1000 * listed:.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
