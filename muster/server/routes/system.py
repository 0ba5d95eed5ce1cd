"""Health, readiness, metrics, version and API discovery."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from muster import __version__
from muster.api import registry
from muster.api.base import API_VERSION
from muster.server.access.guard import PUBLIC, requires
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, error_response
from muster.server.routes.objects import API_PREFIX

__all__ = ["router"]

router = APIRouter(tags=["system"], responses=ERROR_RESPONSES)


@router.get("/healthz", operation_id="healthz")
@requires(PUBLIC)
def healthz() -> Response:
    """Liveness; the one endpoint that needs no token."""
    return json_response({"status": "ok"})


@router.get("/readyz", operation_id="readyz")
def readyz(request: Request) -> Response:
    """Readiness: the store answers and every start-up hook has run."""
    if not getattr(request.app.state, "ready", False):
        return error_response(503, "starting up")
    try:
        revision = request.app.state.store.revision()
    except Exception as exc:
        return error_response(503, f"store unavailable: {exc}")
    return json_response({"status": "ok", "revision": revision})


@router.get(
    "/metrics",
    operation_id="metrics",
    responses={200: {"description": "The Prometheus text format.", "content": {"text/plain": {}}}},
)
def metrics(request: Request) -> Response:
    """Prometheus metrics."""
    return request.app.state.metrics.response()


@router.get("/version", operation_id="version")
def version() -> Response:
    return json_response({"version": __version__, "apiVersion": API_VERSION})


@router.get(API_PREFIX, operation_id="discovery")
def discovery() -> Response:
    """Every kind the server serves: plural, scope, short names, subresources."""
    resources = [
        {
            "kind": info.kind,
            "name": info.plural,
            "singularName": info.singular,
            "shortNames": list(info.short_names),
            "namespaced": info.namespaced,
            "subresources": ["status"] if info.has_status else [],
        }
        for info in registry.kinds()
    ]
    return json_response(
        {"apiVersion": "v1", "kind": "APIResourceList", "groupVersion": API_VERSION, "resources": resources}
    )
