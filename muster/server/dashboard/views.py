"""The dashboard's JSON views: one answer per page that shows more than one of the insight
views (``/api/v1``, :mod:`muster.server.routes.insight`), computed from the store in-process by
the same pure functions (:mod:`muster.controllers.insight.usage`, :mod:`muster.controllers.insight.gpuview`,
:mod:`muster.controllers.insight.explain`), so the pages show exactly what the CLI says. Pages that
show one view (nodes and GPU readings) read ``/api/v1`` directly.

Every answer carries ``revision``, the store's revision read *before* the objects were, so a
page that refetches when :mod:`.changes` reports a later revision never misses a change. With a
manager in this process the objects it caches come from its cache, once that has applied every
change up to that revision (:func:`muster.server.views.consistent_source`): no decoding of every
stored job for a page.

Any signed-in identity may ask; each view holds only what that identity may list (jobs,
events, LocalQueues of its namespaces; ClusterQueues and nodes if it may list them; GPUs held
by pods it may not see show as held, without names), and a job's view says which changes the
identity may make (``can``), so the page offers only the buttons that will work.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from muster.api.common import GPU
from muster.api.conditions import condition, latest_condition
from muster.api.labels import pod_name
from muster.api.lifecycle import phase
from muster.api.quantity import fmt_amount
from muster.controllers.insight.explain import explain
from muster.controllers.insight.explain.gather import gather
from muster.controllers.insight.gpuview import gpu_rows
from muster.controllers.insight.usage import queue_usage, workload_requests
from muster.server.access.guard import AUTHENTICATED, Access, access_of, requires
from muster.server.encoding import json_response
from muster.server.errors import ApiError
from muster.server.views import StoreSource, consistent_source
from muster.store import Store
from muster.store.events import about_owned_by, last_occurred, refers_to

__all__ = ["UI_API", "recent_events", "replica_pods", "router"]

UI_API = "/ui/api"
_RECENT_EVENTS = 40
_WHY_LOG_LINES = 20

router = APIRouter(prefix=UI_API, tags=["dashboard"], include_in_schema=False)

Obj = Mapping[str, Any]


@router.get("/overview")
@requires(AUTHENTICATED)
def overview(request: Request) -> Response:
    """Every GPU with who holds it, quota usage per ClusterQueue, recent events, how many nodes
    are ready, jobs per state."""
    source, revision = consistent_source(request.app)
    access = access_of(request)
    nodes, pods = _seen(access, source, "Node"), access.redacted_pods(source.list("Pod"))
    workloads = source.list_live("Workload")  # quota usage: those pending or holding quota
    states: dict[str, int] = {}
    for job in _seen(access, source, "TrainingJob"):
        state = _state(latest_condition(job))
        states[state] = states.get(state, 0) + 1
    return json_response(
        {
            "revision": revision,
            "gpus": [row.to_dict(with_history=False) for row in gpu_rows(nodes, pods)],
            "nodes": {
                "total": len(nodes),
                "ready": sum(1 for n in nodes if (condition(n, "Ready") or {}).get("status") == "True"),
            },
            "queues": [
                q.to_dict()
                for q in queue_usage(
                    _seen(access, source, "ClusterQueue"), source.list("LocalQueue"), workloads
                )
            ],
            "events": recent_events(_newest_events(access, source), _RECENT_EVENTS),
            "jobStates": states,
        }
    )


@router.get("/queues")
@requires(AUTHENTICATED)
def queues_view(request: Request) -> Response:
    """ClusterQueues with their usage against quota and policies, and the LocalQueues."""
    source, revision = consistent_source(request.app)
    access = access_of(request)
    cluster_queues, local_queues = _seen(access, source, "ClusterQueue"), source.list("LocalQueue")
    usage = {
        q.name: q.to_dict() for q in queue_usage(cluster_queues, local_queues, source.list_live("Workload"))
    }
    local_queues = access.filter("LocalQueue", local_queues)
    rows = []
    for cq in cluster_queues:
        spec = cq.get("spec") or {}
        rows.append(
            {
                **usage[cq["metadata"]["name"]],
                "strategy": spec.get("queueingStrategy") or "BestEffortFIFO",
                "preemption": spec.get("preemption") or {},
                "stopPolicy": spec.get("stopPolicy"),
                "fairSharingWeight": (spec.get("fairSharing") or {}).get("weight"),
            }
        )
    locals_ = [
        {
            "namespace": lq["metadata"].get("namespace") or "default",
            "name": lq["metadata"]["name"],
            "clusterQueue": (lq.get("spec") or {}).get("clusterQueue"),
            "stopPolicy": (lq.get("spec") or {}).get("stopPolicy"),
        }
        for lq in local_queues
    ]
    return json_response({"revision": revision, "clusterQueues": rows, "localQueues": locals_})


@router.get("/jobs")
@requires(AUTHENTICATED)
def jobs_view(
    request: Request,
    q: str = Query("", description="Only jobs whose name or namespace contains this (any case)."),
    state: str = Query("", description="Only jobs in this state (Running, Queued, Failed, ...)."),
    queue: str = Query("", description="Only jobs of this LocalQueue."),
    limit: int | None = Query(
        None, ge=1, le=1000, description="At most this many rows, newest first (every row when absent)."
    ),
    offset: int = Query(0, ge=0, description="Matching rows skipped before the first returned."),
) -> Response:
    """TrainingJobs newest first, one row each: state and its reason (the latest condition),
    queue, size. ``total`` counts the jobs the identity may see, ``matched`` those the filters
    keep, ``queues`` names the queues of them all (the filter's choices); ``limit`` and
    ``offset`` page the matched rows, so a page of a large cluster carries only its rows."""
    source, revision = consistent_source(request.app)
    seen = _seen(access_of(request), source, "TrainingJob")
    needle = q.strip().lower()
    matched = [
        job
        for job in seen
        if (not needle or needle in job["metadata"]["name"].lower() or needle in _namespace(job).lower())
        and (not queue or _queue_of(job) == queue)
        and (not state or _state(latest_condition(job)) == state)
    ]
    matched.sort(key=lambda job: job["metadata"].get("creationTimestamp") or "", reverse=True)
    page = matched[offset : offset + limit] if limit is not None else matched[offset:]
    # Only the page's rows need their Workload (for the GPUs): read each, not every Workload.
    rows = [_job_row(job, source.get("Workload", _workload_name(job), _namespace(job))) for job in page]
    return json_response(
        {
            "revision": revision,
            "jobs": rows,
            "total": len(seen),
            "matched": len(matched),
            "offset": offset,
            "queues": sorted({_queue_of(job) for job in seen}),
        }
    )


@router.get("/jobs/{namespace}/{name}")
@requires(AUTHENTICATED)
def job_view(request: Request, namespace: str, name: str) -> Response:
    """A job with its explanation (``muster why``), pods, replicas, and every event about it;
    ``can`` says which changes the identity may make to it."""
    access = access_of(request)
    access.check("get", "trainingjobs", namespace, name)
    source = StoreSource(_store(request), request.app)
    revision = source.store.revision()
    job = source.get("TrainingJob", name, namespace)
    if job is None:
        raise ApiError(404, f"TrainingJob {namespace}/{name} not found")
    ctx = gather(source, job, _WHY_LOG_LINES, now=time.time())
    replicas = replica_pods(job, ctx.pods)
    about: list[Obj] = [job, *ctx.pods]
    if ctx.workload is not None:
        about.append(ctx.workload)
    # The pods of earlier runs are gone but their events name this job (by uid) as related;
    # a deleted job of the same name, and its pods, are someone else's history.
    events = [e for e in ctx.events if any(refers_to(e, o) for o in about) or about_owned_by(e, job)]
    return json_response(
        {
            "revision": revision,
            "job": job,
            "row": _job_row(job, ctx.workload),
            "workload": ctx.workload,
            "why": explain(job, ctx).to_dict(),
            "replicas": replicas,
            "events": recent_events(events, len(events)),
            "can": {verb: access.can(verb, "trainingjobs", namespace, name) for verb in ("update", "delete")},
        }
    )


def recent_events(events: Iterable[Obj], limit: int) -> list[dict[str, Any]]:
    """The ``limit`` most recent events, newest first, as rows."""
    ordered = sorted(events, key=last_occurred, reverse=True)
    rows = []
    for e in ordered[:limit]:
        ref = e.get("involvedObject") or {}
        rows.append(
            {
                "namespace": ref.get("namespace"),
                "kind": ref.get("kind"),
                "name": ref.get("name"),
                "type": e.get("type") or "Normal",
                "reason": e.get("reason") or "",
                "message": e.get("message") or "",
                "count": e.get("count") or 1,
                "lastTimestamp": e.get("lastTimestamp") or e.get("firstTimestamp"),
            }
        )
    return rows


def replica_pods(job: Obj, pods: Sequence[Obj]) -> list[dict[str, Any]]:
    """Every replica of the job (``master-0``, ``worker-1``, ...) with its pod if one exists now:
    the spec names the pods a run has, and their logs outlive them."""
    by_name = {p["metadata"]["name"]: p for p in pods}
    job_name = job["metadata"]["name"]
    out = []
    for rtype, replica in ((job.get("spec") or {}).get("replicaSpecs") or {}).items():
        for index in range(int(replica.get("replicas") or 0)):
            name = pod_name(job_name, rtype, index)
            out.append(_replica(name, f"{rtype.lower()}-{index}", by_name.pop(name, None)))
    out.extend(_replica(name, name, pod) for name, pod in sorted(by_name.items()))  # elastic extras
    return out


# -- rows --------------------------------------------------------------------------------------


def _job_row(job: Obj, workload: Obj | None) -> dict[str, Any]:
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    cond = latest_condition(job)
    replicas = sum(int(r.get("replicas") or 0) for r in (spec.get("replicaSpecs") or {}).values())
    gpus = workload_requests(workload).get(GPU) if workload is not None else None
    return {
        "namespace": _namespace(job),
        "name": meta["name"],
        "state": _state(cond),
        "reason": (cond or {}).get("reason") or "",
        "message": (cond or {}).get("message") or "",
        "queue": _queue_of(job),
        "priorityClass": spec.get("priorityClassName"),
        "replicas": replicas,
        "gpus": None if gpus is None else fmt_amount(GPU, gpus),
        "restarts": int(status.get("restartCount") or 0),
        "preemptions": len(status.get("preemptions") or []),
        "created": meta.get("creationTimestamp"),
        "started": status.get("startTime"),
        "completed": status.get("completionTime"),
    }


def _state(latest: Mapping[str, Any] | None) -> str:
    """A job's state as the pages show it, from its latest True condition."""
    return latest["type"] if latest else "Created"


def _replica(name: str, replica: str, pod: Obj | None) -> dict[str, Any]:
    spec, status = (pod or {}).get("spec") or {}, (pod or {}).get("status") or {}
    return {
        "pod": name,
        "replica": replica,
        "exists": pod is not None,
        "uid": (pod or {}).get("metadata", {}).get("uid"),
        "phase": phase(pod) if pod is not None else None,
        "reason": status.get("reason"),
        "node": spec.get("nodeName"),
        "gpus": list(spec.get("gpus") or []),
        "gpuMilli": spec.get("gpuMilli"),
        "containers": [c["name"] for c in spec.get("containers") or []],
        "started": status.get("startTime"),
        "finished": status.get("finishTime"),
    }


def _namespace(obj: Obj) -> str:
    return obj["metadata"].get("namespace") or "default"


def _queue_of(job: Obj) -> str:
    return (job.get("spec") or {}).get("queueName") or "default"


def _workload_name(job: Obj) -> str:
    return (job.get("status") or {}).get("workload") or job["metadata"]["name"]


# -- reading -----------------------------------------------------------------------------------


def _store(request: Request) -> Store:
    return request.app.state.store


def _newest_events(access: Access, source: StoreSource) -> list[Obj]:
    vis = access.visible("Event")
    return source.newest_events(_RECENT_EVENTS, lambda ns, name: vis.everything or vis.allows(ns, name))


def _seen(access: Access, source: StoreSource, kind: str) -> list[dict[str, Any]]:
    """The objects of ``kind`` the identity may list."""
    return access.filter(kind, source.list(kind))
