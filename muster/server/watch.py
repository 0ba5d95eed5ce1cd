"""Streaming a store watch to an HTTP client as NDJSON, one event per line:

``{"type": "ADDED|MODIFIED|DELETED", "object": {...}}``

A store watch blocks its thread while nothing changes, so each stream gets a pump thread of
its own (not one of the server's worker threads, which would run out under many watchers).
The pump feeds a bounded queue; the event loop side drains it and checks once a second
whether the client went away, then closes the store watch, which ends the pump. A watch
that fails after the stream started (its revision was compacted away while it lagged)
ends with one ``{"type": "ERROR", "object": <error body>}`` line, as Kubernetes does.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Iterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from muster.server.encoding import dumps
from muster.server.errors import error_body
from muster.store import LabelSelector, TooOld, WatchEvent

__all__ = ["ndjson_watch"]

_QUEUE_SIZE = 256
_CHECK_EVERY_S = 1.0
_END = object()


def ndjson_watch(
    request: Request, events: Iterator[WatchEvent], selector: LabelSelector | None
) -> StreamingResponse:
    """A streaming response that relays ``events`` (a store watch) until the client leaves,
    the watch ends (its timeout) or the server shuts down."""
    return StreamingResponse(
        _stream(request, events, selector),
        media_type="application/x-ndjson",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(
    request: Request, events: Iterator[WatchEvent], selector: LabelSelector | None
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    items: queue.Queue[object] = queue.Queue(_QUEUE_SIZE)
    ready = asyncio.Event()
    stop = threading.Event()

    def pump() -> None:
        try:
            for ev in events:
                if selector is not None and not selector.matches(ev.object["metadata"].get("labels") or {}):
                    continue
                if not _put(items, ev, stop):
                    return
                loop.call_soon_threadsafe(ready.set)
        except Exception as exc:  # TooOld, or a failure: the stream ends with a line saying why
            _put(items, exc, stop)
        finally:
            _put(items, _END, stop)
            with contextlib.suppress(RuntimeError):  # the loop is gone when the server stopped
                loop.call_soon_threadsafe(ready.set)

    thread = threading.Thread(target=pump, name="muster-watch", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = items.get_nowait()
            except queue.Empty:
                ready.clear()
                if items.empty():  # re-checked after clear(): a put in between set it again
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(ready.wait(), _CHECK_EVERY_S)
                    if await request.is_disconnected():
                        return
                continue
            if item is _END:
                return
            if isinstance(item, TooOld):
                yield dumps({"type": "ERROR", "object": error_body(410, str(item))}) + b"\n"
                return
            if isinstance(item, Exception):
                yield dumps({"type": "ERROR", "object": error_body(500, f"watch failed: {item}")}) + b"\n"
                return
            assert isinstance(item, WatchEvent)
            yield dumps({"type": item.type, "object": item.object}) + b"\n"
    finally:
        stop.set()
        close = getattr(events, "close", None)
        if close is not None:
            # The store's watch may be closed from any thread (it wakes the blocked pump); a plain
            # generator running in the pump refuses, and then ends at its own timeout.
            with contextlib.suppress(ValueError):
                close()


def _put(items: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Queue ``item``, waiting while the client reads slowly; False once the stream stopped."""
    while not stop.is_set():
        try:
            items.put(item, timeout=0.5)
            return True
        except queue.Full:
            continue
    return False
