"""Workflow throughput end to end: `muster up --fake-gpus 8` as a process, one Workflow that
fans a cached pod task (`true`) out over N items behind a first task, with a parallelism cap.

Prints, through the whole stack (REST, store, Workflow controller, scheduler loop, pod
executor, local runtime and shim):

* the first run: wall time from apply to Succeeded, runs per second, and the most runs seen
  Running at once (must not exceed --parallelism);
* the second run of the same workflow under another name: every run a cache hit, no process
  started; wall time from apply to Succeeded.

    .venv/bin/python benchmarks/workflow_fanout.py [--runs 200] [--parallelism 16] [--gpus 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from muster.sdk.client import Client
from muster.testing.up import MusterUp

Obj = dict[str, Any]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        extra = ["--fake-gpus", str(args.gpus), "--log-level", "warning"]
        with MusterUp(Path(tmp), extra_args=extra) as up, Client(up.url, up.token, timeout=120) as client:
            first, peak = _run(client, _workflow("first", args.runs, args.parallelism), args.timeout)
            pods = len(client.list("Pod")["items"])
            second, _ = _run(client, _workflow("second", args.runs, args.parallelism), args.timeout)
            nodes = client.get("Workflow", "second", "default")["status"]["nodes"]
            cached = sum(1 for n in nodes.values() if n["phase"] == "Cached")
            started = len(client.list("Pod")["items"]) - pods
    print(f"runs                 {args.runs} (+1 first task), parallelism {args.parallelism}")
    print(f"first run            {first:8.2f} s  ({args.runs / first:6.1f} runs/s), peak Running {peak}")
    print(f"second run (cached)  {second:8.2f} s  ({cached} nodes Cached, {started} pods started)")


def _workflow(name: str, runs: int, parallelism: int) -> Obj:
    def pod(*command: str) -> Obj:
        return {"spec": {"containers": [{"name": "main", "command": list(command)}]}}

    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parallelism": parallelism,
            "tasks": [
                {"name": "setup", "template": pod("true"), "cache": {"version": "bench"}},
                {
                    "name": "each",
                    "dependencies": ["setup"],
                    "withItems": list(range(runs)),
                    "template": pod("true", "{{item}}"),
                    "cache": {"version": "bench"},
                },
            ],
        },
    }


def _run(client: Client, wf: Obj, timeout: float) -> tuple[float, int]:
    name = wf["metadata"]["name"]
    started = time.perf_counter()
    client.apply([wf])
    peak = 0
    while time.perf_counter() - started < timeout:
        status = client.get("Workflow", name, "default").get("status") or {}
        running = sum(
            1
            for n in (status.get("nodes") or {}).values()
            if n["phase"] == "Running" and not n.get("children")
        )
        peak = max(peak, running)
        if status.get("phase") in ("Succeeded", "Failed", "Error"):
            assert status["phase"] == "Succeeded", status.get("message")
            return time.perf_counter() - started, peak
        time.sleep(0.05)
    raise TimeoutError(f"workflow {name} did not finish in {timeout}s")


if __name__ == "__main__":
    main()
