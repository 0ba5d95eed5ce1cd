"""Cold start: the first request to a service at zero replicas, to its first byte, against the
replica's own start time.

Interleaved trials (the machine is shared, so each pair runs under the same load):

* **own start**: the replica's command started directly (no Muster), polled every 20 ms (as the
  gateway probes a starting replica) until its readiness path answers 200;
* **cold start**: ``muster up --fake-gpus 1`` serves a ``minReplicas: 0`` InferenceService of the
  same command; once it is at zero replicas, one streamed completion goes to the gateway and
  the time to its first byte is measured. The request waits at the gateway while the control
  plane scales the service up (Workload, admission, pod, process) and the replica starts.

Prints both (median and each trial). Because the machine is shared and a replica's start time
varies by seconds from one run to the next, Muster's share is also measured *within* each
cold start: the replica's own start in that very trial is the time from its process's start
(as the local runtime's shim stamped it) to the moment it reported itself ready (the model server
logs it), and Muster's share is the rest of the first-byte time: the poke, the Workload, its
admission, the pod, launching the process, seeing it ready, and the hop. The median trial's
share is broken down from the objects' timestamps.

    .venv/bin/python benchmarks/serving_coldstart.py [--trials 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from serving_load import Target, completion, wait_http

from muster.sdk.client import Client
from muster.testing import free_port, wait_for
from muster.testing.up import MusterUp

COMMAND = [sys.executable, "-m", "muster.serving.model_server"]


def own_start() -> float:
    port = free_port()
    proc = subprocess.Popen(
        [*COMMAND, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        return wait_http(f"http://127.0.0.1:{port}/health")
    finally:
        proc.kill()
        proc.wait()


def service() -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": "cold"},
        "spec": {
            "modelNames": ["cold"],
            "minReplicas": 0,
            "maxReplicas": 1,
            "scaleToZeroDelaySeconds": 0,
            "scaleDownDelaySeconds": 0,
            "stableWindowSeconds": 6,
            "predictor": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "server", "command": COMMAND, "args": ["--port", "$(PORT)"]}],
            },
        },
    }


def at_zero(client: Client) -> bool:
    isvc = client.get("InferenceService", "cold", "default")
    status = isvc.get("status") or {}
    return (
        status.get("desiredReplicas") == 0 and not status.get("replicas") and not client.list("Pod")["items"]
    )


def own_in_trial(home: Path) -> float:
    """The replica's own start in a cold start: process start to its "ready ... at T" line.

    The start is the shim's wall-clock stamp taken once the process runs (``started_at``), not
    its ``create_time``: that one adds /proc's start ticks to the boot time, which the kernel
    gives in whole seconds, so it is early by up to a second and would hide that much of
    Muster's share. ``started_at`` is late by the fork and exec only, which counts against Muster.
    """
    [state] = list((home / "run" / "local" / "pods" / "default").glob("cold-*/*/server.state.json"))
    created = json.loads(state.read_text())["started_at"]
    [log] = list((home / "logs" / "default").glob("cold-*/server.log"))
    line = next(ln for ln in log.read_text().splitlines() if ln.startswith("ready after"))
    return float(line.rsplit(" at ", 1)[1]) - created


async def first_byte(up: MusterUp) -> float:
    target = Target(up.gateway_url, token=up.token)
    from muster.gateway.upstream import Pool

    pool = Pool()
    start = time.perf_counter()
    resp = await pool.request(
        target.host, target.port, "POST", target.path, target.headers, completion("cold", stream=True)
    )
    async for _chunk in resp.chunks():
        first = time.perf_counter()
        break
    resp.release()
    pool.close()
    assert resp.status == 200, resp.status
    return first - start


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def breakdown(client: Client, sent: float) -> dict[str, float]:
    wl = client.list("Workload")["items"][0]
    pod = client.list("Pod")["items"][0]
    admitted = next(c for c in wl["status"]["conditions"] if c["type"] == "Admitted")
    return {
        "request to Workload created": _ts(wl["metadata"]["creationTimestamp"]) - sent,
        "Workload created to admitted": _ts(admitted["lastTransitionTime"])
        - _ts(wl["metadata"]["creationTimestamp"]),
        "admitted to pod created": _ts(pod["metadata"]["creationTimestamp"])
        - _ts(admitted["lastTransitionTime"]),
        "pod created to process started": _ts(pod["status"]["startTime"])
        - _ts(pod["metadata"]["creationTimestamp"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    own, cold, parts, shares = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        extra = ["--fake-gpus", "1", "--log-level", "warning"]
        with MusterUp(Path(tmp), extra_args=extra) as up, Client(up.url, up.token, timeout=60) as client:
            client.apply([service()])
            for trial in range(args.trials):
                wait_for(
                    lambda: at_zero(client), timeout=180, interval=0.2, what="the service at zero replicas"
                )
                own.append(own_start())
                wait_for(
                    lambda: at_zero(client), timeout=180, interval=0.2, what="the service at zero replicas"
                )
                sent = time.time()
                cold.append(asyncio.run(first_byte(up)))
                parts.append(breakdown(client, sent))
                inside = own_in_trial(Path(tmp))
                shares.append(cold[-1] - inside)
                print(
                    f"trial {trial + 1}: own start {own[-1]:.3f} s; cold start {cold[-1]:.3f} s, of it the "
                    f"replica's own start {inside:.3f} s and Muster's share {shares[-1] * 1000:.0f} ms",
                    flush=True,
                )
                wait_for(lambda: at_zero(client), timeout=180, interval=0.2, what="the service at zero")
                for old in Path(tmp, "logs", "default").glob("cold-*/server.log"):
                    old.unlink()
    print(f"replica's own start (command to ready, run alone): median {statistics.median(own):.3f} s")
    print(f"cold start (request at zero replicas to first byte): median {statistics.median(cold):.3f} s")
    ordered = sorted(shares)
    print(
        f"Muster's share within each cold start: median {statistics.median(ordered) * 1000:.0f} ms, "
        f"min {ordered[0] * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms (goal <= 100 ms)"
    )
    middle = sorted(range(len(cold)), key=lambda i: cold[i])[len(cold) // 2]
    for label, seconds in parts[middle].items():
        print(f"  {label}: {seconds * 1000:.0f} ms")


if __name__ == "__main__":
    main()
