"""Every error the REST API returns has one JSON shape:

``{"error": {"code": 404, "reason": "NotFound", "message": "...", "errors": [...]}}``

``errors`` lists FieldError dicts (``path``, ``rule``, ``got``, ``hint``; ``document`` for a
multi-document apply) when the request broke field rules. This module maps the exceptions
of the layers below to that shape and status code, so routes never build error responses.
A 405 carries ``Allow`` with every method the path serves (RFC 9110 §15.5.6).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import Match, Mount

from muster.api.base import validate_dns_label, validate_dns_subdomain
from muster.api.errors import FieldError, InvalidObject
from muster.api.registry import UnknownKind
from muster.server.encoding import json_response
from muster.store import (
    AlreadyExists,
    Conflict,
    InvalidSelector,
    NotFound,
    StoreError,
    TooLarge,
    TooOld,
)

__all__ = [
    "ERROR_RESPONSES",
    "ApiError",
    "ErrorResponse",
    "error_body",
    "error_response",
    "install_error_handlers",
]

log = logging.getLogger(__name__)

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class FieldErrorBody(BaseModel):
    path: str = Field(description="Dotted field path, e.g. spec.replicaSpecs.Worker.replicas.")
    rule: str = Field(description="The rule broken, e.g. must be >= 1.")
    got: Any = Field(default=None, description="The offending value.")
    hint: str | None = Field(default=None, description="How to fix it.")
    document: int | None = Field(default=None, description="0-based document index (apply only).")


class ErrorBody(BaseModel):
    code: int = Field(description="The HTTP status code.")
    reason: str = Field(description="NotFound, AlreadyExists, Conflict, Expired, Invalid, Unauthorized, ...")
    message: str = Field(description="What went wrong, fit to show to a user.")
    errors: list[FieldErrorBody] = Field(
        default_factory=list, description="Field errors, when fields broke rules."
    )
    details: dict[str, Any] | None = Field(
        default=None,
        description="Forbidden: the user, verb, resource, namespace, name and the missing rule.",
    )


class ErrorResponse(BaseModel):
    """The shape of every error answer."""

    error: ErrorBody = Field(description="The error.")


# Every route documents this instead of FastAPI's own 422 shape, which this API never sends.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "default": {"model": ErrorResponse, "description": "An error; see docs/rest-api.md#errors."}
}


class ApiError(Exception):
    """An error a service raises with its HTTP status; ``errors`` are field-level details."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        errors: Sequence[dict[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Error")
        self.errors = list(errors)
        self.headers = dict(headers) if headers else None
        self.details = details


def error_body(
    code: int,
    message: str,
    reason: str | None = None,
    errors: Sequence[dict[str, Any]] = (),
    details: dict[str, Any] | None = None,
) -> dict:
    body: dict[str, Any] = {"code": code, "reason": reason or _REASONS.get(code, "Error"), "message": message}
    if errors:
        body["errors"] = list(errors)
    if details:
        body["details"] = details
    return {"error": body}


def error_response(
    code: int,
    message: str,
    reason: str | None = None,
    errors: Sequence[dict] = (),
    headers: Mapping[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> Response:
    extra = {"WWW-Authenticate": "Bearer"} if code == 401 else {}
    extra.update(headers or {})
    return json_response(
        error_body(code, message, reason, errors, details), status_code=code, headers=extra or None
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception a route can raise to the error shape above."""

    def handler(code: int, reason: str | None = None) -> Callable[[Request, Exception], Awaitable[Response]]:
        async def handle(_request: Request, exc: Exception) -> Response:
            return error_response(code, str(exc), reason)

        return handle

    app.add_exception_handler(NotFound, handler(404))
    app.add_exception_handler(AlreadyExists, handler(409, "AlreadyExists"))
    app.add_exception_handler(Conflict, handler(409))
    app.add_exception_handler(TooOld, handler(410))
    app.add_exception_handler(TooLarge, _too_large)
    app.add_exception_handler(InvalidSelector, handler(400))
    app.add_exception_handler(UnknownKind, handler(404))
    app.add_exception_handler(StoreError, handler(500))
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(InvalidObject, _invalid)
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)


async def _api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.code, exc.message, exc.reason, exc.errors, exc.headers, exc.details)


async def _too_large(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TooLarge)
    rule = {"path": "", "rule": f"an object must be at most {exc.limit} bytes as JSON", "got": exc.size}
    return error_response(413, str(exc), "RequestEntityTooLarge", [rule])


async def _invalid(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, InvalidObject)
    what = f"{exc.kind} {exc.name!r}" if exc.kind and exc.name else exc.kind or "object"
    return error_response(422, f"{what} is invalid: {exc}", errors=[e.to_dict() for e in exc.errors])


async def _request_invalid(_request: Request, exc: Exception) -> Response:
    # FastAPI's own parameter checks (query values, JSON syntax): same shape, 400.
    assert isinstance(exc, RequestValidationError)
    errors: list[FieldError] = []
    for err in exc.errors():
        parts = tuple(err.get("loc", ()))
        loc = ".".join(str(p) for p in parts)
        rule = str(err.get("msg", "invalid"))
        check = _URL_NAMES.get(parts) if isinstance(err.get("input"), str) else None
        if check is not None:  # a name in the URL: the naming rule, not a regular expression
            errors.append(FieldError(loc, _why(check, err["input"], rule), err["input"]))
        else:
            errors.append(FieldError(loc, rule))
    return error_response(400, "; ".join(str(e) for e in errors), errors=[e.to_dict() for e in errors])


_URL_NAMES: dict[tuple[Any, ...], Callable[[str], str]] = {
    ("path", "namespace"): validate_dns_label,
    ("path", "name"): validate_dns_subdomain,
    ("query", "container"): validate_dns_label,
}


def _why(check: Callable[[str], str], value: str, otherwise: str) -> str:
    try:
        check(value)
    except ValueError as exc:
        return str(exc)
    return otherwise


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    message = str(exc.detail)
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request) or headers.get("Allow", "")
        message = f"{request.method} is not allowed on {request.url.path}; it allows {headers['Allow']}"
    return error_response(exc.status_code, message, headers=headers)


def allowed_methods(request: Request) -> str:
    """Every method some route serves on the request's path, as an ``Allow`` value.

    Each (path, method) pair is a route of its own here, and the router reports a 405 with the
    methods of the first route whose path matched; so each method is tried against every route
    (through ``matches``, the one interface every kind of route and included router keeps)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Mount):  # the dashboard's static files: what StaticFiles serves
            if route.matches(request.scope)[0] is not Match.NONE:
                methods |= {"GET", "HEAD"}
            continue
        for method in _METHODS:
            if route.matches({**request.scope, "method": method})[0] is Match.FULL:
                methods.add(method)
    return ", ".join(sorted(methods))


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}")
