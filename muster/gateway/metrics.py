"""The gateway's Prometheus metrics (docs/metrics.md, "Serving"), counted where requests pass.

The replica counts (``muster_serving_desired_replicas``, ``muster_serving_ready_replicas``)
are control-plane state and come from the manager's collector; these are the data path's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["GatewayMetrics"]

# LLM requests take from a millisecond (a cached short prompt) to minutes (a long generation).
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_SERVICE = ["namespace", "service", "model"]


class GatewayMetrics(Collector):
    def __init__(self) -> None:
        self.requests = Counter(
            "muster_serving_requests",
            "Requests answered by the gateway, by HTTP status code (404: unknown model; 429 and 503: "
            "overload or no replica in time; 502: a replica failed twice).",
            [*_SERVICE, "code"],
            registry=None,
        )
        self.duration = Histogram(
            "muster_serving_request_duration_seconds",
            "Time from a request's arrival at the gateway to its last byte sent.",
            _SERVICE,
            buckets=_LATENCY_BUCKETS,
            registry=None,
        )
        self.ttft = Histogram(
            "muster_serving_time_to_first_token_seconds",
            "Streamed requests: time from arrival to the first event sent to the client.",
            _SERVICE,
            buckets=_LATENCY_BUCKETS,
            registry=None,
        )
        self.retries = Counter(
            "muster_serving_retries",
            "Requests sent to a second replica because the first failed before replying.",
            ["namespace", "service"],
            registry=None,
        )
        self.held_wait = Histogram(
            "muster_serving_queue_wait_seconds",
            "Time requests waited at the gateway for a replica (at zero replicas, or all busy).",
            ["namespace", "service"],
            buckets=_LATENCY_BUCKETS,
            registry=None,
        )
        # (namespace, service, revision, in flight, held) of every revision, read at scrape time
        self.gauges: Callable[[], Iterable[tuple[str, str, str, int, int]]] | None = None

    def collect(self) -> Iterator[Metric]:
        for metric in (self.requests, self.duration, self.ttft, self.retries, self.held_wait):
            yield from metric.collect()
        if self.gauges is not None:
            inflight = GaugeMetricFamily(
                "muster_serving_inflight_requests",
                "Requests on a revision's replicas now.",
                labels=["namespace", "service", "revision"],
            )
            held = GaugeMetricFamily(
                "muster_serving_queued_requests",
                "Requests held at the gateway now, waiting for a replica (the queue at zero).",
                labels=["namespace", "service", "revision"],
            )
            for ns, name, revision, running, waiting in self.gauges():
                inflight.add_metric([ns, name, revision], running)
                held.add_metric([ns, name, revision], waiting)
            yield inflight
            yield held
