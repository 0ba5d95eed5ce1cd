"""The gateway against puppet replicas (small ASGI apps on real ports): routing by model, the
queue at zero, overload answers, retries, streaming pass-through, drains, concurrency limits."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from muster.gateway.gateway import Gateway
from muster.gateway.server import GatewayServer
from muster.gateway.table import Backend, Route
from muster.testing import wait_for


class Replica:
    """A replica that answers completions with its name; ``mode`` changes what it does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.mode = "ok"  # ok | fail503 | slow | stream
        self.release = threading.Event()
        self.seen: list[dict] = []
        self.server = GatewayServer(self, "127.0.0.1", 0)
        self.server.start()
        self.port = self.server.port

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        if scope["path"] == "/health":
            await _json(send, 200, {})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        req = json.loads(body or b"{}")
        self.seen.append({"path": scope["path"], "headers": dict(scope["headers"]), "body": req})
        if self.mode == "fail503":
            await _json(send, 503, {"error": "not now"})
        elif self.mode == "slow":
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 30)
            await _json(send, 200, {"replica": self.name})
        elif self.mode == "stream":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send({"type": "http.response.body", "body": b'data: {"n": 1}\n\n', "more_body": True})
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 30)
            await send({"type": "http.response.body", "body": b'data: {"n": 2}\n\ndata: [DONE]\n\n'})
        else:
            await _json(send, 200, {"replica": self.name, "model": req.get("model")})

    def backend(self, revision: str = "r1", draining: bool = False) -> Backend:
        return Backend(self.name, revision, "127.0.0.1", self.port, "/health", draining)

    def stop(self) -> None:
        self.release.set()
        self.server.stop()


async def _json(send, status, obj):
    body = json.dumps(obj).encode()
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": body})


class Harness:
    def __init__(self) -> None:
        self.pokes: list[tuple[str, str]] = []
        self.gateway = Gateway(poke=lambda ns, name: self.pokes.append((ns, name)))
        self.server = GatewayServer(self.gateway, "127.0.0.1", 0)
        self.server.start()
        self.client = httpx.Client(base_url=self.server.url, timeout=30)
        self.replicas: list[Replica] = []

    def replica(self, name: str) -> Replica:
        r = Replica(name)
        self.replicas.append(r)
        return r

    def route(self, *backends: Backend, name: str = "svc", models=("m",), **kw) -> None:
        traffic = kw.pop("traffic", (("r1", 100),))
        self.gateway.apply([Route("ns", name, tuple(models), traffic, tuple(backends), **kw)])

    def ready(self, *names: str) -> None:
        wait_for(
            lambda: all(
                self.gateway.replica_load("ns", "svc").get(n, None)
                and self.gateway.replica_load("ns", "svc")[n].ready
                for n in names
            ),
            timeout=10,
            what=f"{names} ready",
        )

    def close(self) -> None:
        self.client.close()
        self.server.stop()
        for r in self.replicas:
            r.stop()


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def complete(h: Harness, model: str = "m", **extra) -> httpx.Response:
    return h.client.post("/v1/completions", json={"model": model, "prompt": "hello", **extra})


def test_requests_go_by_model_to_a_ready_replica_and_errors_are_openai_shaped(h):
    a = h.replica("a")
    h.route(a.backend(), models=("m", "m-alias"))
    h.ready("a")
    reply = complete(h, "m-alias", max_tokens=1)
    assert reply.status_code == 200 and reply.json() == {"replica": "a", "model": "m-alias"}
    assert reply.headers["x-muster-replica"] == "a"
    assert [m["id"] for m in h.client.get("/v1/models").json()["data"]] == ["m", "m-alias"]
    missing = complete(h, "nope")
    assert missing.status_code == 404
    assert set(missing.json()["error"]) == {"message", "type", "param", "code"}
    assert missing.json()["error"]["code"] == "model_not_found"
    assert h.client.post("/v1/completions", content=b"[").status_code == 400
    assert h.client.post("/v1/completions", json={"prompt": "x"}).json()["error"]["code"] == "missing_model"
    # the gateway's own token is not sent on to the replica
    h.client.post("/v1/completions", json={"model": "m"}, headers={"Authorization": "Bearer secret"})
    assert b"authorization" not in a.seen[-1]["headers"]


def test_a_request_at_zero_replicas_waits_and_pokes_then_goes_when_one_is_ready(h):
    h.route()
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("reply", complete(h)))
    thread.start()
    wait_for(lambda: h.pokes, timeout=10, what="a poke")
    assert h.pokes[0] == ("ns", "svc")
    assert h.gateway.load("ns", "svc")["r1"].held == 1
    a = h.replica("a")
    h.route(a.backend())
    thread.join(timeout=20)
    assert result["reply"].status_code == 200 and result["reply"].json()["replica"] == "a"


def test_a_full_queue_answers_429_and_a_long_wait_503_with_retry_after(h):
    h.route(max_queued=0)
    full = complete(h)
    assert (
        full.status_code == 429
        and full.headers["retry-after"]
        and full.json()["error"]["code"] == "queue_full"
    )
    h.route(max_queued=5, queue_timeout=0.3)
    late = complete(h)
    assert late.status_code == 503 and int(late.headers["retry-after"]) >= 1
    assert late.json()["error"]["code"] == "no_replica_ready"


def test_a_failed_request_is_retried_once_on_another_replica_then_502(h):
    a, b = h.replica("a"), h.replica("b")
    h.route(a.backend(), b.backend(), strategy="RoundRobin")
    h.ready("a", "b")
    a.mode = "fail503"
    replies = [complete(h) for _ in range(4)]
    assert all(r.status_code == 200 and r.json()["replica"] == "b" for r in replies)
    b.mode = "fail503"
    both = complete(h)
    assert both.status_code == 503  # tried twice: the second replica's own answer passes through
    # a replica that went away is out of routing at once; its requests go to the other
    a.mode = b.mode = "ok"
    a.server.stop()
    replies = [complete(h) for _ in range(4)]
    assert all(r.status_code == 200 and r.json()["replica"] == "b" for r in replies)
    assert h.gateway.replica_load("ns", "svc")["a"].ready is False


class CrashingReplica:
    """Passes its readiness probe, then drops every request's connection without a reply."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        if line.startswith(b"GET /health"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
            await writer.drain()
        writer.close()

    def backend(self) -> Backend:
        return Backend(self.name, "r1", "127.0.0.1", self.port, "/health")

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def test_a_request_whose_replica_drops_it_is_retried_once_then_502(h):
    a, b = CrashingReplica("a"), CrashingReplica("b")
    try:
        h.route(a.backend(), b.backend())
        h.ready("a", "b")
        reply = complete(h)
        assert reply.status_code == 502 and reply.json()["error"]["code"] == "replica_failed"
        good = h.replica("c")
        h.route(a.backend(), good.backend())
        h.ready("c")
        assert complete(h).json()["replica"] == "c"  # a failed and c answered: one retry was enough
    finally:
        a.stop()
        b.stop()


def test_a_stream_passes_through_event_by_event(h):
    a = h.replica("a")
    a.mode = "stream"
    h.route(a.backend())
    h.ready("a")
    with h.client.stream("POST", "/v1/completions", json={"model": "m", "stream": True}) as reply:
        lines = reply.iter_lines()
        first = next(line for line in lines if line)
        assert first == 'data: {"n": 1}'  # arrived while the replica still holds the rest
        a.release.set()
        rest = [line for line in lines if line]
    assert rest == ['data: {"n": 2}', "data: [DONE]"]


def test_draining_replicas_get_no_new_requests_and_report_drained_when_idle(h):
    a, b = h.replica("a"), h.replica("b")
    a.mode = "slow"
    h.route(a.backend(), strategy="LeastLoad")
    h.ready("a")
    slow = threading.Thread(target=lambda: complete(h))
    slow.start()
    wait_for(lambda: h.gateway.replica_load("ns", "svc")["a"].inflight == 1, timeout=10)
    h.route(a.backend(draining=True), b.backend(), strategy="LeastLoad")
    h.ready("b")
    wait_for(lambda: h.gateway.replica_load("ns", "svc")["a"].draining, timeout=10)
    assert not h.gateway.drained("ns", "svc", "a")  # its request still runs
    assert all(complete(h).json()["replica"] == "b" for _ in range(3))
    a.release.set()
    slow.join(timeout=10)
    wait_for(lambda: h.gateway.drained("ns", "svc", "a"), timeout=10, what="a drained")


def test_container_concurrency_holds_the_extra_request_until_a_slot_frees(h):
    a = h.replica("a")
    a.mode = "slow"
    h.route(a.backend(), container_concurrency=1)
    h.ready("a")
    threads = [threading.Thread(target=lambda: complete(h)) for _ in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: h.gateway.load("ns", "svc")["r1"].held == 1, timeout=10, what="one held")
    assert h.gateway.replica_load("ns", "svc")["a"].inflight == 1
    a.release.set()
    for t in threads:
        t.join(timeout=10)
    assert len(a.seen) == 2


def test_the_traffic_split_follows_the_percentages(h):
    a, b = h.replica("a"), h.replica("b")
    h.route(a.backend("r1"), b.backend("r2"), traffic=(("r2", 20), ("r1", 80)))
    h.ready("a", "b")
    counts = {"a": 0, "b": 0}
    for _ in range(200):
        counts[complete(h).json()["replica"]] += 1
    assert 20 <= counts["b"] <= 65, counts  # 40 expected
    ids = {
        h.client.post("/v1/completions", json={"model": "m"}, headers={"x-request-id": "abc"}).json()[
            "replica"
        ]
        for _ in range(10)
    }
    assert len(ids) == 1  # one request id, one revision
