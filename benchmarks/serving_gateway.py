"""The gateway's cost, and Muster against Ray Serve serving the same tiny model.

1. **Overhead**: ``muster up`` serves a one-replica InferenceService of
   ``muster.serving.model_server --echo`` (the model server's HTTP side with no model behind
   it, so the replica's own time is as small as it gets and the gateway's share shows). The
   same open-loop load goes straight to the replica's port and through the gateway,
   interleaved, at 100 and 500 requests/s: the added latency is the difference of the p50s
   and of the p99s.
2. **Most requests/s through the gateway**: closed loop, 64 clients, then the same straight to
   the replica.
3. **Ray Serve side by side** (``ray[serve]`` of the pinned Ray, ``pip install -e '.[ray-serve]'``):
   the same model code (``ModelServer.complete``: the tiny transformer of muster.serving, one
   layer, width 32, one token per request; then the echo engine) as a Serve deployment with
   default settings, ``replicas`` of them, and a Muster service with as many replicas; the same
   load generator drives both: throughput (closed loop, 64 clients) and latency at 100
   requests/s (open loop). Ratios are Muster / Ray Serve for throughput and Ray Serve / Muster
   for p99 (> 1: Muster ahead).

Everything runs on this machine: the load generator (one process), ``muster up`` (API server,
controllers and gateway threads) and the replicas, or Ray's processes.

    .venv/bin/python benchmarks/serving_gateway.py [--seconds 15] [--replicas 2] [--skip-ray]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil
from serving_load import Target, closed_loop, completion, open_loop, wait_http

from muster.sdk.client import Client
from muster.testing import free_port, wait_for
from muster.testing.up import MusterUp

MODEL = ["--layers", "1", "--d-model", "32", "--threads", "1"]
ENGINES = {"tiny model": MODEL, "echo": ["--echo"]}


def service(name: str, replicas: int, args: list[str]) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "modelNames": [name],
            "minReplicas": replicas,
            "maxReplicas": replicas,
            "loadBalancing": {"strategy": "LeastLoad"},
            "predictor": {
                "containers": [
                    {
                        "name": "server",
                        "command": [sys.executable, "-m", "muster.serving.model_server"],
                        "args": ["--port", "$(PORT)", *args],
                    }
                ]
            },
        },
    }


def body(model: str):
    payload = completion(model, prompt="Hello there", max_tokens=1)
    return lambda _i: payload


def ready(client: Client, name: str, replicas: int) -> list[str]:
    status = client.get("InferenceService", name, "default").get("status") or {}
    addresses = [r["address"] for r in status.get("replicas") or [] if r.get("state") == "Ready"]
    return addresses if len(addresses) == replicas else []


def overhead(up: MusterUp, client: Client, seconds: float) -> None:
    client.apply([service("solo", 1, ENGINES["echo"])])
    [address] = wait_for(lambda: ready(client, "solo", 1), timeout=300, what="the replica ready")
    direct = Target(f"http://{address}")
    via = Target(up.gateway_url, token=up.token)
    load = body("solo")
    asyncio.run(open_loop(via, 50, 3, load))  # warm both paths
    asyncio.run(open_loop(direct, 50, 3, load))
    print("== gateway overhead: one echo replica, completions of one token, open loop ==", flush=True)
    for rate in (100, 500):
        rows = []
        for label, target in (("direct", direct), ("gateway", via), ("direct", direct), ("gateway", via)):
            result = asyncio.run(open_loop(target, rate, seconds / 2, load))
            rows.append((label, result))
            print(f"  {result.summary(f'{rate}/s {label:7}')}", flush=True)
        d = [r for label, r in rows if label == "direct"]
        g = [r for label, r in rows if label == "gateway"]
        d50 = _pooled(d, 50)
        g50 = _pooled(g, 50)
        d99, g99 = _pooled(d, 99), _pooled(g, 99)
        print(
            f"  {rate}/s: added latency p50 {(g50 - d50) * 1000:.2f} ms "
            f"({d50 * 1000:.2f} -> {g50 * 1000:.2f}), p99 {(g99 - d99) * 1000:.2f} ms "
            f"({d99 * 1000:.2f} -> {g99 * 1000:.2f})",
            flush=True,
        )
    print("== most requests/s (closed loop, 64 clients) ==", flush=True)
    process = psutil.Process(up.proc.pid) if up.proc is not None else None
    for label, target in (("gateway", via), ("direct", direct)):
        before = sum(process.cpu_times()[:2]) if process is not None else 0.0
        result = asyncio.run(closed_loop(target, 64, seconds, load))
        print(f"  {result.summary(label)}", flush=True)
        if label == "gateway" and process is not None and result.ok:
            used = sum(process.cpu_times()[:2]) - before
            print(
                f"  CPU of muster up per request through the gateway: {used / result.ok * 1e6:.0f} us "
                f"(about {result.ok / used:.0f} requests/s per core)",
                flush=True,
            )
    client.delete("InferenceService", "solo", "default")


def _pooled(results: list, p: float) -> float:
    from serving_load import pct

    return pct([x for r in results for x in r.latencies], p)


def muster_side(up: MusterUp, client: Client, replicas: int, seconds: float, engine: str) -> tuple:
    client.apply([service("pair", replicas, ENGINES[engine])])
    wait_for(lambda: ready(client, "pair", replicas), timeout=300, what="the replicas ready")
    via = Target(up.gateway_url, token=up.token)
    load = body("pair")
    asyncio.run(open_loop(via, 50, 3, load))
    most = asyncio.run(closed_loop(via, 64, seconds, load))
    steady = asyncio.run(open_loop(via, 100, seconds, load))
    print(f"  {most.summary(f'Muster, {replicas} replicas, 64 clients')}", flush=True)
    print(f"  {steady.summary(f'Muster, {replicas} replicas, 100/s')}", flush=True)
    client.delete("InferenceService", "pair", "default")
    wait_for(lambda: not client.list("Pod")["items"], timeout=120, what="the replicas gone")
    return most, steady


def ray_side(replicas: int, seconds: float, engine: str) -> tuple | None:
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        print(f"  Ray Serve is not installed ({exc}): pip install -e '.[ray-serve]'")
        return None
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    @serve.deployment(num_replicas=replicas)
    class TinyLM:
        def __init__(self) -> None:
            import torch

            from muster.serving.model_server import EchoEngine, ModelServer
            from muster.serving.tinylm import Engine, ModelConfig, TinyLM

            torch.set_num_threads(1)
            if echo:
                model: object = EchoEngine()
            else:
                model = Engine(TinyLM(ModelConfig(layers=1, d_model=32, d_ff=128)))
                model.start()
                model.warm_up()
            self.server = ModelServer(["ray"], model)
            self.server.ready = True

        async def __call__(self, request: Request) -> JSONResponse:
            return JSONResponse(await self.server.complete(await request.json()))

    echo = engine == "echo"
    port = free_port()
    for attempt in range(3):  # on a busy machine Ray's own processes may miss their start-up deadline
        try:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:
            print(f"  ray.init failed ({exc}); {'retrying' if attempt < 2 else 'giving up'}", flush=True)
            ray.shutdown()
            if attempt == 2:
                return None
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        started = time.perf_counter()
        serve.run(TinyLM.bind(), route_prefix="/v1/completions", name="tinylm")
        wait_http(f"http://127.0.0.1:{port}/-/healthz", timeout=120)
        print(f"  Ray Serve up in {time.perf_counter() - started:.1f} s (serve.run to healthy)", flush=True)
        target = Target(f"http://127.0.0.1:{port}")
        load = body("ray")
        asyncio.run(open_loop(target, 20, 3, load))
        most = asyncio.run(closed_loop(target, 64, seconds, load))
        steady = asyncio.run(open_loop(target, 100, seconds, load))
        print(f"  {most.summary(f'Ray Serve, {replicas} replicas, 64 clients')}", flush=True)
        print(f"  {steady.summary(f'Ray Serve, {replicas} replicas, 100/s')}", flush=True)
        return most, steady
    finally:
        serve.shutdown()
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)", flush=True)
    ours = {}
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        extra = ["--fake-gpus", "2", "--log-level", "warning"]
        with MusterUp(Path(tmp), extra_args=extra) as up, Client(up.url, up.token, timeout=60) as client:
            if not args.skip_overhead:
                overhead(up, client, args.seconds)
            for engine in ENGINES:
                print(f"== Muster: {args.replicas} replicas, {engine} ==", flush=True)
                ours[engine] = muster_side(up, client, args.replicas, args.seconds, engine)
    if args.skip_ray:
        return
    from serving_load import pct

    for engine in ENGINES:
        print(f"== Ray Serve: {args.replicas} replicas, {engine} ==", flush=True)
        theirs = ray_side(args.replicas, args.seconds, engine)
        if theirs is None:
            return
        (m_most, m_steady), (r_most, r_steady) = ours[engine], theirs
        tput = m_most.rps / r_most.rps if r_most.rps else float("inf")
        p99 = pct(r_steady.latencies, 99) / pct(m_steady.latencies, 99)
        print(
            f"ratio Muster/Ray Serve ({engine}): throughput {tput:.1f}x ({m_most.rps:.0f} vs "
            f"{r_most.rps:.0f} req/s); p99 at 100/s {p99:.1f}x lower "
            f"({pct(m_steady.latencies, 99) * 1000:.1f} vs {pct(r_steady.latencies, 99) * 1000:.1f} ms); "
            f"failures {m_steady.failed + m_most.failed} vs {r_steady.failed + r_most.failed}",
            flush=True,
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
