"""What the control plane tells the gateway (:class:`Route`, :class:`Backend`), what the gateway
tells it back (:class:`RevisionLoad`, :class:`ReplicaLoad`), and the gateway's own live state
of services, revisions and replicas.

The live state belongs to the gateway's event loop and is changed only there; the control
plane's thread reads the load figures (plain numbers, each read whole) and asks for changes
through :meth:`muster.gateway.gateway.Gateway.apply`.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
import zlib
from dataclasses import dataclass, field

from muster.gateway.routing import Router

__all__ = [
    "Backend",
    "ReplicaLoad",
    "RevisionLoad",
    "Route",
    "Series",
]


@dataclass(frozen=True)
class Backend:
    """A replica as routing needs it: where it listens and whether it is being drained."""

    name: str
    revision: str
    host: str
    port: int
    readiness_path: str = "/health"
    draining: bool = False


@dataclass(frozen=True)
class Route:
    """One InferenceService as the gateway serves it (built by the serving controller)."""

    namespace: str
    name: str
    models: tuple[str, ...]
    traffic: tuple[tuple[str, int], ...]  # (revision, percent), percents summing to 100
    backends: tuple[Backend, ...] = ()
    strategy: str = "PrefixLoad"
    replication: int = 256
    mean_load_factor: int = 125
    prefix_chars: int = 100
    container_concurrency: int = 0
    max_queued: int = 100
    queue_timeout: float = 120.0
    timeout: float = 600.0
    created: float = 0.0  # the service's creation (unix seconds): /v1/models, and the older of two claims


@dataclass(frozen=True)
class RevisionLoad:
    """A revision's demand as measured at the gateway.

    ``area`` is the time integral of its in-flight requests (on replicas plus held at the
    gateway), in request-seconds since the gateway started: the autoscaler's average
    concurrency over an interval is the difference of two readings over their ``at``
    difference (the gateway's monotonic clock). ``requests`` counts requests received.
    """

    area: float
    requests: int
    inflight: int
    held: int
    at: float
    last_request: float  # monotonic time of the last request received (0: none yet)


@dataclass(frozen=True)
class ReplicaLoad:
    inflight: int
    ready: bool
    draining: bool
    requests: int
    failures: int


class Series:
    """Request rate and latency per fixed bucket, for the dashboard's charts."""

    BOUNDS = tuple(0.001 * 1.5**i for i in range(36))  # 1 ms .. about 2 h

    def __init__(self, bucket_seconds: float = 10.0, keep: int = 180) -> None:
        self.bucket_seconds = bucket_seconds
        self._buckets: collections.deque[list[float | int | list[int]]] = collections.deque(maxlen=keep)

    def observe(self, now: float, seconds: float, error: bool) -> None:
        start = now - now % self.bucket_seconds
        if not self._buckets or self._buckets[-1][0] != start:
            self._buckets.append([start, 0, 0, [0] * (len(self.BOUNDS) + 1)])
        bucket = self._buckets[-1]
        bucket[1] += 1  # type: ignore[operator]
        bucket[2] += int(error)  # type: ignore[operator]
        hist: list[int] = bucket[3]  # type: ignore[assignment]
        i = 0
        while i < len(self.BOUNDS) and seconds > self.BOUNDS[i]:
            i += 1
        hist[i] += 1

    def points(self) -> list[dict[str, float]]:
        """Per bucket (oldest first): start (unix s), requests/s, errors/s, p50 and p99 (s)."""
        out = []
        for start, count, errors, hist in list(self._buckets):
            out.append(
                {
                    "time": float(start),  # type: ignore[arg-type]
                    "rps": count / self.bucket_seconds,  # type: ignore[operator]
                    "errorsPerSecond": errors / self.bucket_seconds,  # type: ignore[operator]
                    "p50": self._quantile(hist, 0.5),  # type: ignore[arg-type]
                    "p99": self._quantile(hist, 0.99),  # type: ignore[arg-type]
                }
            )
        return out

    def _quantile(self, hist: list[int], q: float) -> float:
        total = sum(hist)
        if not total:
            return 0.0
        rank, seen = q * total, 0
        for i, n in enumerate(hist):
            seen += n
            if seen >= rank:
                return self.BOUNDS[min(i, len(self.BOUNDS) - 1)]
        return self.BOUNDS[-1]


# -- the gateway's live state (its event loop only) --------------------------------------------


class ReplicaState:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.name = backend.name
        self.inflight = 0
        self.ready = False  # the readiness probe passed (and the last ones did not fail)
        self.down = False  # a request could not reach it: out of routing until a probe passes
        self.requests = 0
        self.failures = 0
        self.probe_failures = 0
        self.next_probe = 0.0
        self.probing = False
        self.gone = False

    @property
    def ident(self) -> str:
        """This incarnation of the replica: a restarted one listens elsewhere."""
        return f"{self.name}@{self.backend.host}:{self.backend.port}"

    @property
    def routable(self) -> bool:
        return self.ready and not self.down and not self.backend.draining and not self.gone


@dataclass
class Waiter:
    future: asyncio.Future[ReplicaState]
    key: object
    excluded: frozenset[str]
    since: float


class RevisionState:
    def __init__(self, name: str, router: Router, service_key: tuple[str, str]) -> None:
        self.name = name
        self.service_key = service_key
        self.router = router
        self.replicas: dict[str, ReplicaState] = {}
        self.waiters: collections.deque[Waiter] = collections.deque()
        self.inflight = 0
        self.area = 0.0
        self.at = time.monotonic()
        self.requests = 0
        self.last_request = 0.0

    @property
    def held(self) -> int:
        return len(self.waiters)

    def account(self, now: float) -> None:
        """Bring the in-flight integral up to ``now`` (before any count changes)."""
        self.area += (self.inflight + len(self.waiters)) * (now - self.at)
        self.at = now

    def load(self, now: float) -> RevisionLoad:
        area = self.area + (self.inflight + len(self.waiters)) * (now - self.at)
        return RevisionLoad(area, self.requests, self.inflight, len(self.waiters), now, self.last_request)

    def members(self) -> list[str]:
        return [r.name for r in self.replicas.values() if r.routable]


@dataclass
class ServiceState:
    route: Route
    revisions: dict[str, RevisionState] = field(default_factory=dict)
    series: Series = field(default_factory=Series)
    rng: random.Random = field(default_factory=random.Random)

    def pick_revision(self, sticky: bytes | None) -> RevisionState | None:
        """A revision by the traffic split; a request id makes the choice sticky."""
        split = [(name, pct) for name, pct in self.route.traffic if pct > 0 and name in self.revisions]
        if not split:
            return None
        if len(split) == 1:
            return self.revisions[split[0][0]]
        total = sum(p for _, p in split)
        point = zlib.crc32(sticky) % total if sticky else self.rng.randrange(total)
        for name, pct in split:
            if point < pct:
                return self.revisions[name]
            point -= pct
        return self.revisions[split[-1][0]]
