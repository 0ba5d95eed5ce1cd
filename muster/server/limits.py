"""The request-body limit: an ASGI middleware that counts a body's bytes as they arrive.

A body larger than the limit is refused with 413 ``RequestEntityTooLarge`` (the API's error
shape, naming the limit) before any route parses it, so an oversized apply costs the server
at most the limit in memory. ``Content-Length`` is only a shortcut: a request that declares
too much is refused before a byte is parsed, but the count is what decides, so a chunked body
or one that lies about its length is cut off as well.

The rest of a refused body is read and thrown away (up to :data:`DRAIN_BYTES`) before the
answer is sent: a client such as the SDK's ``http.client`` sends its whole body before it
reads a response, and a server that closes a connection with unread bytes in it resets it, so
the client would see "connection reset" instead of the 413. Past that much, the connection is
simply closed.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from muster.server.errors import ApiError, error_response
from muster.util import size_text

__all__ = ["DRAIN_BYTES", "BodyLimit", "RequestTooLarge"]

# How much of a refused body is read (and discarded, a chunk at a time) so that its sender
# gets the 413; a sender of more than this sees its connection closed instead.
DRAIN_BYTES = 256 * 1024 * 1024


class RequestTooLarge(ApiError, HTTPException):
    """Raised from ``receive`` when the body passes the limit.

    An ApiError, so the error handlers answer it like any other; an HTTPException too, because
    FastAPI's body reading passes those on unchanged (it turns other exceptions into a 400)."""

    def __init__(self, limit: int) -> None:
        rule = {"path": "", "rule": f"the request body must be at most {limit} bytes"}
        ApiError.__init__(self, 413, _message(limit), "RequestEntityTooLarge", [rule])
        # The rest of the body is never read: the connection cannot carry another request.
        HTTPException.__init__(self, 413, self.message, headers={"Connection": "close"})
        self.limit = limit


class BodyLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            if declared <= DRAIN_BYTES:
                await _drain(receive, 0)
            await _refuse(self.max_bytes, scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    if message.get("more_body", False):
                        await _drain(receive, received)
                    raise RequestTooLarge(self.max_bytes)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except RequestTooLarge:
            # Raised where no error handler sits (a mounted app, a middleware reading the body).
            if started:
                raise
            await _refuse(self.max_bytes, scope, receive, send)


def _message(limit: int) -> str:
    return (
        f"the request body is larger than the server's limit of {size_text(limit)}; "
        "send fewer documents per apply, or keep large data in volumes or artifacts rather than in objects"
    )


async def _drain(receive: Receive, received: int) -> None:
    """Read the rest of the request body, discarding it, up to DRAIN_BYTES in all."""
    while received <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return  # the client left
        received += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _refuse(limit: int, scope: Scope, receive: Receive, send: Send) -> None:
    exc = RequestTooLarge(limit)
    response = error_response(exc.code, exc.message, exc.reason, exc.errors, exc.headers)
    await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server refuses a malformed length before we see it
    return None
