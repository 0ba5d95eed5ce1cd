"""The audit log: every request that may change something, with who, what, when and the result.

:class:`AuditMiddleware` records each POST, PUT, PATCH and DELETE (access reviews aside: they
change nothing) once its answer is complete: the time, the user and groups (``system:anonymous``
when the token was missing or refused), the token id, the verb, resource, subresource,
namespace and name, the HTTP code, the client's address and agent, the path and, for an
apply, every object it named. Never a token, a request body or an answer body.

:class:`AuditWriter` appends the records in batches from a thread of its own (a request never
waits for the database) to the store's audit table, flushes what is queued when the server
stops, and deletes records older than the retention (``MUSTER_AUDIT_RETENTION_DAYS``, 30) at
start and every hour. Queried through ``GET /apis/muster.dev/v1/auditevents``
(:mod:`muster.server.routes.access`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from muster.server.access.attributes import Attributes, UserInfo, request_attributes
from muster.store import Store
from muster.store.capabilities import AuditLog

__all__ = ["AuditMiddleware", "AuditWriter"]

log = logging.getLogger(__name__)

_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_REVIEW_GROUPS = ("/apis/authorization.k8s.io/", "/apis/authentication.k8s.io/")
_FLUSH_SECONDS = 0.2
_BATCH = 500
_PRUNE_EVERY = 3600.0
_MAX_QUEUED = 100_000


class AuditWriter:
    """Queues audit records and writes them to the store in batches (see the module doc)."""

    def __init__(
        self, store: Store, retention_days: float = 30.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.retention_seconds = retention_days * 86400.0
        self.clock = clock
        self.enabled = isinstance(store, AuditLog)
        self.dropped = 0
        self._queue: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._flushing = threading.Lock()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._next_prune = 0.0

    def start(self) -> None:
        if not self.enabled or self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="muster-audit", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is queued, then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.flush()

    def record(self, entry: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with self._cond:
            if len(self._queue) >= _MAX_QUEUED:
                self.dropped += 1  # the database is gone for long: keep the server's memory bounded
                return
            self._queue.append(entry)
            self._cond.notify_all()

    def flush(self) -> None:
        """Write every queued record now (a read of the log, shutdown); returns once they and
        any batch the writer thread had taken are stored."""
        # One flush at a time: without it, a batch the writer thread had just taken off the
        # queue but not yet stored was missing from a read that had flushed (an empty queue).
        with self._flushing:
            while True:
                with self._cond:
                    batch, self._queue = self._queue[:_BATCH], self._queue[_BATCH:]
                if not batch:
                    return
                self._write(batch)

    def prune(self) -> int:
        """Delete the records older than the retention; how many went."""
        if not self.enabled:
            return 0
        return self.store.prune_audit(self.clock() - self.retention_seconds)  # type: ignore[attr-defined]

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._stopping, timeout=_FLUSH_SECONDS)
                stopping = self._stopping
            self.flush()
            now = self.clock()
            if now >= self._next_prune:
                self._next_prune = now + _PRUNE_EVERY
                try:
                    self.prune()
                except Exception:
                    log.exception("pruning the audit log failed; trying again in an hour")
            if stopping:
                return

    def _write(self, batch: list[dict[str, Any]]) -> None:
        try:
            self.store.append_audit(batch)  # type: ignore[attr-defined]
        except Exception:
            log.exception("writing %d audit records failed; they are queued again", len(batch))
            with self._cond:
                self._queue[:0] = batch
            time.sleep(1.0)


class AuditMiddleware:
    """ASGI middleware: one audit record per request that may change something."""

    def __init__(self, app: ASGIApp, writer: AuditWriter) -> None:
        self.app = app
        self.writer = writer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") not in _MUTATING
            or not self.writer.enabled
            or scope.get("path", "").startswith(_REVIEW_GROUPS)
        ):
            await self.app(scope, receive, send)
            return
        started = time.time()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.writer.record(_entry(scope, status, started))


def _entry(scope: Scope, status: int, started: float) -> dict[str, Any]:
    state = scope.get("state") or {}
    user: UserInfo | None = state.get("user")
    attrs: Attributes | None = state.get("attributes")
    path = scope.get("path", "")
    if attrs is None:
        query = dict(_query(scope))
        attrs = request_attributes(scope.get("method", ""), path, query)
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
    client = scope.get("client")
    entry: dict[str, Any] = {
        "time": started,
        "user": user.name if user is not None else "system:anonymous",
        "groups": list(user.groups) if user is not None else [],
        "verb": attrs.verb,
        "apiGroup": attrs.group if attrs.is_resource else "",
        "resource": attrs.resource,
        "subresource": attrs.subresource,
        "namespace": attrs.namespace or "",
        "name": attrs.name or str(state.get("audit_name") or ""),
        "code": status,
        "requestURI": path
        + (("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else ""),
        "sourceIP": client[0] if client else "",
        "userAgent": headers.get("user-agent", "")[:200],
        "latencyMs": round((time.time() - started) * 1000.0, 3),
    }
    if user is not None and user.token_id:
        entry["tokenId"] = user.token_id
    objects = state.get("audit_objects")
    if objects:
        entry["objects"] = objects
    reason = state.get("audit_reason")
    if reason:
        entry["reason"] = reason
    return entry


def _query(scope: Scope) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(scope.get("query_string", b"").decode("latin-1"))
