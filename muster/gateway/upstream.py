"""A small HTTP/1.1 client for the gateway's hop to a replica: pooled keep-alive connections,
responses parsed by httptools (llhttp) and their bodies handed over chunk by chunk as they
arrive, so a server-sent event reaches the client the moment the replica wrote it.

Plain asyncio protocols rather than a general client: this hop is the gateway's whole cost,
and it needs exactly one thing a general client hides, knowing whether a failed request could
have reached the server (``Failed.sent``), which decides whether it may be retried elsewhere.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator

import httptools

__all__ = ["Failed", "Pool", "Response"]

_IDLE_SECONDS = 4.0  # uvicorn closes idle keep-alive connections after 5 s: reuse them before that
_MAX_IDLE = 256  # per endpoint
_HIGH_WATER = 1 << 18  # bytes buffered before the socket is paused


class Failed(ConnectionError):
    """The exchange failed. ``sent`` is False when the replica cannot have seen the request (the
    connection was refused, or a reused connection turned out closed before any reply): it may
    be sent to another replica without risk of running twice."""

    def __init__(self, message: str, *, sent: bool, answered: bool = False) -> None:
        super().__init__(message)
        self.sent = sent
        self.answered = answered  # the replica replied (with an error status): it is reachable


class Response:
    """Status and headers of a reply, and its body as it arrives."""

    def __init__(self, conn: _Conn) -> None:
        self._conn = conn
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.keep_alive = False
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chunks: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, piece by piece, as the replica sends it (chunked encoding undone)."""
        while True:
            while self._chunks:
                chunk = self._chunks.popleft()
                self._buffered -= len(chunk)
                if self._buffered < _HIGH_WATER // 2:
                    self._conn.resume()
                yield chunk
            if self.complete:
                return
            if self._error is not None:
                raise Failed(f"the replica's reply broke off: {self._error}", sent=True)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def release(self) -> None:
        """Done with it: the connection goes back to the pool when it can be reused, else it closes."""
        self._conn.finish(self)

    # -- fed by the connection -----------------------------------------------------------------

    def _push(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > _HIGH_WATER:
            self._conn.pause()
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self._error is None and not self.complete:
            self._error = exc
        if not self._head.done():
            self._head.set_exception(exc)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class _Conn(asyncio.Protocol):
    def __init__(self, pool: Pool, key: tuple[str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.response: Response | None = None
        self.closed = False
        self.used = 0
        self.idle_since = 0.0
        self.received = False
        self._paused = False

    # protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.response is None or self.parser is None:
            self.close()  # nothing was asked: a server talking out of turn
            return
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.response._fail(exc)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.response is not None and not self.response.complete:
            self.response._fail(exc or ConnectionResetError("the replica closed the connection"))

    # parser callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        assert self.response is not None
        self.response.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        r, p = self.response, self.parser
        assert r is not None and p is not None
        r.status = p.get_status_code()
        r.keep_alive = p.should_keep_alive()
        if not r._head.done():
            r._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        assert self.response is not None
        self.response._push(bytes(body))

    def on_message_complete(self) -> None:
        r = self.response
        assert r is not None
        r.complete = True
        if not r._head.done():
            r._head.set_result(None)
        r._wake()

    # use
    def send(self, data: bytes) -> Response:
        assert self.transport is not None
        self.response = Response(self)
        self.parser = httptools.HttpResponseParser(self)
        self.received = False
        self.used += 1
        self.transport.write(data)
        return self.response

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    def finish(self, response: Response) -> None:
        if self.response is not response:
            return
        reusable = response.complete and response.keep_alive and not self.closed
        self.response, self.parser = None, None
        if reusable:
            self.resume()
            self.idle_since = time.monotonic()
            self.pool._idle_conn(self)
        else:
            self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Pool:
    """Keep-alive connections to each replica (host, port), opened on demand."""

    def __init__(self, connect_timeout: float = 5.0) -> None:
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], list[_Conn]] = {}

    async def request(
        self,
        host: str,
        port: int,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes = b"",
    ) -> Response:
        """Send a request and wait for the reply's status and headers; the body follows through
        :meth:`Response.chunks`. The caller must :meth:`Response.release` it. Raises :class:`Failed`."""
        head = [f"{method} ".encode(), target, b" HTTP/1.1\r\nhost: ", f"{host}:{port}".encode(), b"\r\n"]
        for key, value in headers:
            head += [key, b": ", value, b"\r\n"]
        head += [b"content-length: ", str(len(body)).encode(), b"\r\n\r\n", body]
        data = b"".join(head)
        for _attempt in range(3):
            conn, reused = await self._conn(host, port)
            response = conn.send(data)
            try:
                await response._head
            except BaseException as exc:
                conn.response, conn.parser = None, None
                conn.close()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                if reused and not conn.received:
                    continue  # the server had closed this idle connection: it never saw the request
                raise Failed(f"no reply from {host}:{port}: {exc or type(exc).__name__}", sent=True) from exc
            return response
        raise Failed(f"no reply from {host}:{port}: connections keep closing", sent=False)

    def close(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()

    def forget(self, host: str, port: int) -> None:
        """Close the idle connections to a replica that is gone."""
        for c in self._idle.pop((host, port), []):
            c.close()

    async def _conn(self, host: str, port: int) -> tuple[_Conn, bool]:
        idle = self._idle.get((host, port))
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if not conn.closed and now - conn.idle_since < _IDLE_SECONDS:
                return conn, True
            conn.close()
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Conn(self, (host, port)), host, port), self.connect_timeout
            )
        except (OSError, TimeoutError) as exc:
            raise Failed(
                f"cannot connect to {host}:{port}: {exc or type(exc).__name__}", sent=False
            ) from None
        return conn, False

    def _idle_conn(self, conn: _Conn) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= _MAX_IDLE:
            conn.close()
            return
        idle.append(conn)
