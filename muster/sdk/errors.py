"""Typed errors of :class:`muster.sdk.client.Client`, one per REST error reason.

NotFound, AlreadyExists, Conflict and TooOld also derive from the store's errors of the same
name, so code written against the Store (a controller) handles them the same way whether it
talks to the store in-process or to a server over HTTP.
"""

from __future__ import annotations

from typing import Any

from muster.api.errors import FieldError
from muster.store.errors import AlreadyExists, Conflict, NotFound, TooOld

__all__ = [
    "ApiError",
    "ApiNotFound",
    "ApiUnavailable",
    "BadRequest",
    "Forbidden",
    "Invalid",
    "InvalidServerUrl",
    "ObjectAlreadyExists",
    "ObjectConflict",
    "RequestTooLarge",
    "ResourceExpired",
    "ResourceVersionTooLarge",
    "Unauthorized",
    "error_from_response",
]


class ApiError(Exception):
    """An error answer of the server: HTTP ``code``, ``reason`` and ``message``; ``errors``
    holds field errors (dicts with path, rule, got, hint and, for apply, document)."""

    def __init__(
        self, code: int, reason: str, message: str, errors: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.errors = errors or []

    def field_errors(self) -> list[tuple[int | None, FieldError]]:
        """``(document index or None, FieldError)`` for each field error."""
        return [(e.get("document"), FieldError.from_dict(e)) for e in self.errors]


class ApiUnavailable(ApiError):
    """No server answered at the URL (connection refused, DNS, timeout)."""

    def __init__(self, url: str, cause: str) -> None:
        super().__init__(0, "Unavailable", f"no Muster server at {url} ({cause})")
        self.url = url


class BadRequest(ApiError):
    pass


class InvalidServerUrl(ValueError):
    """A server address that is not ``http(s)://HOST:PORT``; the message names where it came
    from (``--server``, ``MUSTER_SERVER`` or ``server.json``) and the form expected."""


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    """403: the identity may not do it; ``details`` names the verb, resource, namespace and the
    missing rule."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(code, reason, message, errors)
        self.details = details or {}


class Invalid(ApiError):
    """422: the object or a document broke field rules; nothing was stored."""


class ApiNotFound(ApiError, NotFound):
    pass


class ObjectAlreadyExists(ApiError, AlreadyExists):
    pass


class ObjectConflict(ApiError, Conflict):
    pass


class ResourceExpired(ApiError, TooOld):
    """410: a watch's resourceVersion was compacted; list again and watch from there."""


class ResourceVersionTooLarge(BadRequest):
    """400: a watch or list from a revision the server has not reached; list again."""


class RequestTooLarge(ApiError):
    """413: the request body or the object it would store is over the server's limit (the
    message names it)."""


_BY_REASON: dict[str, type[ApiError]] = {
    "NotFound": ApiNotFound,
    "AlreadyExists": ObjectAlreadyExists,
    "Conflict": ObjectConflict,
    "Expired": ResourceExpired,
    "Invalid": Invalid,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "BadRequest": BadRequest,
    "ResourceVersionTooLarge": ResourceVersionTooLarge,
    "RequestEntityTooLarge": RequestTooLarge,
}


def error_from_response(code: int, body: Any) -> ApiError:
    """The typed error for an error response (``body`` is its parsed JSON, or text)."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ApiError(code, "Error", f"HTTP {code}: {str(body)[:500]}")
    reason = str(err.get("reason", "Error"))
    cls = _BY_REASON.get(reason, ApiError)
    errors = err.get("errors") if isinstance(err.get("errors"), list) else None
    if cls is Forbidden:
        details = err.get("details") if isinstance(err.get("details"), dict) else None
        return Forbidden(code, reason, str(err.get("message", "")), errors, details)
    return cls(code, reason, str(err.get("message", "")), errors)
