"""The checks of ``muster doctor`` (see :mod:`muster.controllers.insight.doctor`). Each takes the
:class:`Inputs` and the :class:`Thresholds` and returns its findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from muster.api.conditions import condition, epoch
from muster.api.labels import DRAIN_ANNOTATION, pod_name
from muster.api.lifecycle import JobPhase, is_final, job_phase
from muster.api.quantity import fmt_amount
from muster.controllers.insight.cost import cost_report
from muster.controllers.insight.explain.pending import queue_time
from muster.controllers.insight.explain.rootcause import gpu_repair_action, uncordon_action
from muster.controllers.insight.findings import (
    Finding,
    Inputs,
    Obj,
    Thresholds,
    capped,
    object_ref,
    owner_ref,
)
from muster.controllers.insight.gpuview import gpu_rows
from muster.controllers.insight.stuck import blocked, failed
from muster.controllers.insight.usage import (
    cluster_queue_of,
    is_pending,
    local_queue_map,
    quota_rows,
    scheduler_amount,
)
from muster.controllers.nodes.gpumonitor import GpuReading
from muster.controllers.nodes.health import GPU_UNHEALTHY_TAINT

__all__ = ["CHECKS", "IDLE_COST_WINDOW", "watched_pods"]

_GPU = "nvidia.com/gpu"
# What the idle-pool check looks back over (the cost ledger keeps as much of pool records in
# memory: RECENT_POOL_SECONDS).
IDLE_COST_WINDOW = 3600.0


def nodes(inp: Inputs, _t: Thresholds) -> list[Finding]:
    """Nodes that stopped answering, GPUs that are unhealthy, nodes cordoned."""
    out = []
    bound: dict[str, list[str]] = {}
    for pod in inp.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and not is_final(pod):
            bound.setdefault(node, []).append(object_ref(pod))
    for node in sorted(inp.nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        status, spec = node.get("status") or {}, node.get("spec") or {}
        ready = condition(node, "Ready") or {}
        if ready.get("status") != "True":
            evidence = [
                f"Ready is {ready.get('status', 'missing')}: "
                f"{ready.get('reason', '')} {ready.get('message', '')}".rstrip()
            ]
            beat = epoch(status.get("lastHeartbeatTime"))
            if beat is not None:
                evidence.append(f"last heartbeat {status['lastHeartbeatTime']} ({_ago(inp.now - beat)} ago)")
            if bound.get(name):
                evidence.append(f"pods still bound there: {', '.join(sorted(bound[name])[:5])}")
            out.append(
                Finding(
                    "critical",
                    "NodeNotReady",
                    f"node {name} is not ready",
                    [f"node/{name}"],
                    evidence,
                    "check the machine and the muster runtime on it; its jobs were requeued to run "
                    f"elsewhere. A node gone for good: muster delete node {name}",
                )
            )
        bad = [g for g in status.get("gpus") or [] if g.get("health", "Healthy") != "Healthy"]
        if bad:
            evidence = [
                f"GPU {g['index']} ({g.get('uuid', '')}): {g.get('healthReason') or 'unhealthy'}" for g in bad
            ]
            if any(_same_taint(t) for t in spec.get("taints") or []):
                evidence.append("the taint nvidia.com/gpu=unhealthy:NoSchedule keeps new pods off the node")
            out.append(
                Finding(
                    "critical",
                    "GPUUnhealthy",
                    f"{len(bad)} GPU(s) of node {name} unhealthy",
                    [f"node/{name}"],
                    evidence,
                    gpu_repair_action(name, [int(g["index"]) for g in bad])
                    + "; the taint goes once every GPU is healthy",
                )
            )
        if spec.get("unschedulable"):
            drain = (node["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION)
            evidence = ["spec.unschedulable is true: no new pods are placed there"]
            if drain:
                evidence.append(f"drained at {drain}")
            out.append(
                Finding(
                    "info",
                    "NodeCordoned",
                    f"node {name} is cordoned",
                    [f"node/{name}"],
                    evidence,
                    uncordon_action(name),
                )
            )
    return out


def jobs(inp: Inputs, t: Thresholds) -> list[Finding]:
    """Active jobs that keep running out of memory, or keep restarting their gang."""
    ooms: dict[tuple[str, str], int] = {}
    for e in inp.events:
        ref = e.get("involvedObject") or {}
        if e.get("reason") == "OOMKilled" and ref.get("kind") == "Pod":
            key = (ref.get("namespace") or "default", ref.get("name", ""))
            ooms[key] = ooms.get(key, 0) + int(e.get("count") or 1)
    out = []
    for job in sorted(inp.jobs, key=object_ref):
        if job_phase(job) in (JobPhase.SUCCEEDED, JobPhase.FAILED):
            continue
        ns, name = job["metadata"].get("namespace") or "default", job["metadata"]["name"]
        status, replicas = job.get("status") or {}, (job.get("spec") or {}).get("replicaSpecs") or {}
        restarts = int(status.get("restartCount") or 0)
        limit = ((job.get("spec") or {}).get("runPolicy") or {}).get("backoffLimit")
        backoff = f"{restarts} gang restart(s) so far" + (
            f" (backoffLimit {limit})" if limit is not None else ""
        )
        killed = {pod: ooms.get((ns, pod), 0) for pod in _replica_pods(job)}
        total = sum(killed.values())
        obj = f"trainingjob/{ns}/{name}"
        if total >= 2:
            evidence = [f"{pod} OOMKilled {n} time(s)" for pod, n in sorted(killed.items()) if n]
            evidence.append(backoff)
            evidence += [
                f"{rtype} memory limit: {_memory_limit(r) or 'none'}" for rtype, r in replicas.items()
            ]
            out.append(
                Finding(
                    "warning",
                    "OOMLoop",
                    f"trainingjob {ns}/{name} keeps running out of memory ({total} OOM kills)",
                    [obj],
                    evidence,
                    "raise resources.limits.memory of its replicas, or lower the batch size; every restart "
                    "loses the work done since the last checkpoint",
                )
            )
        elif restarts >= t.restarts:
            last = (condition(job, "Restarting") or {}).get("message") or ""
            out.append(
                Finding(
                    "warning",
                    "RestartLoop",
                    f"trainingjob {ns}/{name} restarted its gang {restarts} times",
                    [obj],
                    [backoff] + ([f"last restart: {last}"] if last else []),
                    f"muster why job/{name} -n {ns} shows the failing replica and its log tail; fix the "
                    "cause and re-apply",
                )
            )
    return out


def watched_pods(jobs: Iterable[Obj]) -> list[tuple[str, str]]:
    """(namespace, name) of the pods of the jobs not finished: those whose ``OOMKilled`` Events
    :func:`jobs` counts, any incarnation (so a caller may pass the Events about these alone)."""
    return [
        (job["metadata"].get("namespace") or "default", pod)
        for job in jobs
        if job_phase(job) not in (JobPhase.SUCCEEDED, JobPhase.FAILED)
        for pod in _replica_pods(job)
    ]


def idle_gpus(inp: Inputs, t: Thresholds) -> list[Finding]:
    """GPUs held by running pods for the whole window whose utilisation never reached the threshold."""
    if inp.sample_seconds is None:
        return []
    window = t.idle_minutes * 60
    start = inp.now - window
    per_owner: dict[tuple[str, str], list[str]] = {}
    for row in gpu_rows(inp.nodes, inp.pods, inp.history):
        holders = [h for h in row.holders if h.phase == "Running" and (epoch(h.since) or inp.now) <= start]
        readings = [r for r in row.history if r.time >= start]
        utils = [r.utilization for r in readings if r.utilization is not None]
        if not holders or not utils or not _covers(readings, start, inp.now, inp.sample_seconds):
            continue
        if max(utils) * 100 >= t.idle_threshold:
            continue
        mean = sum(utils) / len(utils)
        for h in holders:
            per_owner.setdefault((h.namespace, h.job or h.pod), []).append(
                f"GPU {row.index} of node {row.node} (pod {h.pod}): mean {mean:.1%}, max {max(utils):.1%} "
                f"over the last {_ago(window)} ({len(utils)} readings)"
            )
    out = []
    for (ns, owner), evidence in sorted(per_owner.items()):
        is_job = any(
            j["metadata"]["name"] == owner and (j["metadata"].get("namespace") or "default") == ns
            for j in inp.jobs
        )
        obj = f"trainingjob/{ns}/{owner}" if is_job else f"pod/{ns}/{owner}"
        out.append(
            Finding(
                "warning",
                "IdleGPU",
                f"{obj.split('/')[0]} {ns}/{owner} holds {len(evidence)} GPU(s) idle for {_ago(window)}",
                [obj],
                evidence,
                "if it is stuck (data loading, a deadlock) read its log (muster logs); if it no longer needs "
                f"the GPUs, free them: muster suspend job/{owner} -n {ns} (or delete it)",
            )
        )
    return out


def waiting(inp: Inputs, t: Thresholds) -> list[Finding]:
    """Gangs that fragmentation keeps out, and Workloads waiting longer than the threshold
    (one finding per ClusterQueue: a backlog is one problem, not hundreds)."""
    lq_map = local_queue_map(inp.local_queues)
    blocked: list[tuple[str, int, int, Obj]] = []  # owner, pods, GPUs per pod, pending details
    late: dict[str, list[tuple[float, str, Obj]]] = {}  # queue -> (waited, owner, pending)
    for wl in sorted(inp.workloads, key=object_ref):
        if not is_pending(wl):
            continue
        pending = (wl.get("status") or {}).get("pending") or {}
        details = pending.get("details") or {}
        gang = _gang(wl)
        free = details.get("freeGpus")
        if pending.get("reason") == "InsufficientResources" and gang and free is not None:
            pods, per_pod = gang
            if free >= pods * per_pod and int(details.get("largestFreeGpuBlock") or 0) < per_pod:
                blocked.append((owner_ref(wl), pods, per_pod, details))
        since = epoch(queue_time(wl))
        if since is not None and inp.now - since >= t.pending_minutes * 60:
            cq = cluster_queue_of(wl, lq_map) or "(no ClusterQueue)"
            late.setdefault(cq, []).append((inp.now - since, owner_ref(wl), pending))
    out = [_fragmented(blocked)] if blocked else []
    for cq, items in sorted(late.items()):
        items.sort(key=lambda i: (-i[0], i[1]))
        longest, first = items[0][0], items[0][1]
        kind, ns, name = first.split("/")
        evidence = capped(
            [
                f"{obj}: waiting {_ago(waited)}"
                + (f"; {p.get('reason')}: {p.get('message', '')}" if p else "")
                for waited, obj, p in items
            ]
        )
        out.append(
            Finding(
                "warning",
                "PendingTooLong",
                f"{len(items)} workload(s) of ClusterQueue {cq} waited over {_ago(t.pending_minutes * 60)} "
                f"for admission (the longest {_ago(longest)})",
                [obj for _w, obj, _p in items],
                evidence,
                f"muster why {kind}/{name} -n {ns} (and the same for the others) names what keeps it out "
                "and what would let it in",
            )
        )
    return out


def _fragmented(blocked: list[tuple[str, int, int, Obj]]) -> Finding:
    details = blocked[0][3]
    evidence = [
        f"{details.get('freeGpus')} free GPUs spread over {details.get('nodesWithFreeGpus')} nodes; the "
        f"largest free block is {details.get('largestFreeGpuBlock')}"
    ]
    evidence += capped([f"{obj} needs {pods} pod(s) of {per_pod} GPUs" for obj, pods, per_pod, _d in blocked])
    return Finding(
        "warning",
        "FragmentationBlocksGang",
        f"{len(blocked)} waiting gang(s) would fit in the free GPUs, but no node has a block large enough",
        [obj for obj, *_ in blocked],
        evidence,
        "pack new work (muster up --placement binpack or fgd), ask for fewer GPUs per pod, or drain a "
        "lightly used node (muster node drain) to free a whole block",
    )


def quota(inp: Inputs, _t: Thresholds) -> list[Finding]:
    """Quota a ClusterQueue leaves unused while a queue outside its cohort waits for quota."""
    lq_map = local_queue_map(inp.local_queues)
    by_name = {q["metadata"]["name"]: q for q in inp.cluster_queues}
    short: dict[tuple[str, str], list[tuple[Obj, Any]]] = {}  # (queue, resource) -> waiting, missing
    for wl in inp.workloads:
        pending = (wl.get("status") or {}).get("pending") or {}
        if not is_pending(wl) or pending.get("reason") != "QuotaExhausted":
            continue
        cq = cluster_queue_of(wl, lq_map)
        for s in (pending.get("details") or {}).get("shortfalls") or []:
            missing = max(0, int(s["requested"]) - max(int(s["available"]), 0))
            short.setdefault((cq or "", s["resource"]), []).append((wl, missing))
    out = []
    for (waiting_cq, resource), waiters in sorted(short.items()):
        cohort = ((by_name.get(waiting_cq) or {}).get("spec") or {}).get("cohort")
        for other in sorted(by_name):
            spec = by_name[other].get("spec") or {}
            if other == waiting_cq or (cohort and spec.get("cohort") == cohort):
                continue
            unused = sum(
                (
                    r.nominal - r.used
                    for r in quota_rows(by_name[other], inp.workloads)
                    if r.resource == resource
                ),
                Fraction(0),
            )
            if unused <= 0:
                continue
            need = scheduler_amount(resource, max(m for _w, m in waiters))
            who = ", ".join(owner_ref(w) for w, _m in waiters[:5])
            out.append(
                Finding(
                    "warning",
                    "QuotaUnusedWhileOthersWait",
                    f"ClusterQueue {other} leaves {fmt_amount(resource, unused)} {resource} of quota unused "
                    f"while {len(waiters)} workload(s) of {waiting_cq} wait for quota",
                    [f"clusterqueue/{other}", f"clusterqueue/{waiting_cq}"],
                    [
                        f"{other}: {fmt_amount(resource, unused)} {resource} of nominal quota unused",
                        f"{waiting_cq}: {who} wait (QuotaExhausted; the largest needs {need} more)",
                        f"{other} and {waiting_cq} share no cohort, so nothing can be borrowed",
                    ],
                    f"put {other} and {waiting_cq} in one cohort (spec.cohort) so {waiting_cq} may borrow "
                    f"what {other} does not use (with reclaimWithinCohort {other} takes it back), or move "
                    "nominalQuota",
                )
            )
    return out


def pool_idle_cost(inp: Inputs, t: Thresholds) -> list[Finding]:
    """NodePools paying for nodes nothing runs on: idle cost per hour over the last hour."""
    start = inp.now - IDLE_COST_WINDOW
    report = cost_report(inp.usage_records, start, inp.now, by="pool")
    hours = IDLE_COST_WINDOW / 3600.0
    out = []
    for pool in report.pools:
        per_hour = pool.idle_cost / hours
        if pool.pool == "(no pool)" or per_hour <= t.idle_pool_cost:
            continue
        out.append(
            Finding(
                "warning",
                "PoolIdleCost",
                f"NodePool {pool.pool} paid {per_hour:.2f} per hour for idle capacity over the last hour",
                [f"nodepool/{pool.pool}"],
                [
                    f"its nodes cost {pool.cost:.2f} in the last hour, {pool.allocated_cost:.2f} of it "
                    f"allocated to pods ({pool.idle_pct:.0f}% idle)",
                    f"the threshold is {t.idle_pool_cost:.2f} per hour (MUSTER_DOCTOR_IDLE_POOL_COST)",
                ],
                "lower the pool's minNodes, shorten consolidation.ttlSecondsAfterEmpty, or set "
                "consolidation.repackUnderutilized so half-used nodes are emptied (docs/capacity.md)",
            )
        )
    return out


CHECKS: tuple[Callable[[Inputs, Thresholds], list[Finding]], ...] = (
    nodes,
    jobs,
    failed,
    idle_gpus,
    waiting,
    blocked,
    quota,
    pool_idle_cost,
)


# -- helpers ---------------------------------------------------------------------------------


def _covers(readings: list[GpuReading], start: float, now: float, interval: float) -> bool:
    """The readings span the window: the first near its start, the last recent."""
    slack = max(1.5 * interval, 1.0)
    return bool(readings) and readings[0].time <= start + slack and readings[-1].time >= now - 2 * slack


def _replica_pods(job: Obj) -> list[str]:
    """The names of the pods a job's replicas run as (every incarnation has the same)."""
    name, replicas = job["metadata"]["name"], (job.get("spec") or {}).get("replicaSpecs") or {}
    return [
        pod_name(name, rtype, i)
        for rtype, replica in replicas.items()
        for i in range(int((replica or {}).get("replicas", 1) or 0))
    ]


def _gang(wl: Obj) -> tuple[int, int] | None:
    """(pods, GPUs per pod) of the Workload's pod set with the most GPUs per pod (whole GPUs)."""
    from muster.api.resources import gpu_demand

    best = None
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        demand = gpu_demand(ps.get("requests") or {})
        if demand.devices and demand.milli >= 1000 and not demand.memory:
            candidate = (int(ps.get("count") or 0), demand.devices)
            if best is None or candidate[1] > best[1]:
                best = candidate
    return best


def _memory_limit(replica: Any) -> str | None:
    containers = (((replica or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    limits = [((c.get("resources") or {}).get("limits") or {}).get("memory") for c in containers]
    found = [str(m) for m in limits if m]
    return ", ".join(found) or None


def _same_taint(t: Obj) -> bool:
    return (t.get("key"), t.get("value"), t.get("effect")) == tuple(GPU_UNHEALTHY_TAINT.values())


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
