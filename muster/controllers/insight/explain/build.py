from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import muster.controllers.insight.explain.pending as pending_facts
from muster.api.conditions import condition, latest_condition
from muster.api.lifecycle import phase
from muster.api.podspec import NO_COMMAND_HINT, missing_command
from muster.api.quantity import fmt_amount
from muster.controllers.insight.explain.capacity import capacity_facts
from muster.controllers.insight.explain.elastic import elastic_facts
from muster.controllers.insight.explain.facts import (
    Explanation,
    FailureFacts,
    Obj,
    PodFacts,
    PreemptionFacts,
    WhyContext,
    event_row,
    pod_facts,
    where,
)
from muster.controllers.insight.usage import (
    QuotaRow,
    cluster_queue_of,
    is_finished,
    local_queue_map,
    quota_rows,
    workload_requests,
)
from muster.controllers.pods.stop import ended_by_stop
from muster.store.events import refers_to

__all__ = ["explain", "failing_pod", "recent_events"]

_RECENT_EVENTS = 5


def explain(target: Obj, ctx: WhyContext) -> Explanation:
    """The explanation of ``target`` (a TrainingJob, Workload or Pod) in its context."""
    kind = target["kind"]
    if kind == "TrainingJob":
        return _job(target, ctx)
    if kind == "Workload":
        return _workload(target, ctx, _blank(target))
    if kind == "Pod":
        return _pod(target, ctx)
    raise ValueError(f"cannot explain a {kind}; ask about a TrainingJob, a Workload or a Pod")


def failing_pod(pods: Sequence[Obj]) -> Obj | None:
    """The replica that failed first on its own (not stopped from outside), or None."""
    failed = [p for p in pods if phase(p) == "Failed" and not ended_by_stop(p)]
    if not failed:
        return None
    return min(failed, key=lambda p: ((p.get("status") or {}).get("finishTime") or "", p["metadata"]["name"]))


# -- per kind --------------------------------------------------------------------------------


def _job(job: Obj, ctx: WhyContext) -> Explanation:
    ex = _blank(job)
    cond = latest_condition(job)
    state = cond["type"] if cond else "Created"
    ex.state = state
    ex.preemptions = _preemptions(job, ctx.workload, ctx.events)
    ex.events = _events(ctx, job)
    ex.elastic = elastic_facts(job, ctx.workload)
    status = job.get("status") or {}
    if state == "Succeeded":
        ex.pods = pod_facts(ctx.pods)
        ex.summary = f"{ex.ref} succeeded" + _at(status.get("completionTime")) + _restarts(status)
        ex.reason, ex.message = cond.get("reason") or "Succeeded", cond.get("message") or ""  # type: ignore[union-attr]
        return ex
    if state == "Failed":
        ex.failure = _failure(cond, ctx)
        ex.reason, ex.message = ex.failure.reason, ex.failure.message
        ex.pods = pod_facts(ctx.pods)
        ex.summary = f"{ex.ref} failed: {ex.failure.reason}" + _replica_clause(ex.failure)
        ex.unblock = _failure_hints(ex.failure, job)
        return ex
    if state == "Suspended" or _suspended(job):
        ex.state = "Suspended"
        ex.reason, ex.message = (
            "Suspended",
            "spec.runPolicy.suspend is true: it holds no quota and runs no pods",
        )
        ex.summary = f"{ex.ref} is suspended"
        ex.unblock = [f"resume it: muster resume {ex.ref}"]
        return ex
    if state in ("Running", "Restarting"):
        ex.pods = pod_facts(ctx.pods)
        if state == "Restarting" and cond.get("reason") == "Resized":  # type: ignore[union-attr]
            ex.reason, ex.message = "Resized", cond.get("message") or ""  # type: ignore[union-attr]
            ex.summary = f"{ex.ref} is restarting its gang at a new size ({ex.message}) from its checkpoint"
        elif state == "Restarting":
            ex.failure = _failure(cond, ctx)
            ex.reason, ex.message = ex.failure.reason, ex.failure.message
            ex.summary = f"{ex.ref} is restarting its gang" + _replica_clause(ex.failure) + _restarts(status)
        else:
            ex.reason, ex.message = "Running", where(ex.pods)
            ex.summary = f"{ex.ref} is running: {where(ex.pods)}" + _restarts(status)
            if ex.elastic is not None:
                ex.summary += f"; it {ex.elastic.message}"
        if ctx.workload is not None:
            ex.queue = pending_facts.queue_facts(ctx.workload, ctx, admitted=True)
        return ex
    # Created, Queued, Preempted: its Workload says why it waits.
    if ctx.workload is None:
        ex.reason = "NoWorkload"
        ex.message = "the TrainingJob controller has not created its Workload yet"
        ex.summary = f"{ex.ref} is {state}: {ex.message}"
        ex.unblock = ["check that `muster up` is running (it runs the controllers)"]
        return ex
    inner = _workload(ctx.workload, ctx, ex)
    if inner.state == "Pending":
        inner.state = state  # the job's own word for waiting: Created, Queued or Preempted
    return inner


def _workload(wl: Obj, ctx: WhyContext, ex: Explanation) -> Explanation:
    """Fill ``ex`` (about the Workload or the job that owns it) from the Workload's state."""
    status = wl.get("status") or {}
    ex.requests = {r: fmt_amount(r, v) for r, v in workload_requests(wl).items()}
    if not ex.preemptions:
        ex.preemptions = _preemptions(None, wl, ctx.events)
    if not ex.events:
        ex.events = _events(ctx, wl)
    lq_map = local_queue_map(ctx.local_queues)
    cq_name = cluster_queue_of(wl, lq_map)
    cq = next((c for c in ctx.cluster_queues if c["metadata"]["name"] == cq_name), None)
    if cq is not None:
        ex.quota = _relevant(quota_rows(cq, ctx.workloads), ex.requests)
    if is_finished(wl):
        ex.state = "Finished"
        ex.summary = f"{ex.ref} has finished; its quota is released"
        return ex
    if status.get("admission"):
        ex.queue = pending_facts.queue_facts(wl, ctx, admitted=True)
        ex.pods = pod_facts(ctx.pods) or pending_facts.admitted_places(wl)
        evicted = condition(wl, "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            ex.state = "Evicting"
            ex.reason = evicted.get("reason") or "Evicted"
            ex.message = evicted.get("message") or ""
            ex.summary = (
                f"{ex.ref} is being evicted ({ex.reason}): its pods are stopping; it is requeued after"
            )
            return ex
        ex.state = "Admitted" if ex.kind == "Workload" else ex.state
        ex.reason = "Admitted"
        ex.message = f"admitted by ClusterQueue {status['admission'].get('clusterQueue')}: {where(ex.pods)}"
        ex.summary = f"{ex.ref} is admitted: {where(ex.pods)}"
        return ex
    ex.state = "Pending"
    pending_facts.fill_pending(ex, wl, cq, ctx)
    waiting = capacity_facts(wl, ctx)
    if waiting is not None:
        ex.capacity = waiting
        ex.blocker = waiting.message
        ex.summary = f"{ex.ref} is {waiting.message}"
        # The root cause (no GPU node yet, say) is what the node coming up sets right: its fix
        # is not the user's to do.
        cause = ex.root_cause
        done = {cause.action, *(c.action for c in cause.also)} if cause is not None else set()
        ex.unblock = [f"nothing to do: {waiting.message}", *(h for h in ex.unblock if h not in done)]
    return ex


def _pod(pod: Obj, ctx: WhyContext) -> Explanation:
    ex = _blank(pod)
    facts = pod_facts([pod])[0]
    ex.pods = [facts]
    ex.state = facts.phase
    ex.events = _events(ctx, pod)
    ex.preemptions = _preemptions(ctx.job, ctx.workload, ctx.events) if ctx.job or ctx.workload else []
    place = facts.node or "no node"
    if facts.gpus:
        place += (
            f" (GPU {','.join(str(g) for g in facts.gpus)}"
            + (f", {facts.gpu_milli}m" if facts.gpu_milli else "")
            + ")"
        )
    if facts.phase == "Pending":
        if facts.node:
            ex.reason = "Starting"
            ex.message = f"bound to {place}; the node's runtime has not started it yet"
            ex.summary = f"{ex.ref} is starting on {place}"
            ex.unblock = ["check that `muster up` is running (its executor starts bound pods)"]
        else:
            ex.reason = "Unbound"
            ex.message = "not bound to a node: its Workload is not admitted"
            ex.summary = f"{ex.ref} waits for its Workload to be admitted"
            if ctx.workload is not None:
                inner = _workload(ctx.workload, ctx, _blank(ctx.workload))
                ex.queue, ex.quota, ex.unblock = inner.queue, inner.quota, inner.unblock
                ex.message += f": {inner.reason} - {inner.message}"
        return ex
    if facts.phase == "Running":
        ex.reason, ex.message = "Running", f"running on {place}"
        ex.summary = f"{ex.ref} is running on {place}"
        return ex
    if facts.phase == "Failed":
        failure = FailureFacts(
            reason=facts.reason or "Error",
            message=facts.message,
            pod=facts,
            log_tail=list(ctx.log_tails.get(facts.name, [])),
        )
        ex.failure, ex.reason, ex.message = failure, failure.reason, failure.message
        ex.summary = f"{ex.ref} failed: {failure.reason}" + _exit_clause(facts)
        ex.unblock = _failure_hints(failure, ctx.job)
        return ex
    ex.reason, ex.message = facts.reason or facts.phase, facts.message
    ex.summary = f"{ex.ref} {facts.phase.lower()}" + _at(facts.finished)
    return ex


# -- facts -----------------------------------------------------------------------------------


def _blank(obj: Obj) -> Explanation:
    meta = obj["metadata"]
    return Explanation(
        kind=obj["kind"], namespace=meta.get("namespace"), name=meta["name"], state="", summary=""
    )


def _failure(cond: Obj | None, ctx: WhyContext) -> FailureFacts:
    """The job's failure reason (its condition's), with the replica that failed first."""
    pod = failing_pod(ctx.pods)
    facts = pod_facts([pod])[0] if pod is not None else None
    reason = (cond or {}).get("reason") or (facts.reason if facts else None) or "Failed"
    message = (cond or {}).get("message") or (facts.message if facts else "")
    tail = list(ctx.log_tails.get(facts.name, [])) if facts else []
    return FailureFacts(reason=reason, message=message, pod=facts, log_tail=tail)


def _failure_hints(failure: FailureFacts, job: Obj | None) -> list[str]:
    hints = []
    pod = failure.pod
    no_command = missing_command(pod.message) if pod is not None else None
    if pod is not None and no_command is not None:
        where, image = no_command
        entrypoint = f"the entrypoint of image {image!r}" if image else "no image entrypoint either"
        hints.append(
            f"{pod.replica} never started: {where}.command is not set and {entrypoint} does not run "
            f"on this runtime; {NO_COMMAND_HINT}, and re-apply"
        )
    elif pod is not None and pod.reason == "OOMKilled":
        hints.append(f"{pod.replica} ran out of memory: raise resources.limits.memory of its replica spec")
    elif pod is not None and pod.exit_code not in (None, 0):
        hints.append(f"{pod.replica} exited with code {pod.exit_code}: read its log (muster logs {pod.name})")
    policy = _run_policy(job) if job is not None else {}
    if failure.reason == "BackoffLimitExceeded":
        limit = policy.get("backoffLimit")
        hints.append(f"the gang restarted {limit} times (runPolicy.backoffLimit); fix the cause and re-apply")
    if failure.reason == "DeadlineExceeded":
        deadline = policy.get("activeDeadlineSeconds")
        hints.append(f"it ran past runPolicy.activeDeadlineSeconds ({deadline}s): raise it, or train less")
    return hints


def _preemptions(job: Obj | None, workload: Obj | None, events: Sequence[Obj]) -> list[PreemptionFacts]:
    """By whom and when: the job's preemption history, else the Workload's Preempted condition."""
    records = ((job or {}).get("status") or {}).get("preemptions") or []
    if records:
        return [
            PreemptionFacts(
                r.get("time"),
                r.get("preemptor"),
                r.get("reason") or "",
                r.get("message") or "",
                resumed_at=r.get("resumedAt"),
                checkpoint_found=r.get("checkpointFound"),
                checkpoint=r.get("checkpoint"),
            )
            for r in records
        ]
    if workload is None:
        return []
    cond = condition(workload, "Preempted")
    if cond is None or cond.get("status") != "True":
        return []
    by = (workload.get("status") or {}).get("preemptedBy")
    return [
        PreemptionFacts(
            cond.get("lastTransitionTime"), by, cond.get("reason") or "", cond.get("message") or ""
        )
    ]


def _events(ctx: WhyContext, *objs: Obj) -> list[dict[str, Any]]:
    """The latest warnings, preemptions and resizes about the objects (and the pods, for a job)."""
    about = [*objs, *(ctx.pods if objs and objs[0]["kind"] != "Pod" else ())]
    if ctx.job is not None and all(o is not ctx.job for o in about):
        about.append(ctx.job)
    if ctx.workload is not None and all(o is not ctx.workload for o in about):
        about.append(ctx.workload)
    picked = [
        e
        for e in ctx.events
        if (e.get("type") == "Warning" or e.get("reason") in ("Preempted", "Evicted", "Requeued", "Resized"))
        and any(refers_to(e, o) for o in about)
    ]
    return recent_events(picked)


def recent_events(events: Sequence[Obj]) -> list[dict[str, Any]]:
    """The latest few of ``events`` by time, as an explanation lists them."""
    picked = sorted(events, key=lambda e: e.get("lastTimestamp") or "")
    return [event_row(e) for e in picked[-_RECENT_EVENTS:]]


def _relevant(rows: list[QuotaRow], requests: Mapping[str, str]) -> list[QuotaRow]:
    """The quota rows of the resources asked for (all rows when it asks for none)."""
    asked = [r for r in rows if r.resource in requests]
    return asked or rows


def _suspended(job: Obj) -> bool:
    return bool(_run_policy(job).get("suspend"))


def _run_policy(job: Obj) -> Obj:
    return (job.get("spec") or {}).get("runPolicy") or {}


def _replica_clause(failure: FailureFacts) -> str:
    pod = failure.pod
    if pod is None:
        return ""
    return f" ({pod.replica}: {pod.reason or pod.phase}{_exit_clause(pod)})"


def _exit_clause(pod: PodFacts) -> str:
    return f", exit code {pod.exit_code}" if pod.exit_code not in (None, 0) else ""


def _restarts(status: Obj) -> str:
    n = int(status.get("restartCount") or 0)
    return f" after {n} restart{'s' if n != 1 else ''}" if n else ""


def _at(when: str | None) -> str:
    return f" at {when}" if when else ""
