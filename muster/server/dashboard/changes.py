"""``GET /ui/api/changes``: one NDJSON stream per browser tab saying *that* something changed.

A page shows views over several kinds (the overview: nodes, pods, Workloads, queues, events).
Watching each kind would take one connection per kind, and a browser opens at most six
HTTP/1.1 connections per server for all its tabs together, so a few tabs would starve each
other (and the log tail). Instead a tab holds this one stream of small notices over every
kind and refetches its page's view when a kind it shows changed.

The first line is ``{"type": "SYNC", "resourceVersion": "N"}``: from there on every change
after revision N is reported, so a page that (re)loads its view after SYNC misses nothing.
Then one line per change: ``{"type": "MODIFIED", "kind": "Pod", "namespace": "default",
"name": "mnist-worker-0", "resourceVersion": "N+1"}``. Objects are not sent: the views are
computed on the server, and a notice is a few dozen bytes however large the object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from muster.api import registry
from muster.server.access.guard import AUTHENTICATED, Access, access_of, namespace_of, requires
from muster.server.access.rbac import Visibility
from muster.server.dashboard.views import UI_API
from muster.server.encoding import dumps
from muster.server.errors import ApiError
from muster.server.streaming import Relay, relay_response
from muster.server.watch import watch_failure
from muster.store import Store, WatchEvent

__all__ = ["router"]

router = APIRouter(prefix=UI_API, tags=["dashboard"], include_in_schema=False)


@router.get("/changes", responses={200: {"content": {"application/x-ndjson": {}}}})
@requires(AUTHENTICATED)
def changes(
    request: Request,
    kinds: str | None = Query(None, description="Comma-separated kinds to report (default: every kind)."),
) -> Response:
    """Notices of changes to objects of ``kinds`` that the identity may watch, from now on, until
    the client leaves (or its token is revoked)."""
    wanted = _kinds(kinds)
    access = access_of(request)
    store: Store = request.app.state.store
    revision = store.revision()
    events = store.watch(None, None, since=revision)

    def close() -> None:
        with contextlib.suppress(ValueError):  # see muster.server.watch: a generator may refuse
            events.close()  # type: ignore[attr-defined]

    relay = Relay(
        _notices(revision, events, wanted, _Seen(access)),
        dumps_line,
        watch_failure,
        on_close=close,
        thread_name="muster-ui",
    )
    return relay_response(request, relay, media_type="application/x-ndjson")


def dumps_line(value: dict[str, Any]) -> bytes:
    return dumps(value) + b"\n"


class _Seen:
    """Whether the identity may watch an object, by the policy as it is when the change comes."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._authorizer: object = None
        self._by_kind: dict[str, Visibility] = {}

    def __call__(self, obj: dict[str, Any]) -> bool:
        control, user = self.access.control, self.access.user
        if user.is_admin:
            return True
        if not control.still_valid(user):
            raise ApiError(401, "the token was revoked or has expired", "Unauthorized")
        if control.authorizer is not self._authorizer:
            self._authorizer, self._by_kind = control.authorizer, {}
        kind = str(obj.get("kind"))
        vis = self._by_kind.get(kind)
        if vis is None:
            try:
                vis = self._by_kind[kind] = self.access.visible(kind, "watch")
            except registry.UnknownKind:  # an internal kind (token records): never shown
                vis = self._by_kind[kind] = Visibility()
        return vis.allows(namespace_of(obj), obj["metadata"]["name"])


def _notices(
    revision: int, events: Iterator[WatchEvent], kinds: frozenset[str] | None, seen: _Seen
) -> Iterator[dict[str, Any]]:
    yield {"type": "SYNC", "resourceVersion": str(revision)}
    for ev in events:
        kind = ev.object.get("kind")
        if kinds is not None and kind not in kinds:
            continue
        if not seen(ev.object):
            continue
        meta = ev.object.get("metadata") or {}
        yield {
            "type": ev.type,
            "kind": kind,
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "resourceVersion": meta.get("resourceVersion"),
        }


def _kinds(text: str | None) -> frozenset[str] | None:
    if not text:
        return None
    out = set()
    for name in text.split(","):
        if name.strip():
            try:
                out.add(registry.lookup(name.strip()).kind)
            except registry.UnknownKind as exc:
                raise ApiError(400, f"kinds: {exc}") from None
    return frozenset(out)
