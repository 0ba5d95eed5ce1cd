"""Relaying a blocking iterator (a store watch, a followed log) to an HTTP client.

The iterator blocks its thread while nothing happens, so each stream gets a pump thread of
its own (not one of the server's worker threads, which would run out under many readers).
The pump appends to a bounded buffer; the event loop side takes everything there, sends it
as one chunk, and checks once a second whether the client went away. The buffer is a deque
(appends and pops are atomic) rather than a queue.Queue, whose lock handoff per item would
cost more than the item when a log is read at full speed; the pump wakes the loop only when
it sleeps, and waits only when the client reads too slowly. When the stream ends for any
reason, ``on_close`` runs: it tells the iterator's source to stop (closing the store watch,
setting a log's cancel event), which ends the pump.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Generic, TypeVar

from starlette.requests import Request
from starlette.responses import StreamingResponse

__all__ = ["Relay", "relay_response"]

T = TypeVar("T")

_BUFFER_ITEMS = 4096  # items waiting for a slow client before the pump waits too
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
    buffer = _Buffer()
    ready = asyncio.Event()
    waiting = threading.Event()  # the loop side is about to sleep: wake it after an append

    def wake() -> None:
        if waiting.is_set():
            with contextlib.suppress(RuntimeError):  # the loop is gone when the server stopped
                loop.call_soon_threadsafe(ready.set)

    def pump() -> None:
        try:
            for item in relay.items:
                if not buffer.put(item):
                    return
                wake()
        except Exception as exc:  # the stream ends with a chunk saying why
            buffer.put(_Failure(exc))
        finally:
            buffer.put(_END)
            wake()

    thread = threading.Thread(target=pump, name=relay.thread_name, daemon=True)
    thread.start()
    try:
        while True:
            chunk, ended = buffer.drain(relay)
            if chunk:
                yield chunk
            if ended:
                return
            if chunk:
                continue
            ready.clear()
            waiting.set()
            # Re-checked after announcing the wait: an append before this is seen here, an
            # append after it sees `waiting` and wakes us.
            if not buffer.items:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ready.wait(), _CHECK_EVERY_S)
            waiting.clear()
            if await request.is_disconnected():
                return
    finally:
        buffer.stop.set()
        relay.on_close()


class _Failure:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc


class _Buffer:
    """Items from the pump thread to the loop side, bounded."""

    def __init__(self) -> None:
        self.items: deque[object] = deque()
        self.stop = threading.Event()  # the stream ended: the pump gives up
        self.space = threading.Event()  # set by the loop side after it took items

    def put(self, item: object) -> bool:
        """Append ``item``, waiting while the client reads slowly; False once the stream stopped."""
        while len(self.items) >= _BUFFER_ITEMS:
            self.space.clear()
            if self.stop.is_set():
                return False
            if len(self.items) >= _BUFFER_ITEMS:
                self.space.wait(0.5)
        if self.stop.is_set():
            return False
        self.items.append(item)
        return True

    def drain(self, relay: Relay[T]) -> tuple[bytes, bool]:
        """What is buffered now, encoded as one chunk (up to a size), and whether the stream ended."""
        parts: list[bytes] = []
        size = 0
        try:
            while size < _CHUNK_BYTES:
                try:
                    item = self.items.popleft()
                except IndexError:
                    return b"".join(parts), False
                if item is _END:
                    return b"".join(parts), True
                if isinstance(item, _Failure):
                    return b"".join([*parts, relay.fail(item.exc)]), True
                part = relay.encode(item)  # type: ignore[arg-type]
                parts.append(part)
                size += len(part)
            return b"".join(parts), False
        finally:
            self.space.set()
