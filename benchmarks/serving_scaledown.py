"""Scale-down under steady load: not one request may fail.

``muster up`` serves an autoscaled InferenceService (1..4 replicas, concurrency target 3 per
replica, a 10 s stable window, no scale-down delay) of replicas that take 50 ms per request
(``model_server --echo --echo-delay 0.05``: time, no CPU). The open-loop load runs at a high
rate long enough to scale up to four replicas, then steps down and stays there while the
autoscaler drains replicas away: each drained replica gets no new request, finishes the ones it
has, and only then stops. Prints every request's outcome (ok / failed by reason), the replica
counts seen over time, and the drains the control plane recorded.

    .venv/bin/python benchmarks/serving_scaledown.py [--high 160] [--low 50] [--requests 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from pathlib import Path

from serving_load import Result, Target, completion, open_loop

from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp


def service(minimum: int = 1, maximum: int = 4) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": "steady"},
        "spec": {
            "modelNames": ["steady"],
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "scaleMetric": "concurrency",
            "scaleTarget": 3,
            "targetUtilizationPercentage": 100,
            "stableWindowSeconds": 10,
            "scaleDownDelaySeconds": 0,
            "loadBalancing": {"strategy": "LeastLoad"},
            "predictor": {
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "server",
                        "command": [sys.executable, "-m", "muster.serving.model_server"],
                        "args": ["--port", "$(PORT)", "--echo", "--echo-delay", "0.05"],
                    }
                ],
            },
        },
    }


def watch(client: Client, stop: threading.Event, seen: list[tuple[float, int, int]]) -> None:
    start = time.monotonic()
    while not stop.is_set():
        status = client.get("InferenceService", "steady", "default").get("status") or {}
        seen.append(
            (time.monotonic() - start, status.get("desiredReplicas", 0), status.get("readyReplicas", 0))
        )
        stop.wait(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--high", type=float, default=160.0, help="requests/s while scaling up")
    parser.add_argument("--low", type=float, default=50.0, help="requests/s while scaling down")
    parser.add_argument("--requests", type=int, default=10000)
    args = parser.parse_args()
    high_seconds = 25.0
    low_seconds = max(40.0, (args.requests - args.high * high_seconds) / args.low)
    with (
        tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp,
        MusterUp(Path(tmp), extra_args=["--log-level", "warning"]) as up,
        Client(up.url, up.token) as client,
    ):
        client.apply([service()])
        wait_for(
            lambda: (client.get("InferenceService", "steady", "default").get("status") or {}).get(
                "readyReplicas"
            ),
            timeout=120,
            what="one ready replica",
        )
        target = Target(up.gateway_url, token=up.token)
        body = completion("steady", max_tokens=1)
        seen: list[tuple[float, int, int]] = []
        stop = threading.Event()
        watcher = threading.Thread(target=watch, args=(client, stop, seen), daemon=True)
        watcher.start()
        phases: list[Result] = []
        phases.append(asyncio.run(open_loop(target, args.high, high_seconds, lambda _i: body)))
        peak = max(d for _, d, _ in seen)
        phases.append(asyncio.run(open_loop(target, args.low, low_seconds, lambda _i: body)))
        stop.set()
        watcher.join()
        events = [
            e for e in client.list("Event", "default")["items"] if e["involvedObject"]["name"] == "steady"
        ]
    total = sum(p.ok + p.failed for p in phases)
    failed = sum(p.failed for p in phases)
    errors: dict[str, int] = {}
    for p in phases:
        for k, v in p.errors.items():
            errors[k] = errors.get(k, 0) + v
    drains = sum(e.get("count", 1) for e in events if e["reason"] == "ReplicaDraining")
    stopped = sum(e.get("count", 1) for e in events if e["reason"] == "ReplicaStopped")
    print(f"phase 1: {phases[0].summary(f'{args.high:g}/s for {high_seconds:g} s')}")
    print(f"phase 2: {phases[1].summary(f'{args.low:g}/s for {low_seconds:g} s')}")
    timeline = " ".join(f"{t:.0f}s:{d}/{r}" for t, d, r in seen[:: max(1, len(seen) // 20)])
    print(f"replicas (time: desired/ready): {timeline}")
    print(
        f"scale-down under steady load: {failed} failed of {total} requests {errors or ''}; "
        f"peak {peak} replicas, {drains} drained and {stopped} stopped while the load ran, "
        f"final {seen[-1][1]} desired / {seen[-1][2]} ready"
    )


if __name__ == "__main__":
    main()
