"""Prometheus metrics of the API server, on a registry of its own (one per app, so tests
and several apps in one process do not share counters).

* ``muster_api_requests_total{method, route, code}``
* ``muster_api_request_duration_seconds{method, route}``: time to the response headers (for
  a watch, the time to start streaming, not the stream's life).
* ``muster_objects{kind}``: stored objects per kind, counted when scraped.

``route`` is the route template (``/apis/muster.dev/v1/namespaces/{namespace}/trainingjobs``),
never the raw path, so label cardinality stays bounded. Other packages register their own
metrics on :attr:`ServerMetrics.registry`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from muster.store import Store

__all__ = ["MetricsMiddleware", "ServerMetrics"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServerMetrics:
    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "muster_api_requests",
            "API requests by method, route template and status code.",
            ["method", "route", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "muster_api_request_duration_seconds",
            "Time from receiving an API request to sending its response headers.",
            ["method", "route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_ObjectCounts(store))

    def response(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _ObjectCounts(Collector):
    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("muster_objects", "Stored objects per kind.", labels=["kind"])
        for kind, count in sorted(self.store.counts().items()):
            family.add_metric([kind], count)
        yield family


class MetricsMiddleware:
    """ASGI middleware counting requests and timing them to the response headers."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500

        async def timed_send(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                route = _route(scope)
                self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            self.metrics.requests.labels(scope["method"], _route(scope), str(code)).inc()


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"
