"""``/api/v1/...``: views over the whole cluster for front ends (the dashboard, scripts).

They compute with the same pure functions the CLI uses (:mod:`muster.controllers.explain`,
:mod:`muster.controllers.usage`, :mod:`muster.controllers.gpuview`), from the store and,
for GPU readings, the manager of this process. docs/rest-api.md gives the shapes.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from muster.api import registry
from muster.controllers.explain import explain
from muster.controllers.explain.gather import gather
from muster.controllers.gpuview import gpu_rows
from muster.controllers.usage import node_usage, queue_usage
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.views import StoreSource, manager_of

__all__ = ["INSIGHT_PREFIX", "router"]

INSIGHT_PREFIX = "/api/v1"
_EXPLAINED = ("TrainingJob", "Workload", "Pod")

router = APIRouter(tags=["insight"], responses=ERROR_RESPONSES)


@router.get(f"{INSIGHT_PREFIX}/why/{{kind}}/{{namespace}}/{{name}}", operation_id="why")
def why(
    request: Request,
    kind: str,
    namespace: str,
    name: str,
    tail: int = Query(20, ge=0, le=1000, description="Log lines of the failing replica to include."),
) -> Response:
    """Why a TrainingJob, Workload or Pod is where it is (``muster why`` as JSON)."""
    info = registry.lookup(kind)
    if info.kind not in _EXPLAINED:
        raise ApiError(400, f"cannot explain a {info.kind}; ask about a TrainingJob, a Workload or a Pod")
    source = StoreSource(request.app)
    obj = source.get(info.kind, name, namespace)
    if obj is None:
        raise ApiError(404, f"{info.kind} {namespace}/{name} not found")
    return json_response(explain(obj, gather(source, obj, tail, now=time.time())).to_dict())


@router.get(f"{INSIGHT_PREFIX}/gpus", operation_id="gpus")
def gpus(
    request: Request,
    history: bool = Query(True, description="Include each GPU's readings (oldest first)."),
    history_seconds: float = Query(
        600.0, alias="historySeconds", gt=0, description="How far back the readings go."
    ),
) -> Response:
    """Every GPU of every node: holders, health, latest reading and recent readings."""
    store = request.app.state.store
    manager = manager_of(request.app)
    readings = {}
    sample_seconds = None
    if manager is not None:
        readings = manager.gpus.history(since=manager.ctx.now() - history_seconds if history else None)
        sample_seconds = manager.gpus.interval if manager.gpus.enabled else None
    rows = gpu_rows(store.list("Node").items, store.list("Pod").items, readings)
    return json_response(
        {
            "sampleSeconds": sample_seconds,
            "gpus": [row.to_dict(with_history=history) for row in rows],
        }
    )


@router.get(f"{INSIGHT_PREFIX}/queues/usage", operation_id="queueUsage")
def queues_usage(request: Request) -> Response:
    """Per ClusterQueue: pending and admitted Workloads, and quota usage per flavor and resource."""
    store = request.app.state.store
    usage = queue_usage(
        store.list("ClusterQueue").items, store.list("LocalQueue").items, store.list("Workload").items
    )
    return json_response({"clusterQueues": [q.to_dict() for q in usage]})


@router.get(f"{INSIGHT_PREFIX}/nodes/usage", operation_id="nodeUsage")
def nodes_usage(request: Request) -> Response:
    """Per node: readiness, cordon, pods, and each resource allocated against allocatable."""
    store = request.app.state.store
    usage = node_usage(store.list("Node").items, store.list("Pod").items)
    return json_response({"nodes": [n.to_dict() for n in usage]})
