"""What every route checks before it acts: its query parameters, the media type of the body it
reads (415) and of the answer the client accepts (406) (RFC 9110 §12, §15.5.7, §15.5.16).

Every route declares its query parameters, whether it reads a JSON body, and what it answers
(its 2xx ``content`` in the OpenAPI document, else its response class: JSON), so the checks
need no table of their own: :func:`check_request` runs as a dependency of every route. An
undeclared query parameter is a 400 on the documented API rather than silently ignored
(``?fieldSelector=...`` would otherwise return everything). Error answers are JSON whatever
``Accept`` says, as kube-apiserver's are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fastapi import Request
from fastapi.routing import APIRoute

from muster.server.errors import ApiError

__all__ = ["acceptable", "check_request", "offered"]

JSON = "application/json"


def check_request(request: Request) -> None:
    """Refuse the request when its query, its body or its ``Accept`` does not fit the route."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    if route.include_in_schema:
        unknown = sorted(set(request.query_params) - _query_names(route))
        if unknown:
            known = ", ".join(sorted(_query_names(route))) or "none"
            raise ApiError(
                400,
                f"unknown query parameter(s) {', '.join(map(repr, unknown))}; this endpoint takes: {known}",
                errors=[{"path": f"query.{name}", "rule": "unknown query parameter"} for name in unknown],
            )
    if route.body_field is not None and _has_body(request):
        media = _media_type(request.headers.get("content-type", ""))
        if not (media == JSON or (media.startswith("application/") and media.endswith("+json"))):
            got = f"Content-Type {media!r}" if media else "no Content-Type"
            raise ApiError(
                415,
                f"the request body must be JSON: send 'Content-Type: {JSON}' (got {got})",
                errors=[{"path": "Content-Type", "rule": f"must be {JSON}", "got": media or None}],
            )
    accept = request.headers.get("accept")
    types = offered(route)
    if accept is not None and not acceptable(accept, types):
        raise ApiError(
            406,
            f"{request.method} {request.url.path} answers {', '.join(types)}, which 'Accept: {accept}' "
            "does not take; accept one of those (or */*)",
            errors=[{"path": "Accept", "rule": f"must accept one of {', '.join(types)}", "got": accept}],
        )


def offered(route: APIRoute) -> list[str]:
    """The media types ``route`` answers with: its declared 2xx content, else its response class's."""
    types = [
        media
        for code, doc in route.responses.items()
        if str(code).startswith("2")
        for media in (doc.get("content") or {})
    ]
    if not types:
        response_class = getattr(route.response_class, "value", route.response_class)  # a FastAPI Default
        types = [getattr(response_class, "media_type", None) or JSON]
    return types


def acceptable(accept: str, types: Iterable[str]) -> bool:
    """Whether an ``Accept`` header takes one of ``types``: the most specific range that matches
    a type gives its weight, and a weight of 0 refuses it. An empty header takes anything."""
    ranges = [r for r in (_media_range(part) for part in accept.split(",")) if r is not None]
    if not accept.strip():
        return True
    for media in types:
        kind, _, sub = _media_type(media).partition("/")
        matches = [
            (specificity, q)
            for (rkind, rsub), q in ranges
            if (specificity := _specificity(rkind, rsub, kind, sub)) is not None
        ]
        if matches and max(matches)[1] > 0:
            return True
    return False


def _query_names(route: APIRoute) -> set[str]:
    names: set[str] = set()
    stack = [route.dependant]
    while stack:
        dependant = stack.pop()
        names |= {field.alias for field in dependant.query_params}
        stack.extend(dependant.dependencies)
    return names


def _specificity(rkind: str, rsub: str, kind: str, sub: str) -> int | None:
    if rkind == "*" and rsub == "*":
        return 0
    if rkind == kind and rsub == "*":
        return 1
    if rkind == kind and rsub == sub:
        return 2
    return None


def _media_range(part: str) -> tuple[tuple[str, str], float] | None:
    media, _, params = part.partition(";")
    kind, slash, sub = _media_type(media).partition("/")
    if not slash or not kind or not sub:
        return None  # not a media range: it matches nothing
    q = 1.0
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                weight = float(value.strip())
            except ValueError:
                weight = 1.0
            # A malformed weight reads as plainly wanted.
            q = min(max(weight, 0.0), 1.0) if math.isfinite(weight) else 1.0
    return (kind, sub), q


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in request.headers
