"""``/api/v1/...``: views over the whole cluster for front ends (the dashboard, scripts).

They compute with the same pure functions the CLI uses (:mod:`muster.controllers.insight.explain`,
:mod:`muster.controllers.insight.usage`, :mod:`muster.controllers.insight.gpuview`), from the store and,
for GPU readings, the manager of this process. docs/rest-api.md gives the shapes. ``why`` needs
``get`` on the object; the GPU and node views ``list nodes`` (pods of namespaces the caller may
not see are shown without their names); queue usage ``list clusterqueues``; ``doctor`` is a
non-resource URL (``/api/v1/doctor``: cluster-admin and queue-admin).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from muster.api import registry
from muster.api.labels import EXPERIMENT_LABEL
from muster.config import settings
from muster.controllers.insight.checks import IDLE_COST_WINDOW, watched_pods
from muster.controllers.insight.doctor import diagnose, report
from muster.controllers.insight.explain import explain
from muster.controllers.insight.explain.experiment import explain_experiment
from muster.controllers.insight.explain.gather import gather
from muster.controllers.insight.explain.serving import explain_service, gather_service
from muster.controllers.insight.explain.workflow import explain_workflow, gather_workflow
from muster.controllers.insight.findings import Inputs, Thresholds
from muster.controllers.insight.gpuview import gpu_rows
from muster.controllers.insight.usage import QueueUsage, gpu_usage, node_usage, queue_usage
from muster.server.access.guard import Requirement, access_of, requires
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.views import StoreSource, consistent_source, insight_source, manager_of

__all__ = ["INSIGHT_PREFIX", "doctor_inputs", "router"]

INSIGHT_PREFIX = "/api/v1"
_EXPLAINED = ("TrainingJob", "Workflow", "Workload", "Pod", "Experiment", "InferenceService")

router = APIRouter(tags=["insight"], responses=ERROR_RESPONSES)
# GPU and node views: whoever may list nodes; pods the caller may not see show as hidden holders.
_LIST_NODES = Requirement("list", "nodes")


@router.get(f"{INSIGHT_PREFIX}/why/{{kind}}/{{namespace}}/{{name}}", operation_id="why")
@requires(Requirement("get", "{kind}", namespace_param="namespace", name_param="name"))
def why(
    request: Request,
    kind: str,
    namespace: str,
    name: str,
    tail: int = Query(20, ge=0, le=1000, description="Log lines of the failing replica to include."),
) -> Response:
    """Why a TrainingJob, Workflow, Workload or Pod is where it is, how an Experiment's trials
    stand, or why an InferenceService has the replicas it has (``muster why`` as JSON)."""
    info = registry.lookup(kind)
    if info.kind not in _EXPLAINED:
        raise ApiError(
            400,
            f"cannot explain a {info.kind}; ask about a TrainingJob, a Workflow, a Workload, a Pod, "
            "an Experiment or an InferenceService",
        )
    source = insight_source(request.app)
    obj = source.get(info.kind, name, namespace)
    if obj is None:
        raise ApiError(404, f"{info.kind} {namespace}/{name} not found")
    if info.kind == "Experiment":
        selector = f"{EXPERIMENT_LABEL}={name}"
        return json_response(
            explain_experiment(
                obj,
                source.list("Trial", namespace, selector),
                source.list("Pod", namespace, selector),
                source.list("Event", namespace),
            ).to_dict()
        )
    if info.kind == "InferenceService":
        answer = explain_service(obj, gather_service(source, obj, tail, now=time.time()))
        manager = manager_of(request.app)
        if manager is not None and answer.serving is not None:  # the autoscaler's latest, not the stored
            for rev in answer.serving["revisions"]:
                live = manager.serving.decision(namespace, name, rev["name"])
                rev["autoscaler"] = live or rev["autoscaler"]
    elif info.kind == "Workflow":
        answer = explain_workflow(obj, gather_workflow(source, obj, tail, now=time.time()))
    else:
        answer = explain(obj, gather(source, obj, tail, now=time.time()))
    return json_response(answer.to_dict())


@router.get(f"{INSIGHT_PREFIX}/gpus", operation_id="gpus")
@requires(_LIST_NODES)
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
    pods = access_of(request).redacted_pods(store.list("Pod").items)
    rows = gpu_rows(store.list("Node").items, pods, readings)
    return json_response(
        {
            "sampleSeconds": sample_seconds,
            "gpus": [row.to_dict(with_history=history) for row in rows],
        }
    )


@router.get(f"{INSIGHT_PREFIX}/doctor", operation_id="doctor")
def doctor(
    request: Request,
    idle_threshold: float | None = Query(
        None,
        alias="idleThreshold",
        ge=0,
        le=100,
        description="Percent utilisation under which a GPU is idle.",
    ),
    idle_minutes: float | None = Query(
        None, alias="idleMinutes", gt=0, description="Minutes an allocated GPU must stay idle."
    ),
    pending_minutes: float | None = Query(
        None, alias="pendingMinutes", ge=0, description="Minutes a Workload may wait before it is reported."
    ),
    restarts: int | None = Query(None, ge=1, description="Gang restarts that make a restart loop."),
    idle_pool_cost: float | None = Query(
        None, alias="idlePoolCost", ge=0, description="Idle cost per hour of a NodePool that is reported."
    ),
) -> Response:
    """Every finding of ``muster doctor``, most severe first, with evidence and a fix."""
    s = settings()
    given = {
        "idle_threshold": idle_threshold if idle_threshold is not None else s.doctor_idle_threshold,
        "idle_minutes": idle_minutes if idle_minutes is not None else s.doctor_idle_minutes,
        "pending_minutes": pending_minutes if pending_minutes is not None else s.doctor_pending_minutes,
        "restarts": restarts if restarts is not None else s.doctor_restarts,
        "idle_pool_cost": idle_pool_cost if idle_pool_cost is not None else s.doctor_idle_pool_cost,
    }
    thresholds = Thresholds(**{k: v for k, v in given.items() if v is not None})
    # A running manager's cache, once it has every change the store had when asked: no finished
    # object decoded again, and the OOM kills from its Event index (not every stored Event).
    source, _revision = consistent_source(request.app)
    manager = manager_of(request.app)
    now = manager.ctx.now() if manager is not None else time.time()
    history: dict = {}
    sample_seconds = None
    if manager is not None and manager.gpus.enabled:
        window = thresholds.idle_minutes * 60 + 2 * manager.gpus.interval
        history, sample_seconds = manager.gpus.history(since=now - window), manager.gpus.interval
    inputs = doctor_inputs(source, now, history, sample_seconds)
    return json_response(report(diagnose(inputs, thresholds), inputs, thresholds))


def doctor_inputs(source: StoreSource, now: float, history: dict, sample_seconds: float | None) -> Inputs:
    """What the doctor's checks read, from ``source``: on a running manager no stored object is
    decoded but the few Events about the pods of jobs not finished (the OOM kills it counts,
    found through its Event index); its cost ledger has the pool records in memory."""
    jobs = source.list("TrainingJob")
    return Inputs(
        nodes=source.list("Node"),
        pods=source.list("Pod"),
        workloads=source.list_live("Workload"),  # the checks look at pending and admitted ones
        jobs=jobs,
        cluster_queues=source.list("ClusterQueue"),
        local_queues=source.list("LocalQueue"),
        events=source.events_named("Pod", watched_pods(jobs)),
        flavors=source.list("ResourceFlavor"),
        topologies=source.list("Topology"),
        cohorts=source.list("Cohort"),
        priority_classes=source.list("PriorityClass"),
        history=history,
        sample_seconds=sample_seconds,
        now=now,
        usage_records=source.pool_usage_records(now - IDLE_COST_WINDOW),
        node_claims=source.list("NodeClaim"),
    )


@router.get(f"{INSIGHT_PREFIX}/queues/usage", operation_id="queueUsage")
@requires(Requirement("list", "clusterqueues"))
def queues_usage(request: Request) -> Response:
    """Per ClusterQueue: pending and admitted Workloads, and quota usage per flavor and resource."""
    return json_response(
        {"clusterQueues": [q.to_dict() for q in queues_usage_of(insight_source(request.app))]}
    )


def queues_usage_of(source: StoreSource) -> list[QueueUsage]:
    """The queues' usage from ``source``: only pending Workloads and those holding quota count,
    so a running manager's cache answers from the Workloads in play, not every one stored."""
    return queue_usage(source.list("ClusterQueue"), source.list("LocalQueue"), source.list_live("Workload"))


@router.get(f"{INSIGHT_PREFIX}/nodes/usage", operation_id="nodeUsage")
@requires(_LIST_NODES)
def nodes_usage(request: Request) -> Response:
    """Per node: readiness, cordon, pods, and each resource allocated against allocatable."""
    store = request.app.state.store
    usage = node_usage(store.list("Node").items, store.list("Pod").items)
    return json_response({"nodes": [n.to_dict() for n in usage]})


@router.get(f"{INSIGHT_PREFIX}/gpus/usage", operation_id="gpuUsage")
@requires(_LIST_NODES)
def gpus_usage(request: Request) -> Response:
    """Per GPU of every node: model, memory, health and the pods holding it (whole or a share)."""
    store = request.app.state.store
    usage = gpu_usage(store.list("Node").items, access_of(request).redacted_pods(store.list("Pod").items))
    return json_response({"gpus": [g.to_dict() for g in usage]})
