"""The checks of ``muster doctor`` about work that cannot go on (see
:mod:`muster.controllers.insight.doctor`): jobs that failed, and waiting Workloads that can
never be admitted as the cluster is or that a fact which could be set right keeps out (an
unhealthy GPU, a cordoned or lost node, a queue's borrowing or lending limit, no GPUs at
all). The waiting ones are explained as ``muster why`` explains them, and reported by the
root cause it names, so one broken GPU is one finding however many jobs wait on it."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from muster.api.conditions import condition
from muster.api.labels import JOB_NAME_LABEL
from muster.api.lifecycle import JobPhase, job_phase
from muster.controllers.insight.explain import Explanation, WhyContext, explain, failing_pod
from muster.controllers.insight.explain.facts import pod_facts
from muster.controllers.insight.explain.pending import queue_time
from muster.controllers.insight.explain.placement import snapshot_of
from muster.controllers.insight.explain.rootcause import REASONS
from muster.controllers.insight.findings import (
    Finding,
    Inputs,
    Obj,
    Thresholds,
    capped,
    object_ref,
    owner_ref,
)
from muster.controllers.insight.usage import is_pending

__all__ = ["blocked", "failed"]

_EXPLAINED = 8  # kinds of waiting Workload explained per scan (each runs the scheduler's what-ifs)


def failed(inp: Inputs, _t: Thresholds) -> list[Finding]:
    """TrainingJobs that failed (backoffLimit, deadline, a replica that exited), with the
    replica that failed first."""
    found: list[tuple[str, str, str]] = []  # object, reason, evidence line
    failed_jobs = [job for job in inp.jobs if job_phase(job) is JobPhase.FAILED]
    if not failed_jobs:
        return []
    pods_of: dict[tuple[str, str], list[Obj]] = {}  # one pass over the pods, not one per failed job
    for p in inp.pods:
        job_name = (p["metadata"].get("labels") or {}).get(JOB_NAME_LABEL)
        if job_name is not None:
            pods_of.setdefault((p["metadata"].get("namespace") or "default", job_name), []).append(p)
    for job in sorted(failed_jobs, key=object_ref):
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        cond = condition(job, "Failed") or {}
        reason = cond.get("reason") or "Failed"
        first = failing_pod(pods_of.get((ns, name), []))
        replica = ""
        if first is not None:
            facts = pod_facts([first])[0]
            code = f", exit code {facts.exit_code}" if facts.exit_code not in (None, 0) else ""
            replica = f" ({facts.replica}: {facts.reason or facts.phase}{code})"
        obj = f"trainingjob/{ns}/{name}"
        line = (
            f"{obj}: {reason}{replica}"
            + (f": {cond['message']}" if cond.get("message") else "")
            + (f" at {cond['lastTransitionTime']}" if cond.get("lastTransitionTime") else "")
        )
        found.append((obj, reason, line))
    if not found:
        return []
    _, ns, name = found[0][0].split("/")
    others = " (and the same for the others)" if len(found) > 1 else ""
    title = (
        f"trainingjob {ns}/{name} failed: {found[0][1]}" if len(found) == 1 else f"{len(found)} jobs failed"
    )
    return [
        Finding(
            "warning",
            "JobFailed",
            title,
            [obj for obj, _r, _l in found],
            capped([line for _o, _r, line in found]),
            f"muster why job/{name} -n {ns}{others} shows the replica that failed first and its log tail; "
            "fix the cause, then delete the job and apply it again",
        )
    ]


def blocked(inp: Inputs, _t: Thresholds) -> list[Finding]:
    """Waiting Workloads that no GPU exists for, that can never be admitted as the cluster is,
    or that would be admitted now but for a fact that could be set right; one finding per
    root cause (or, without one, per ClusterQueue). Those a NodePool's node is coming up for
    are left out."""
    groups: dict[str, list[Obj]] = {}
    for wl in sorted(inp.workloads, key=lambda w: (queue_time(w), object_ref(w))):
        pending = (wl.get("status") or {}).get("pending") or {}
        if is_pending(wl) and pending.get("reason") in REASONS:
            groups.setdefault(_shape(wl), []).append(wl)
    found: dict[tuple[str, str], _Blocked] = {}
    shared = _context(inp)
    if groups:
        snapshot_of(shared, None)  # one snapshot of the cluster for every explanation below
    for members in list(groups.values())[:_EXPLAINED]:
        ex = explain(members[0], dataclasses.replace(shared, workload=members[0]))
        if ex.capacity is not None:
            continue  # a NodePool's node is coming up for it: the wait is being acted on
        cause = ex.root_cause
        never = ex.reason == "ExceedsMaxQuota" or (ex.fits_when is not None and ex.fits_when.never)
        if cause is not None and cause.kind == "NoGPUs":
            key = ("NoGPUs", "")
        elif never:
            key = ("NeverFits", cause.object if cause else f"clusterqueue/{_queue(ex)}")
        elif cause is not None:
            key = ("AvoidableWait", cause.object)
        else:
            continue
        found.setdefault(key, _Blocked(key[0], ex)).add(members, ex)
    return [b.finding() for b in found.values()]


# -- helpers ---------------------------------------------------------------------------------


@dataclass
class _Blocked:
    """Waiting Workloads reported together: the code, the first explanation (its root cause and
    fix stand for all), and one evidence line per Workload."""

    code: str
    first: Explanation
    objects: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def add(self, members: list[Obj], ex: Explanation) -> None:
        for wl in members:
            self.objects.append(owner_ref(wl))
            self.lines.append(f"{owner_ref(wl)}: {ex.reason}" + (f": {ex.blocker}" if ex.blocker else ""))

    def finding(self) -> Finding:
        ex, cause, n = self.first, self.first.root_cause, len(self.objects)
        fix = cause.action if cause else (ex.unblock[0] if ex.unblock else "")
        evidence = capped(self.lines)
        if cause is not None:  # the title names the first cause, but for missing GPUs
            named = [] if self.code != "NoGPUs" else [f"root cause: {cause.message}"]
            evidence = [*named, *(f"and: {c.message}" for c in cause.also), *evidence]
        objects = ([cause.object] if cause and cause.object.count("/") == 1 else []) + self.objects
        if self.code == "NoGPUs":
            title = f"no node has GPUs: {n} workload(s) that ask for GPUs can never run"
            return Finding("critical", "NoGPUs", title, objects, evidence, fix)
        if self.code == "NeverFits":
            why = cause.message if cause else ex.blocker or ex.reason or ""
            title = f"{n} workload(s) can never be admitted as the cluster is: {why}"
            return Finding("warning", "NeverFits", title, objects, evidence, fix)
        title = f"{cause.message if cause else ''}: it keeps {n} workload(s) waiting that would run now"
        return Finding("warning", "AvoidableWait", title, objects, evidence, fix)


def _context(inp: Inputs) -> WhyContext:
    return WhyContext(
        cluster_queues=inp.cluster_queues,
        local_queues=inp.local_queues,
        workloads=inp.workloads,
        nodes=inp.nodes,
        all_pods=inp.pods,
        flavors=inp.flavors,
        topologies=inp.topologies,
        cohorts=inp.cohorts,
        priority_classes=inp.priority_classes,
        jobs=inp.jobs,
        node_claims=inp.node_claims,
        now=inp.now,
    )


def _shape(wl: Obj) -> str:
    """Workloads of one queue asking for the same pods wait for the same reason."""
    spec = wl.get("spec") or {}
    pending = (wl.get("status") or {}).get("pending") or {}
    key = [wl["metadata"].get("namespace"), spec.get("queueName"), spec.get("podSets"), pending.get("reason")]
    return json.dumps(key, sort_keys=True, default=str)


def _queue(ex: Explanation) -> str:
    return (ex.queue.cluster_queue if ex.queue else None) or "(none)"
