"""The few ASGI pieces the gateway and the model server share: reading a body, answering JSON,
OpenAI-shaped errors, and streaming. Plain ASGI (no framework): every request of the data path
goes through here, and a router or middleware stack would cost more than the work itself."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "Receive",
    "Scope",
    "Send",
    "error_body",
    "header",
    "read_body",
    "run_lifespan",
    "send_bytes",
    "send_error",
    "send_json",
    "start_response",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

JSON_TYPE = (b"content-type", b"application/json")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout_error",
}


class BodyTooLarge(Exception):
    pass


async def read_body(receive: Receive, limit: int = 32 * 1024 * 1024) -> bytes:
    """The whole request body (BodyTooLarge past ``limit`` bytes)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("the client went away")
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the request body is larger than {limit} bytes")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def header(scope: Scope, name: bytes) -> bytes | None:
    """A request header (``name`` lower-case), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value
    return None


async def start_response(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def send_bytes(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole response in one go."""
    out = [*(headers or ()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, obj: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send_bytes(send, status, json.dumps(obj).encode(), [JSON_TYPE, *(headers or ())])


def error_body(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The OpenAI error shape: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str | None = None,
    *,
    retry_after: float | None = None,
    param: str | None = None,
) -> None:
    headers = [] if retry_after is None else [(b"retry-after", str(max(1, round(retry_after))).encode())]
    await send_json(send, status, error_body(status, message, code, param), headers)


async def run_lifespan(
    receive: Receive,
    send: Send,
    startup: Callable[[], Awaitable[None]],
    shutdown: Callable[[], Awaitable[None]],
) -> None:
    """Answer an ASGI lifespan scope: ``startup`` before the server takes requests, ``shutdown``
    when it stops."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
