"""The gateway: an ASGI application that routes OpenAI and KServe v2 requests to replicas.

A request is routed by its ``model`` (the body's field; the path's name for ``/v2/models``):

1. the service that serves the model (404 in OpenAI's error shape when none does);
2. a revision by the service's traffic split (a canary gets its percentage; an
   ``x-request-id`` header makes the choice sticky);
3. a replica by the service's load-balancing strategy (:mod:`muster.gateway.routing`) among
   the revision's ready replicas with room under ``containerConcurrency``. When none has room
   (at zero replicas, while they start, or all busy) the request is *held* in a FIFO per
   revision and the control plane is poked to scale up; a held request goes out the moment a
   replica turns ready or frees a slot. A full queue answers 429, a held request that waited
   ``queueTimeoutSeconds`` 503, both with ``Retry-After``;
4. the request goes to the replica. If it fails before anything reached the client (the
   connection is refused or breaks, or the replica answers 502/503/504) it is sent once to
   another replica; a second failure is a 502. A streamed reply is passed through event by
   event as the replica writes it; a break after the first event ends the stream with an
   error event, and a client that goes away closes the replica's connection (the engine
   aborts the request).

Readiness: a replica gets traffic only once its readiness path answered 200 (probed every
20 ms while it starts, every second after); a replica a request could not reach is out of
routing at once, until a probe passes again. A replica the control plane marks draining gets
no new requests; :meth:`Gateway.drained` says when its last one finished.

The state lives on the gateway's event loop; the control plane's thread calls :meth:`apply`,
:meth:`load`, :meth:`replica_load` and :meth:`drained`, which are safe from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from muster.gateway.asgi import (
    Receive,
    Scope,
    Send,
    error_body,
    header,
    read_body,
    run_lifespan,
    send_error,
    send_json,
)
from muster.gateway.metrics import GatewayMetrics
from muster.gateway.probe import probe_loop
from muster.gateway.routing import RequestKey, Router, request_key
from muster.gateway.table import (
    Backend,
    ReplicaLoad,
    ReplicaState,
    RevisionLoad,
    RevisionState,
    Route,
    ServiceState,
    Waiter,
)
from muster.gateway.upstream import Failed, Pool, Response

__all__ = ["Gateway"]

log = logging.getLogger(__name__)

_OPENAI_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/embeddings"})
_HOP_HEADERS = frozenset(
    {
        b"host",
        b"connection",
        b"keep-alive",
        b"transfer-encoding",
        b"content-length",
        b"te",
        b"upgrade",
        b"proxy-authorization",
        b"proxy-connection",
        b"authorization",  # the gateway's token is not the replica's business
        b"cookie",
    }
)
_RETRY_STATUSES = frozenset({502, 503, 504})


class Rejected(Exception):
    """A request the gateway answers itself (an OpenAI-shaped error)."""

    def __init__(self, status: int, message: str, code: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.retry_after = status, code, retry_after


class Gateway:
    """Routes requests to replicas; see the module docstring."""

    def __init__(
        self,
        poke: Callable[[str, str], None] | None = None,
        metrics: GatewayMetrics | None = None,
        authorize: Callable[[Scope, str, str], bool] | None = None,
    ) -> None:
        # poke(namespace, service): a held request waits, or a replica's readiness changed
        self.poke = poke or (lambda _ns, _name: None)
        # authorize(scope, namespace, service): whether the caller may call that service
        self.authorize = authorize or (lambda _scope, _ns, _name: True)
        self.metrics = metrics or GatewayMetrics()
        self.metrics.gauges = self._gauges
        self.pool = Pool()
        self.services: dict[tuple[str, str], ServiceState] = {}
        self.models: dict[str, tuple[str, str]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[Route] | None = None
        self._prober: asyncio.Task[None] | None = None
        self._wake_prober: asyncio.Event | None = None

    # -- the control plane's side (any thread) ---------------------------------------------------

    def apply(self, routes: Sequence[Route]) -> None:
        """Serve exactly ``routes`` from now on (replicas keep their counts across updates)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            self._pending = list(routes)
            return
        loop.call_soon_threadsafe(self._apply, list(routes))

    def load(self, namespace: str, name: str) -> dict[str, RevisionLoad]:
        """Per revision of the service: its demand as measured here (empty: unknown service)."""
        svc = self.services.get((namespace, name))
        now = time.monotonic()
        return {} if svc is None else {r.name: r.load(now) for r in list(svc.revisions.values())}

    def replica_load(self, namespace: str, name: str) -> dict[str, ReplicaLoad]:
        svc = self.services.get((namespace, name))
        out: dict[str, ReplicaLoad] = {}
        if svc is None:
            return out
        for rev in list(svc.revisions.values()):
            for r in list(rev.replicas.values()):
                out[r.name] = ReplicaLoad(
                    r.inflight, r.ready and not r.down, r.backend.draining, r.requests, r.failures
                )
        return out

    def drained(self, namespace: str, name: str, replica: str) -> bool:
        """Whether a replica marked draining has been taken out of routing and has no request left."""
        svc = self.services.get((namespace, name))
        if svc is None:
            return True
        for rev in list(svc.revisions.values()):
            r = rev.replicas.get(replica)
            if r is not None:
                return r.backend.draining and r.inflight == 0
        return True

    def series(self, namespace: str, name: str) -> list[dict[str, float]]:
        svc = self.services.get((namespace, name))
        return [] if svc is None else svc.series.points()

    # -- ASGI ---------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send, self._started, self.stop_in_loop)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "POST" and path in _OPENAI_PATHS:
            await self._openai(scope, receive, send)
        elif path.startswith("/v2/models/"):
            await self._v2(scope, receive, send)
        elif method == "GET" and path == "/v1/models":
            await send_json(send, 200, {"object": "list", "data": self._model_list(scope)})
        elif method == "GET" and path in ("/healthz", "/v2/health/live", "/v2/health/ready"):
            body = {"live": True} if path.endswith("live") else {"ready": True}
            await send_json(send, 200, {} if path == "/healthz" else body)
        else:
            await send_error(send, 404, f"no route {method} {path} on the gateway", "not_found")

    async def _started(self) -> None:
        self.start_in_loop()

    def start_in_loop(self) -> None:
        """Start the prober on the running loop (the ASGI lifespan does it)."""
        self.loop = asyncio.get_running_loop()
        self._wake_prober = asyncio.Event()
        self._prober = self.loop.create_task(probe_loop(self, self._wake_prober))
        if self._pending is not None:
            self._apply(self._pending)
            self._pending = None

    async def stop_in_loop(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
        self.pool.close()

    # -- OpenAI and v2 --------------------------------------------------------------------------------

    async def _openai(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        try:
            raw = await read_body(receive)
            body = json.loads(raw)
        except ValueError:
            await send_error(send, 400, "the body must be JSON", "invalid_json")
            return
        except ConnectionResetError:
            return
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or not model:
            await send_error(send, 400, "the request must name a model", "missing_model", param="model")
            return
        svc = self._service_of(model)
        if svc is None:
            await send_error(
                send,
                404,
                f"The model '{model}' does not exist (GET /v1/models lists them)",
                "model_not_found",
                param="model",
            )
            return
        if not await self._allowed(scope, svc, send):
            return
        route = svc.route
        key = (
            request_key(body, route.prefix_chars)
            if route.strategy in ("PrefixHash", "PrefixLoad")
            else RequestKey()
        )
        stream = bool(body.get("stream"))
        await self._forward(svc, model, scope, raw, key, stream, receive, send, started)

    async def _v2(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        name = scope["path"][len("/v2/models/") :].partition("/")[0]
        svc = self._service_of(name)
        try:
            raw = await read_body(receive)
        except ConnectionResetError:
            return
        if svc is None:
            await send_json(send, 404, {"error": f"model {name!r} is not served by the gateway"})
            return
        if not await self._allowed(scope, svc, send):
            return
        await self._forward(svc, name, scope, raw, RequestKey(), False, receive, send, started)

    def _service_of(self, model: str) -> ServiceState | None:
        key = self.models.get(model)
        if key is None and "_" in model:  # KubeAI's <model>_<adapter>
            key = self.models.get(model.partition("_")[0])
        return self.services.get(key) if key is not None else None

    async def _allowed(self, scope: Scope, svc: ServiceState, send: Send) -> bool:
        namespace, name = svc.route.namespace, svc.route.name
        if self.authorize(scope, namespace, name):
            return True
        await send_error(
            send,
            403,
            f"you may not call inferenceservice {namespace}/{name}: it takes create on "
            f"inferenceservices/proxy in namespace {namespace} (the edit role grants it)",
            "permission_denied",
        )
        return False

    def _model_list(self, scope: Scope) -> list[dict[str, Any]]:
        out = []
        for model, key in sorted(self.models.items()):
            svc = self.services.get(key)
            if svc is not None and self.authorize(scope, *key):
                out.append(
                    {"id": model, "object": "model", "created": int(svc.route.created), "owned_by": key[0]}
                )
        return out

    # -- forwarding ------------------------------------------------------------------------------------

    async def _forward(
        self,
        svc: ServiceState,
        model: str,
        scope: Scope,
        body: bytes,
        key: RequestKey,
        stream: bool,
        receive: Receive,
        send: Send,
        started: float,
    ) -> None:
        route = svc.route
        labels = (route.namespace, route.name, model)
        status = 500
        try:
            status = await self._exchange(svc, scope, body, key, stream, receive, send, started, labels)
        except ConnectionResetError:
            status = 499  # the client went away; its replica's connection is closed
        except Rejected as exc:
            status = exc.status
            headers = (
                []
                if exc.retry_after is None
                else [(b"retry-after", str(max(1, round(exc.retry_after))).encode())]
            )
            body_out = error_body(exc.status, str(exc), exc.code)
            if scope["path"].startswith("/v2/"):
                body_out = {"error": str(exc)}
            await send_json(send, exc.status, body_out, headers)
        finally:
            now = time.monotonic()
            self.metrics.requests.labels(*labels, str(status)).inc()
            self.metrics.duration.labels(*labels).observe(now - started)
            svc.series.observe(time.time(), now - started, status >= 500)

    async def _exchange(
        self,
        svc: ServiceState,
        scope: Scope,
        body: bytes,
        key: RequestKey,
        stream: bool,
        receive: Receive,
        send: Send,
        started: float,
        labels: tuple[str, str, str],
    ) -> int:
        rev = svc.pick_revision(header(scope, b"x-request-id"))
        if rev is None:
            raise Rejected(503, f"{svc.route.name} has no revision taking traffic", "no_revision", 5)
        now = time.monotonic()
        rev.account(now)
        rev.requests += 1
        rev.last_request = now
        target = scope["path"].encode() + (b"?" + scope["query_string"] if scope.get("query_string") else b"")
        headers = [(k, v) for k, v in scope.get("headers", ()) if k not in _HOP_HEADERS]
        excluded: set[str] = set()  # replica incarnations that failed this request
        retried, unreachable = False, 0
        deadline = started + svc.route.timeout
        while True:
            replica = await self._acquire(svc, rev, key, frozenset(excluded), started)
            response: Response | None = None
            clean = False
            try:
                async with asyncio.timeout_at(_loop_deadline(deadline)):
                    b = replica.backend
                    response = await self.pool.request(b.host, b.port, scope["method"], target, headers, body)
                    if (
                        response.status in _RETRY_STATUSES
                        and not retried
                        and self._others(rev, excluded | {replica.ident})
                    ):
                        await response.read()
                        raise Failed(f"{replica.name} answered {response.status}", sent=True, answered=True)
                    if stream and response.status == 200:
                        status, clean = await self._stream(response, replica, send, receive, started, labels)
                        return status
                    payload = await response.read()
                clean = True
            except Failed as exc:
                self._note_failure(replica, exc)
                if not exc.sent and unreachable < 5:
                    unreachable += 1  # it never saw the request; it is out of routing now
                    continue
                if retried:
                    raise Rejected(
                        502, f"the replicas of {svc.route.name} failed: {exc}", "replica_failed"
                    ) from None
                retried = True
                excluded.add(replica.ident)
                self.metrics.retries.labels(svc.route.namespace, svc.route.name).inc()
                continue
            except TimeoutError:
                raise Rejected(
                    504, f"no reply within timeoutSeconds ({svc.route.timeout:g}s)", "timeout"
                ) from None
            finally:
                self._release(rev, replica, response, close=not clean)
            out = [(k, v) for k, v in response.headers if k not in _HOP_HEADERS]
            out += [
                (b"content-length", str(len(payload)).encode()),
                (b"x-muster-replica", replica.name.encode()),
            ]
            await send({"type": "http.response.start", "status": response.status, "headers": out})
            await send({"type": "http.response.body", "body": payload})
            return response.status

    async def _stream(
        self,
        response: Response,
        replica: ReplicaState,
        send: Send,
        receive: Receive,
        started: float,
        labels: tuple[str, str, str],
    ) -> tuple[int, bool]:
        """Pass a streamed reply through chunk by chunk: (status for the metrics, whether the
        replica's connection ended cleanly). Nothing is retried once the reply has started."""
        out = [(k, v) for k, v in response.headers if k not in _HOP_HEADERS]
        out.append((b"x-muster-replica", replica.name.encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": out})
        gone = asyncio.ensure_future(receive())  # http.disconnect once the client leaves
        first = True
        try:
            async for chunk in response.chunks():
                if gone.done():
                    raise ConnectionResetError("the client went away")
                if first:
                    self.metrics.ttft.labels(*labels).observe(time.monotonic() - started)
                    first = False
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except Failed as exc:
            replica.failures += 1
            event = error_body(502, f"the replica failed mid-stream: {exc}", "replica_failed")
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": data, "more_body": False})
            return 502, False
        finally:
            gone.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return response.status, True

    # -- replicas: acquire, hold, release --------------------------------------------------------------

    async def _acquire(
        self, svc: ServiceState, rev: RevisionState, key: RequestKey, excluded: frozenset[str], started: float
    ) -> ReplicaState:
        chosen = self._pick(svc, rev, key, excluded)
        if chosen is not None:
            return chosen
        route = svc.route
        if rev.held >= route.max_queued:
            raise Rejected(
                429,
                f"{route.name}: {rev.held} requests already wait for a replica (maxQueuedRequests)",
                "queue_full",
                retry_after=1,
            )
        now = time.monotonic()
        rev.account(now)
        waiter = Waiter(asyncio.get_running_loop().create_future(), key, excluded, now)
        rev.waiters.append(waiter)
        self.poke(route.namespace, route.name)
        timeout = max(0.0, started + route.queue_timeout - now)
        try:
            replica = await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
        except TimeoutError:
            if waiter.future.done() and not waiter.future.cancelled() and waiter.future.exception() is None:
                self._release(rev, waiter.future.result(), None)  # handed a replica just too late
            raise Rejected(
                503,
                f"no replica of {route.name} could take the request within {route.queue_timeout:g}s",
                "no_replica_ready",
                retry_after=max(1.0, route.queue_timeout / 4),
            ) from None
        finally:
            if not waiter.future.done():
                waiter.future.cancel()
            if waiter in rev.waiters:
                rev.account(time.monotonic())
                rev.waiters.remove(waiter)
        self.metrics.held_wait.labels(route.namespace, route.name).observe(time.monotonic() - now)
        return replica

    def _pick(
        self, svc: ServiceState, rev: RevisionState, key: RequestKey, excluded: frozenset[str]
    ) -> ReplicaState | None:
        cc = svc.route.container_concurrency
        candidates = [
            r
            for r in rev.replicas.values()
            if r.routable and r.ident not in excluded and (not cc or r.inflight < cc)
        ]
        chosen = rev.router.pick(key, candidates)
        if chosen is None:
            return None
        replica: ReplicaState = chosen  # type: ignore[assignment]
        rev.account(time.monotonic())
        replica.inflight += 1
        replica.requests += 1
        rev.inflight += 1
        return replica

    def _release(
        self, rev: RevisionState, replica: ReplicaState, response: Response | None, close: bool = False
    ) -> None:
        if response is not None:
            if close:
                response._conn.close()
            response.release()
        rev.account(time.monotonic())
        replica.inflight -= 1
        rev.inflight -= 1
        svc = self.services.get(rev.service_key)
        if svc is not None:
            self.dispatch(svc, rev)

    def _others(self, rev: RevisionState, excluded: set[str]) -> bool:
        return any(r.ident not in excluded and not r.gone for r in rev.replicas.values())

    def _note_failure(self, replica: ReplicaState, exc: Failed) -> None:
        replica.failures += 1
        if not exc.answered:
            replica.down = True  # unreachable: out of routing until a probe passes
            self.pool.forget(replica.backend.host, replica.backend.port)
            if self._wake_prober is not None:
                self._wake_prober.set()

    def dispatch(self, svc: ServiceState, rev: RevisionState) -> None:
        """Hand held requests to replicas that can take them, oldest first."""
        while rev.waiters:
            waiter = rev.waiters[0]
            if waiter.future.done():
                rev.account(time.monotonic())
                rev.waiters.popleft()
                continue
            replica = self._pick(svc, rev, waiter.key, waiter.excluded)  # type: ignore[arg-type]
            if replica is None:
                return
            rev.account(time.monotonic())
            rev.waiters.popleft()
            waiter.future.set_result(replica)

    # -- routes from the control plane -------------------------------------------------------------

    def _apply(self, routes: list[Route]) -> None:
        seen: set[tuple[str, str]] = set()
        models: dict[str, tuple[str, str]] = {}
        # a model name two services claim goes to the older one (the newer is told so in its status)
        for route in sorted(routes, key=lambda r: (r.created, r.namespace, r.name)):
            key = (route.namespace, route.name)
            seen.add(key)
            svc = self.services.get(key)
            if svc is None:
                svc = self.services[key] = ServiceState(route)
            svc.route = route
            for model in route.models:
                models.setdefault(model, key)
            self._apply_revisions(svc, key)
        for key in [k for k in self.services if k not in seen]:
            for rev in self.services.pop(key).revisions.values():
                for waiter in rev.waiters:
                    if not waiter.future.done():
                        waiter.future.set_exception(Rejected(404, f"{key[1]} was deleted", "model_not_found"))
        self.models = models
        if self._wake_prober is not None:
            self._wake_prober.set()

    def _apply_revisions(self, svc: ServiceState, key: tuple[str, str]) -> None:
        route = svc.route
        wanted: dict[str, list[Backend]] = {name: [] for name, _ in route.traffic}
        for b in route.backends:
            wanted.setdefault(b.revision, []).append(b)
        for name, backends in wanted.items():
            rev = svc.revisions.get(name)
            if rev is None or rev.router.strategy != route.strategy:
                router = Router(route.strategy, route.replication, route.mean_load_factor)
                fresh = RevisionState(name, router, key)
                if rev is not None:
                    fresh.replicas, fresh.waiters = rev.replicas, rev.waiters
                rev = svc.revisions[name] = fresh
            names = {b.name for b in backends}
            for b in backends:
                state = rev.replicas.get(b.name)
                if state is None:
                    rev.replicas[b.name] = ReplicaState(b)
                elif state.backend != b:
                    moved = (state.backend.host, state.backend.port) != (b.host, b.port)
                    state.backend = b
                    if moved:  # restarted elsewhere: not ready until probed again
                        state.ready, state.down = False, False
            for gone in [n for n in rev.replicas if n not in names]:
                state = rev.replicas.pop(gone)
                state.gone = True
                rev.router.forget(gone)
                self.pool.forget(state.backend.host, state.backend.port)
            rev.router.set_members(rev.members())
            self.dispatch(svc, rev)
        for name in [n for n in svc.revisions if n not in wanted]:
            rev = svc.revisions.pop(name)
            for waiter in rev.waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(Rejected(503, f"revision {name} was retired", "retired", 1))

    def _gauges(self) -> Iterable[tuple[str, str, str, int, int]]:
        for (ns, name), svc in list(self.services.items()):
            for rev in list(svc.revisions.values()):
                yield ns, name, rev.name, rev.inflight, rev.held


def _loop_deadline(deadline_monotonic: float) -> float:
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline_monotonic - time.monotonic())
