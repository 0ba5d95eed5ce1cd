"""Why an InferenceService has the replicas it has: what the autoscaler saw and decided per
revision, the traffic split, and, for a replica that waits, the same explanation ``why`` gives
its Workload (the pending reason, the queue, the quota, the per-node verdicts, what would
unblock it); for a replica that failed, its reason and log tail.
"""

from __future__ import annotations

from typing import Any

from muster.api.conditions import condition
from muster.api.labels import SERVING_SERVICE_LABEL, WORKLOAD_LABEL
from muster.controllers.insight.explain.build import explain
from muster.controllers.insight.explain.facts import (
    Explanation,
    FailureFacts,
    WhyContext,
    event_row,
    pod_facts,
)
from muster.controllers.insight.explain.gather import Source, gather
from muster.controllers.insight.usage import is_pending

__all__ = ["explain_service", "gather_service"]

Obj = dict[str, Any]
_SHOWN_EVENTS = 8


def gather_service(source: Source, isvc: Obj, tail: int = 20, now: float | None = None) -> WhyContext:
    """The service's replicas (Workloads and pods) and events; the cluster around the first
    replica that waits, and the log tail of the first one that failed."""
    ns, name = isvc["metadata"].get("namespace") or "default", isvc["metadata"]["name"]
    workloads = source.list("Workload", ns, f"{SERVING_SERVICE_LABEL}={name}")
    pending = next((w for w in workloads if is_pending(w)), None)
    ctx = gather(source, pending, tail, now) if pending is not None else WhyContext(now=now)
    ctx.pods = source.list("Pod", ns, f"{SERVING_SERVICE_LABEL}={name}")
    ctx.workloads = [*ctx.workloads] if pending is not None else workloads
    ctx.events = source.list("Event", ns)
    failed = next((p for p in ctx.pods if (p.get("status") or {}).get("phase") == "Failed"), None)
    if failed is not None and tail:
        ctx.log_tails = {failed["metadata"]["name"]: source.log_tail(failed["metadata"]["name"], ns, tail)}
    ctx.workload = pending
    return ctx


def explain_service(isvc: Obj, ctx: WhyContext) -> Explanation:
    meta, status = isvc["metadata"], isvc.get("status") or {}
    ex = Explanation(
        kind="InferenceService", namespace=meta.get("namespace"), name=meta["name"], state="", summary=""
    )
    models = ", ".join(status.get("modelNames") or isvc["spec"].get("modelNames") or [meta["name"]])
    ready_cond = condition(isvc, "Ready") or {}
    predictor = condition(isvc, "PredictorReady") or {}
    ready, desired = int(status.get("readyReplicas") or 0), int(status.get("desiredReplicas") or 0)
    revisions = _revisions(status)
    ex.serving = {
        "url": status.get("url"),
        "models": status.get("modelNames") or [],
        "readyReplicas": ready,
        "desiredReplicas": desired,
        "revisions": revisions,
        "replicas": list(status.get("replicas") or []),
        "traffic": list(status.get("traffic") or []),
    }
    split = ", ".join(f"{t['revisionName']} {t['percent']}%" for t in status.get("traffic") or [])
    main = _main_revision(revisions)
    decided = main.get("autoscaler") or {} if main else {}
    ex.reason = "Autoscaler"
    ex.message = _autoscaler_sentence(main, isvc) if main else "no revision yet"
    ex.events = _events(ctx, isvc)
    if not status:
        ex.state, ex.reason = "Created", "NotReconciled"
        ex.message = "the InferenceService controller has not looked at it yet"
        ex.summary = f"{ex.ref} is new: {ex.message}"
        ex.unblock = ["check that `muster up` is running (it runs the controllers and the gateway)"]
        return ex
    ex.state = "Ready" if ready_cond.get("status") == "True" else "NotReady"
    if predictor.get("reason") == "ScaledToZero":
        ex.state = "ScaledToZero"
        ex.summary = (
            f"{ex.ref} is scaled to zero ({decided.get('reason', 'no demand')}); the next request for "
            f"{models} starts a replica and waits at the gateway until it is ready"
        )
        return ex
    ex.summary = f"{ex.ref} serves {models}: {ready} of {desired} replica(s) ready" + (
        f" ({split})" if split else ""
    )
    waiting = [r for r in status.get("replicas") or [] if r.get("state") == "Pending"]
    failed = [r for r in status.get("replicas") or [] if r.get("state") == "Failed"]
    if ctx.workload is not None and waiting:
        inner = explain(ctx.workload, ctx)
        ex.reason, ex.message = inner.reason, f"{waiting[0]['name']} waits: {inner.message}"
        ex.blocker, ex.queue, ex.quota, ex.requests = inner.blocker, inner.queue, inner.quota, inner.requests
        ex.nodes, ex.fragmentation, ex.fits_when = inner.nodes, inner.fragmentation, inner.fits_when
        ex.unblock = inner.unblock
        ex.summary += f"; {len(waiting)} replica(s) wait for admission: {inner.reason}"
    elif failed:
        pods = [p for p in ctx.pods if p["metadata"]["name"] == failed[0]["name"]]
        facts = pod_facts(pods)[0] if pods else None
        name = failed[0]["name"]
        ex.failure = FailureFacts(
            reason=(facts.reason if facts else None) or "Error",
            message=failed[0].get("message") or "",
            pod=facts,
            log_tail=list(ctx.log_tails.get(name, [])),
        )
        ex.reason, ex.message = (
            "ReplicaFailed",
            f"{name} exited ({failed[0].get('message', '')}); it is restarted",
        )
        ex.summary += f"; {name} exited and is being restarted"
        ex.unblock = [f"read its log: muster logs pod/{name}"]
    elif ready < desired:
        starting = [r["name"] for r in status.get("replicas") or [] if r.get("state") == "Starting"]
        if starting:
            ex.summary += f"; starting: {', '.join(starting)} (traffic once the readiness probe passes)"
    ex.pods = pod_facts(ctx.pods)
    return ex


def _revisions(status: Obj) -> list[Obj]:
    percent = {t["revisionName"]: t.get("percent", 0) for t in status.get("traffic") or []}
    out = []
    for rev in status.get("revisions") or []:
        out.append(
            {
                "name": rev["name"],
                "trafficPercent": percent.get(rev["name"], 0),
                "desiredReplicas": rev.get("desiredReplicas", 0),
                "readyReplicas": rev.get("readyReplicas", 0),
                "autoscaler": rev.get("autoscaler") or {},
            }
        )
    return out


def _main_revision(revisions: list[Obj]) -> Obj | None:
    """The revision taking the most traffic (the newest among equals)."""
    if not revisions:
        return None
    return max(revisions, key=lambda r: (r["trafficPercent"], r["name"]))


def _autoscaler_sentence(rev: Obj, isvc: Obj) -> str:
    a = rev.get("autoscaler") or {}
    if not a:
        return f"revision {rev['name']}: {rev['desiredReplicas']} replica(s) (no decision recorded yet)"
    spec = isvc["spec"]
    metric = spec.get("scaleMetric", "concurrency")
    unit = "requests in flight" if metric == "concurrency" else "requests per second"
    mode = "panic mode" if a.get("panicking") else "stable mode"
    low = spec.get("minReplicas", 1)
    high = spec.get("maxReplicas") or max(1, low)
    return (
        f"revision {rev['name']} wants {a.get('desired')} replica(s) ({mode}): it saw "
        f"{a.get('stable')} {unit} averaged over the stable window and {a.get('panic')} over the "
        f"panic window; {a.get('reason')} (bounds {low}..{high})"
    )


def _events(ctx: WhyContext, isvc: Obj) -> list[dict[str, Any]]:
    name = isvc["metadata"]["name"]
    replicas = {p["metadata"]["name"] for p in ctx.pods} | {
        (p["metadata"].get("labels") or {}).get(WORKLOAD_LABEL, "") for p in ctx.pods
    }
    picked = [
        e
        for e in ctx.events
        if (e["involvedObject"]["kind"] == "InferenceService" and e["involvedObject"]["name"] == name)
        or (e["involvedObject"]["name"] in replicas and e.get("type") == "Warning")
    ]
    picked.sort(key=lambda e: e.get("lastTimestamp") or "")
    return [event_row(e) for e in picked[-_SHOWN_EVENTS:]]
