"""Small helpers around the official client: raw JSON in and out, and readable API errors.

Calls go through the client with ``_preload_content=False``: the body is read as JSON rather
than through the client's typed models, which are slow to build and, against a 1.20 server,
fail on some answers (a Binding's ``Status``, see docs/testing-kubernetes.md).
"""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["api_message", "api_reason", "close_response", "interrupt_response", "read_json", "status_of"]

Obj = dict[str, Any]


def read_json(response: Any) -> Obj:
    """The JSON body of a raw response (which is then closed)."""
    try:
        return json.loads(response.data or b"{}")
    finally:
        close_response(response)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a client error, None for anything else (a connection error)."""
    from kubernetes.client.exceptions import ApiException

    return exc.status if isinstance(exc, ApiException) else None


def api_message(exc: BaseException) -> str:
    """The API server's own words for an error (its Status message), else the exception's."""
    body = getattr(exc, "body", None)
    if body:
        try:
            message = json.loads(body).get("message")
        except (TypeError, ValueError, AttributeError):
            message = None
        if message:
            return str(message)
    reason = getattr(exc, "reason", None)
    status = getattr(exc, "status", None)
    if reason:
        return f"{status} {reason}" if status else str(reason)
    return f"{type(exc).__name__}: {exc}"


def api_reason(exc: BaseException) -> str:
    """The API server's machine-readable reason for an error (``ServerTimeout``, ``Forbidden``,
    ...), or "" when there is none."""
    body = getattr(exc, "body", None)
    try:
        return str(json.loads(body).get("reason") or "") if body else ""
    except (TypeError, ValueError, AttributeError):
        return ""


def close_response(response: Any) -> None:
    try:
        response.close()
        response.release_conn()
    except Exception:  # closed already, by us or by the other side
        pass


def interrupt_response(response: Any) -> None:
    """End a read another thread is blocked in (a watch, a followed log): shutting the socket
    down wakes it at once, where closing the response would wait for the reader's lock."""
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # not connected any more
        pass
