"""Content negotiation: 415 for a body the route cannot read, 406 for an answer the client
would not accept (RFC 9110 §12, §15.5.7, §15.5.16).

Every route declares what it answers (its 2xx ``content`` in the OpenAPI document, else its
response class: JSON) and whether it reads a JSON body, so the check needs no table of its
own: :func:`negotiate` runs as a dependency of every route, before the route does anything.
Error answers are JSON whatever ``Accept`` says, as kube-apiserver's are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from fastapi import Request
from fastapi.routing import APIRoute

from muster.server.errors import ApiError

__all__ = ["acceptable", "negotiate", "offered"]

JSON = "application/json"


def negotiate(request: Request) -> None:
    """Refuse the request when its body or its ``Accept`` does not fit the route."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
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
