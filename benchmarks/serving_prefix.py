"""Prefix-aware routing against least-load and round-robin, on a workload of shared prompt
prefixes (as KubeAI's prefix-hash benchmark: many conversations, each resending its long
context with a new question at the end).

``muster up`` serves three replicas of the tiny model (two layers, width 64) whose prefix
caches hold about two of the six conversations' contexts each (a 1,024-character context is
64 blocks; each replica keeps 150). For each strategy in turn the same open-loop load, streamed
completions of 4 tokens at a fixed rate, picks a conversation at random per request; every
strategy gets fresh contexts, so each starts with cold caches. Prints, per strategy, the mean
and p99 time to first token (from the request's scheduled time to its first event) and the
prefix-cache hit rate (cached prompt tokens / prompt tokens, from each reply's usage).

    .venv/bin/python benchmarks/serving_prefix.py [--rate 3] [--requests 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import sys
import tempfile
from pathlib import Path

from serving_load import Target, open_loop, pct

from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp

STRATEGIES = ("PrefixLoad", "PrefixHash", "LeastLoad", "RoundRobin")
MODEL = ["--layers", "2", "--d-model", "64", "--cache-blocks", "150", "--max-running", "4"]


def service(strategy: str, replicas: int) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": "chat"},
        "spec": {
            "modelNames": ["chat"],
            "minReplicas": replicas,
            "maxReplicas": replicas,
            "loadBalancing": {"strategy": strategy, "prefixHash": {"prefixCharLength": 1024}},
            "predictor": {
                "containers": [
                    {
                        "name": "server",
                        "command": [sys.executable, "-m", "muster.serving.model_server"],
                        "args": ["--port", "$(PORT)", *MODEL],
                    }
                ]
            },
        },
    }


def contexts(rng: random.Random, n: int, chars: int) -> list[str]:
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(400)]
    out = []
    for i in range(n):
        text = f"Conversation {i}. "
        while len(text) < chars:
            text += rng.choice(words) + " "
        out.append(text[:chars])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=3.0)
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=6)
    args = parser.parse_args()
    rng = random.Random(7)
    rows = []
    with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
        extra = ["--log-level", "warning"]
        with MusterUp(Path(tmp), extra_args=extra) as up, Client(up.url, up.token, timeout=60) as client:
            client.apply([service(STRATEGIES[0], args.replicas)])
            wait_for(
                lambda: (
                    (client.get("InferenceService", "chat", "default").get("status") or {}).get(
                        "readyReplicas"
                    )
                    == args.replicas
                ),
                timeout=300,
                what="the replicas ready",
            )
            target = Target(up.gateway_url, token=up.token)
            for strategy in STRATEGIES:
                isvc = client.get("InferenceService", "chat", "default")
                isvc["spec"]["loadBalancing"]["strategy"] = strategy
                client.update(isvc)  # routing only: the replicas (and their caches) stay
                wait_for(lambda: _applied(client), timeout=30, what="the new strategy")
                ctx = contexts(rng, args.conversations, 1024)
                picks = [rng.randrange(len(ctx)) for _ in range(args.requests)]

                def body(i: int, ctx: list[str] = ctx, picks: list[int] = picks) -> bytes:
                    prompt = ctx[picks[i]] + f"\nQuestion {i}: what next?"
                    return json.dumps(
                        {
                            "model": "chat",
                            "prompt": prompt,
                            "max_tokens": 4,
                            "temperature": 0,
                            "stream": True,
                            "stream_options": {"include_usage": True},
                        }
                    ).encode()

                result = asyncio.run(
                    open_loop(target, args.rate, args.requests / args.rate, body, stream=True)
                )
                hit = result.cached_tokens / result.prompt_tokens if result.prompt_tokens else 0.0
                rows.append((strategy, result, hit))
                print(
                    f"{strategy:11} TTFT mean {statistics.fmean(result.ttfts) * 1000:7.1f} ms, "
                    f"p99 {pct(result.ttfts, 99) * 1000:7.1f} ms; prefix-cache hit rate {hit:5.1%}; "
                    f"{result.ok} ok, {result.failed} failed; per replica {sorted(result.replicas.values())}",
                    flush=True,
                )
    best = min(rows, key=lambda r: statistics.fmean(r[1].ttfts))
    print(f"lowest mean TTFT: {best[0]}")


def _applied(client: Client) -> bool:
    isvc = client.get("InferenceService", "chat", "default")
    return (isvc.get("status") or {}).get("observedGeneration") == isvc["metadata"]["generation"]


if __name__ == "__main__":
    main()
