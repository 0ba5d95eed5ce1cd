"""Relaying a blocking iterator (a store watch, a followed log) to an HTTP client.

The iterator blocks its thread while nothing happens, so each stream gets a pump thread of
its own (not one of the server's worker threads, which would run out under many readers).
The pump feeds a bounded queue; the event loop side drains it, sends what it has as one
chunk, and checks once a second whether the client went away. When the stream ends for any
reason, ``on_close`` runs: it tells the iterator's source to stop (closing the store watch,
setting a log's cancel event), which ends the pump.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Generic, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse

__all__ = ["Relay", "relay_response"]

T = TypeVar("T")

_QUEUE_SIZE = 256
_CHECK_EVERY_S = 1.0
_CHUNK_BYTES = 64 * 1024
_END = object()


class Relay(Generic[T]):
    """How to relay one iterator: ``encode`` an item to bytes, turn an exception the
    iterator raised into a last chunk (``fail``), and stop the source (``on_close``); the
    pump thread is named ``thread_name`` (tests count them)."""

    def __init__(
        self,
        items: Iterator[T],
        encode: Callable[[T], bytes],
        fail: Callable[[Exception], bytes],
        on_close: Callable[[], None] = lambda: None,
        thread_name: str = "muster-stream",
    ) -> None:
        self.items = items
        self.thread_name = thread_name
        self.encode = encode
        self.fail = fail
        self.on_close = on_close


def relay_response(
    request: Request, relay: Relay[T], media_type: str, headers: dict[str, str] | None = None
) -> StreamingResponse:
    """A streaming response that relays ``relay.items`` until the client leaves, the
    iterator ends or the server shuts down."""
    return StreamingResponse(
        _stream(request, relay),
        media_type=media_type,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )


async def _stream(request: Request, relay: Relay[T]) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    items: queue.Queue[object] = queue.Queue(_QUEUE_SIZE)
    ready = asyncio.Event()
    stop = threading.Event()

    def pump() -> None:
        try:
            for item in relay.items:
                if not _put(items, item, stop):
                    return
                loop.call_soon_threadsafe(ready.set)
        except Exception as exc:  # the stream ends with a chunk saying why
            _put(items, _Failure(exc), stop)
        finally:
            _put(items, _END, stop)
            with contextlib.suppress(RuntimeError):  # the loop is gone when the server stopped
                loop.call_soon_threadsafe(ready.set)

    thread = threading.Thread(target=pump, name=relay.thread_name, daemon=True)
    thread.start()
    try:
        while True:
            chunk, ended = _drain(items, relay)
            if chunk:
                yield chunk
            if ended:
                return
            if chunk:
                continue
            ready.clear()
            if items.empty():  # re-checked after clear(): a put in between set it again
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ready.wait(), _CHECK_EVERY_S)
                if await request.is_disconnected():
                    return
    finally:
        stop.set()
        relay.on_close()


class _Failure:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def _drain(items: queue.Queue[object], relay: Relay[T]) -> tuple[bytes, bool]:
    """What is queued now, encoded as one chunk (up to a size), and whether the stream ended."""
    parts: list[bytes] = []
    size = 0
    while size < _CHUNK_BYTES:
        try:
            item = items.get_nowait()
        except queue.Empty:
            return b"".join(parts), False
        if item is _END:
            return b"".join(parts), True
        if isinstance(item, _Failure):
            return b"".join([*parts, relay.fail(item.exc)]), True
        part = relay.encode(item)  # type: ignore[arg-type]
        parts.append(part)
        size += len(part)
    return b"".join(parts), False


def _put(items: queue.Queue[object], item: object, stop: threading.Event) -> bool:
    """Queue ``item``, waiting while the client reads slowly; False once the stream stopped."""
    while not stop.is_set():
        try:
            items.put(item, timeout=0.5)
            return True
        except queue.Full:
            continue
    return False
