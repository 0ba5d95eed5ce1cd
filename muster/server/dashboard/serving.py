"""``GET /ui/api/serving``: the Serving page's view: every InferenceService with its traffic
split, revisions (what the autoscaler decided), replicas (on which GPUs, in which state) and,
from the gateway of this process, its request rate and latency over the last half hour."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from muster.api.conditions import condition
from muster.server.dashboard.views import UI_API
from muster.server.encoding import json_response

__all__ = ["router"]

router = APIRouter(prefix=UI_API, tags=["dashboard"], include_in_schema=False)


@router.get("/serving")
def serving_view(request: Request) -> Response:
    store = request.app.state.store
    revision = store.revision()
    gateway = getattr(request.app.state, "gateway", None)
    services = []
    for isvc in store.list("InferenceService").items:
        meta, status = isvc["metadata"], isvc.get("status") or {}
        ns, name = meta.get("namespace") or "default", meta["name"]
        ready = condition(isvc, "Ready") or {}
        services.append(
            {
                "namespace": ns,
                "name": name,
                "url": status.get("url"),
                "models": status.get("modelNames") or isvc["spec"].get("modelNames") or [name],
                "ready": ready.get("status") == "True",
                "reason": ready.get("reason") or "",
                "message": ready.get("message") or "",
                "readyReplicas": status.get("readyReplicas", 0),
                "desiredReplicas": status.get("desiredReplicas", 0),
                "minReplicas": isvc["spec"].get("minReplicas", 1),
                "maxReplicas": isvc["spec"].get("maxReplicas"),
                "strategy": (isvc["spec"].get("loadBalancing") or {}).get("strategy", "PrefixLoad"),
                "traffic": status.get("traffic") or [],
                "revisions": [_revision(r) for r in status.get("revisions") or []],
                "replicas": status.get("replicas") or [],
                "series": gateway.series(ns, name) if gateway is not None else [],
            }
        )
    services.sort(key=lambda s: (s["namespace"], s["name"]))
    return json_response({"revision": revision, "gateway": gateway is not None, "services": services})


def _revision(rev: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": rev["name"],
        "createdAt": rev.get("createdAt"),
        "desiredReplicas": rev.get("desiredReplicas", 0),
        "readyReplicas": rev.get("readyReplicas", 0),
        "autoscaler": rev.get("autoscaler") or {},
    }
