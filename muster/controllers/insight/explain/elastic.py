"""An elastic TrainingJob's size in ``muster why``: the workers it runs, its minReplicas and
maxReplicas, why it is not larger (the Workload's ``status.elastic.held``: what the scheduler
found missing for one more worker, or the cool-down) and its recent resizes."""

from __future__ import annotations

from typing import Any

from muster.controllers.insight.explain.facts import ElasticFacts, Obj

__all__ = ["elastic_facts"]

_RESIZES_SHOWN = 3


def elastic_facts(job: Obj, workload: Obj | None) -> ElasticFacts | None:
    """The size facts of ``job`` (None when it has no elasticPolicy)."""
    spec = job.get("spec") or {}
    policy = spec.get("elasticPolicy")
    if policy is None:
        return None
    replicas = int(((spec.get("replicaSpecs") or {}).get("Worker") or {}).get("replicas", 1))
    low = int(policy.get("minReplicas") or policy.get("maxReplicas") or replicas)
    high = int(policy.get("maxReplicas") or policy.get("minReplicas") or replicas)
    wstatus = (workload or {}).get("status") or {}
    workers = _admitted_workers(wstatus)
    held = (wstatus.get("elastic") or {}).get("held") or {}
    resizes: list[dict[str, Any]] = list(((job.get("status") or {}).get("resizes") or [])[-_RESIZES_SHOWN:])
    bounds = f"minReplicas {low}, maxReplicas {high}"
    if workers is None:
        message = f"waits to be admitted with {low} to {high} workers ({bounds})"
    elif workers >= high:
        message = f"runs at its full size: {workers} workers ({bounds})"
    elif held:
        message = f"runs {workers} of {high} workers ({bounds}); not larger: {held.get('message', '')}"
    else:
        message = f"runs {workers} of {high} workers ({bounds}); the scheduler looks for room to grow it"
    return ElasticFacts(
        workers=workers or 0,
        min_replicas=low,
        max_replicas=high,
        message=message,
        held_reason=held.get("reason") if workers is not None and workers < high else None,
        held_message=held.get("message", "") if workers is not None and workers < high else "",
        resizes=resizes,
    )


def _admitted_workers(wstatus: Obj) -> int | None:
    admission = wstatus.get("admission")
    if not admission:
        return None
    return sum(int(a["count"]) for a in admission.get("podSetAssignments") or () if a.get("name") == "worker")
