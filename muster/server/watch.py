"""Streaming a store watch to an HTTP client as NDJSON, one event per line:

``{"type": "ADDED|MODIFIED|DELETED", "object": {...}}``

The relay (a pump thread per stream, see :mod:`muster.server.streaming`) closes the store
watch when the client leaves, which ends the pump. A watch that fails after the stream
started (its revision was compacted away while it lagged) ends with one
``{"type": "ERROR", "object": <error body>}`` line, as Kubernetes does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

from muster.server.encoding import dumps
from muster.server.errors import ApiError, error_body
from muster.server.streaming import Relay, relay_response
from muster.store import LabelSelector, TooOld, WatchEvent

__all__ = ["ndjson_watch", "watch_failure"]


def ndjson_watch(
    request: Request,
    events: Iterator[WatchEvent],
    selector: LabelSelector | None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> StreamingResponse:
    """A streaming response that relays ``events`` (a store watch) until the client leaves,
    the watch ends (its timeout) or the server shuts down; ``keep`` drops the events whose
    object the caller may not see (and may end the stream by raising an ApiError)."""

    def close() -> None:
        close_watch = getattr(events, "close", None)
        if close_watch is not None:
            # The store's watch may be closed from any thread (it wakes the blocked pump); a plain
            # generator running in the pump refuses, and then ends at its own timeout.
            with contextlib.suppress(ValueError):
                close_watch()

    relay = Relay(
        _selected(events, selector, keep), _encode, watch_failure, on_close=close, thread_name="muster-watch"
    )
    return relay_response(request, relay, media_type="application/x-ndjson")


def _selected(
    events: Iterator[WatchEvent],
    selector: LabelSelector | None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> Iterator[WatchEvent]:
    for ev in events:
        if selector is not None and not selector.matches(ev.object["metadata"].get("labels") or {}):
            continue
        if keep is None or keep(ev.object):
            yield ev


def _encode(ev: WatchEvent) -> bytes:
    return dumps({"type": ev.type, "object": ev.object}) + b"\n"


def watch_failure(exc: Exception) -> bytes:
    """The last line of a watch stream that failed after it started: ``{"type": "ERROR", ...}``."""
    if isinstance(exc, TooOld):
        return dumps({"type": "ERROR", "object": error_body(410, str(exc))}) + b"\n"
    if isinstance(exc, ApiError):
        return dumps({"type": "ERROR", "object": error_body(exc.code, exc.message, exc.reason)}) + b"\n"
    return dumps({"type": "ERROR", "object": error_body(500, f"watch failed: {exc}")}) + b"\n"
