"""The load generator the serving benchmarks share (not a benchmark itself).

Open loop: requests are sent on a fixed schedule (``rate`` per second) whatever the replies do,
and each latency counts from the request's *scheduled* time, so a server that falls behind is
charged for the queue it builds (no coordinated omission). Closed loop (``concurrency``
clients, each sending its next request when the last reply is complete) measures the most a
server can take. The HTTP client is the gateway's own (muster.gateway.upstream: keep-alive
connections, replies parsed by llhttp), identical for every server compared, and light enough
that one core drives thousands of requests per second.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from muster.gateway.upstream import Failed, Pool

__all__ = ["Result", "closed_loop", "completion", "open_loop", "pct", "wait_http"]


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)  # seconds, successful requests
    ttfts: list[float] = field(default_factory=list)  # streamed requests: to the first event
    errors: dict[str, int] = field(default_factory=dict)
    cached_tokens: int = 0
    prompt_tokens: int = 0
    duration: float = 0.0
    replicas: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> int:
        return len(self.latencies)

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def rps(self) -> float:
        return self.ok / self.duration if self.duration else 0.0

    def summary(self, label: str) -> str:
        lat = self.latencies
        text = (
            f"{label}: {self.ok} ok, {self.failed} failed, {self.rps:.0f} req/s; "
            f"latency p50 {pct(lat, 50) * 1000:.2f} ms, p99 {pct(lat, 99) * 1000:.2f} ms"
        )
        if self.ttfts:
            mean = statistics.fmean(self.ttfts) * 1000
            text += f"; TTFT mean {mean:.1f} ms, p99 {pct(self.ttfts, 99) * 1000:.1f} ms"
        if self.errors:
            text += f"; errors {dict(sorted(self.errors.items()))}"
        return text


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def completion(model: str, prompt: str = "Hello", max_tokens: int = 1, stream: bool = False) -> bytes:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


class Target:
    """Where requests go: a base URL, a path and headers (a bearer token for the gateway)."""

    def __init__(self, url: str, path: str = "/v1/completions", token: str | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.path = path.encode()
        self.headers = [(b"content-type", b"application/json")]
        if token:
            self.headers.append((b"authorization", f"Bearer {token}".encode()))


async def _one(pool: Pool, target: Target, body: bytes, stream: bool, result: Result, t0: float) -> None:
    try:
        resp = await pool.request(target.host, target.port, "POST", target.path, target.headers, body)
    except Failed as exc:
        key = "connect" if not exc.sent else "reset"
        result.errors[key] = result.errors.get(key, 0) + 1
        return
    try:
        first = None
        chunks = []
        async for chunk in resp.chunks():
            if first is None:
                first = time.perf_counter()
            chunks.append(chunk)
    except Failed:
        result.errors["broken"] = result.errors.get("broken", 0) + 1
        return
    finally:
        resp.release()
    done = time.perf_counter()
    if resp.status != 200:
        key = str(resp.status)
        result.errors[key] = result.errors.get(key, 0) + 1
        return
    data = b"".join(chunks)
    if stream and b'"error"' in data:
        result.errors["stream-error"] = result.errors.get("stream-error", 0) + 1
        return
    result.latencies.append(done - t0)
    replica = resp.header(b"x-muster-replica")
    if replica:
        name = replica.decode()
        result.replicas[name] = result.replicas.get(name, 0) + 1
    if stream:
        result.ttfts.append((first or done) - t0)
        for line in data.split(b"\n"):
            if line.startswith(b"data: {") and b'"usage"' in line:
                _usage(json.loads(line[6:]), result)
    else:
        _usage(json.loads(data), result)


def _usage(obj: dict, result: Result) -> None:
    usage = obj.get("usage")
    if usage:
        result.prompt_tokens += usage.get("prompt_tokens", 0)
        result.cached_tokens += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


async def open_loop(
    target: Target, rate: float, seconds: float, body: Callable[[int], bytes], stream: bool = False
) -> Result:
    """``rate`` requests per second for ``seconds``; latency from each request's scheduled time."""
    pool, result = Pool(), Result()
    tasks = []
    n = int(rate * seconds)
    start = time.perf_counter() + 0.05
    for i in range(n):
        at = start + i / rate
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(_one(pool, target, body(i), stream, result, at)))
    await asyncio.gather(*tasks)
    result.duration = time.perf_counter() - start
    pool.close()
    return result


async def closed_loop(
    target: Target, concurrency: int, seconds: float, body: Callable[[int], bytes], stream: bool = False
) -> Result:
    """``concurrency`` clients back to back for ``seconds``: the most the server takes."""
    pool, result = Pool(), Result()
    counter = iter(range(1 << 62))
    end = time.perf_counter() + seconds

    async def client() -> None:
        while time.perf_counter() < end:
            await _one(pool, target, body(next(counter)), stream, result, time.perf_counter())

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    result.duration = time.perf_counter() - start
    pool.close()
    return result


def wait_http(
    url: str, timeout: float = 120.0, headers: dict[str, str] | None = None, interval: float = 0.02
) -> float:
    """Poll ``url`` every ``interval`` (20 ms: the gateway's own probe interval) until it answers
    200; the seconds it took."""
    import httpx

    start = time.perf_counter()
    with httpx.Client(timeout=1.0) as client:
        while time.perf_counter() - start < timeout:
            try:
                if client.get(url, headers=headers).status_code == 200:
                    return time.perf_counter() - start
            except httpx.HTTPError:
                pass
            time.sleep(interval)
    raise TimeoutError(url)
