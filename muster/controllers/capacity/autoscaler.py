"""The autoscaler: the scheduler's verdicts in, NodeClaims out (decide, then apply).

Each time it runs it reads, from the cache, the Workloads the scheduler left pending because no
node could take them (reasons InsufficientResources, TopologyUnsatisfiable, GangIncomplete,
with the flavor choices whose quota fit), the NodePools, their NodeClaims and the Nodes, and
hands them to :func:`muster.scheduler.autoscale.plan`. Then it applies the plan:

* a NodeClaim (phase Pending) for each node to launch, written before any provider is called,
  with Events on the claim, the pool (``ScaleUp``) and each Workload it is for
  (``TriggeredScaleUp``: "waiting for node X of pool Y (ETA 60s)");
* on every claim, the Workloads now planned onto it (``status.workloads``: what ``muster why``
  reads to say a Workload waits for that node);
* a Warning ``NotScaledUp`` on a Workload no pool can make room for, once per distinct reason;
* idle nodes past their pool's TTL are given back (their claim moves to Terminating, an Event
  ``ScaleDown`` on the pool says why);
* with ``repackUnderutilized``, an under-used node whose pods all checkpoint and fit on the
  other nodes is drained (its jobs are requeued with their checkpoints), one node per pool at
  a time.

It also keeps each claim's ``emptySince`` / ``underusedSince`` and each pool's status.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections.abc import Iterable
from typing import Any

from muster.api import registry
from muster.api.conditions import epoch, iso
from muster.api.labels import CHECKPOINTABLE_ANNOTATION, DRAIN_ANNOTATION, NODEPOOL_LABEL, WORKLOAD_LABEL
from muster.api.lifecycle import EventSpec, WorkloadState, is_final, workload_state
from muster.controllers.capacity.lifecycle import move_claim
from muster.controllers.capacity.pools import ACTIVE_PHASES, eta_of, phase, pool_view, scheduler_template
from muster.controllers.context import Context
from muster.controllers.scheduling.cluster import build_flavors, build_nodes
from muster.controllers.scheduling.snapshot import pod_set_of
from muster.scheduler import GPU_MILLI, Flavor, Node
from muster.scheduler.autoscale import Bin, Gang, Pool, ScalePlan, plan
from muster.util import paused_gc

__all__ = ["CAPACITY_REASONS", "Autoscaler"]

Obj = dict[str, Any]
# Pending reasons that say "no node has room": what new nodes can fix.
CAPACITY_REASONS = ("InsufficientResources", "TopologyUnsatisfiable", "GangIncomplete")
_TOKEN = string.ascii_lowercase + string.digits


class Autoscaler:
    """Applies :func:`plan` (module docstring); one thread calls it."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.last: ScalePlan | None = None
        self._told: dict[str, str] = {}  # workload -> the NotScaledUp reason last recorded

    def reconcile(self, ready_verdict: bool = True) -> None:
        """Plan and apply; ``ready_verdict`` False: the scheduler's verdicts predate a Ready node,
        so the planner may count on the Ready nodes' room (see :func:`plan`)."""
        cache, now = self.ctx.cache, self.ctx.now()
        pools = {p["metadata"]["name"]: p for p in cache.list("NodePool")}
        claims = cache.list("NodeClaim")
        if not pools and not claims:  # nothing to scale nor to track (a pass must not pay for it)
            self.last = ScalePlan()
            return
        workloads = cache.list_live("Workload")  # finished ones neither hold nor wait
        nodes = cache.list("Node")
        pods = cache.list("Pod")
        holding = [
            w for w in workloads if workload_state(w) in (WorkloadState.ADMITTED, WorkloadState.EVICTING)
        ]
        scheduler_nodes = {n.name: n for n in build_nodes(nodes, holding, pods)}
        busy = _busy_nodes(holding, pods)
        claims = self._track_idle(claims, nodes, scheduler_nodes, busy, pools, now)
        views = [pool_view(p, claims, now) for p in pools.values()]
        bins = self._bins(nodes, claims, scheduler_nodes, now)
        gangs = _gangs(workloads, build_flavors(cache.list("ResourceFlavor"), cache.list("Topology")))
        if not pools:  # nothing to scale (and no "no NodePool" warning for clusters without any)
            self.last = ScalePlan()
            return
        with paused_gc():  # the plan makes thousands of containers and no cycles (util.paused_gc)
            decided = plan(gangs, views, bins, now, ready_verdict=ready_verdict)
        self.last = decided
        made = self._launch(decided, pools, now)
        self._record_waits(decided, made, claims, now)
        self._tell_unplaceable(decided, workloads)
        self._remove(decided, claims, pools, now)
        self._repack(views, pools, claims, nodes, scheduler_nodes, holding, pods, now)
        self._pool_status(pools, cache.list("NodeClaim"), nodes, now)

    # -- inputs --------------------------------------------------------------------------------

    def _bins(self, nodes: list[Obj], claims: list[Obj], sched: dict[str, Node], now: float) -> list[Bin]:
        by_node = {(c.get("status") or {}).get("nodeName"): c for c in claims if phase(c) in ACTIVE_PHASES}
        out = []
        seen: set[str] = set()
        for obj in nodes:
            name = obj["metadata"]["name"]
            node = sched.get(name)
            claim = by_node.get(name)
            if node is None or not node.ready or node.unschedulable:
                continue
            if claim is not None and phase(claim) not in ("Ready", "Launched"):
                continue
            seen.add(name)
            free = {r: v - node.used.get(r, 0) for r, v in node.allocatable.items()}
            gpu = [
                f if h else 0
                for f, h in zip(
                    node.gpu_free or [GPU_MILLI] * node.gpus,
                    node.gpu_healthy or [True] * node.gpus,
                    strict=False,
                )
            ]
            empty = epoch((claim.get("status") or {}).get("emptySince")) if claim is not None else None
            out.append(
                Bin(
                    node,
                    free,
                    gpu,
                    pool=(obj["metadata"].get("labels") or {}).get(NODEPOOL_LABEL),
                    empty_since=empty if claim is not None and phase(claim) == "Ready" else None,
                )
            )
        for claim in claims:
            if phase(claim) not in ("Pending", "Launched"):
                continue
            node_name = (claim.get("status") or {}).get("nodeName")
            if node_name in seen or claim["metadata"]["name"] in seen:
                continue
            template = scheduler_template(claim)
            template.name = claim["metadata"]["name"]
            out.append(
                Bin(
                    template,
                    {r: v for r, v in template.allocatable.items()},
                    [GPU_MILLI] * template.gpus,
                    pool=claim["spec"]["nodePool"],
                    ready=False,
                    eta=eta_of(claim, now),
                )
            )
        return out

    def _track_idle(
        self,
        claims: list[Obj],
        nodes: list[Obj],
        sched: dict[str, Node],
        busy: set[str],
        pools: dict[str, Obj],
        now: float,
    ) -> list[Obj]:
        """Keep ``emptySince`` and ``underusedSince`` of Ready claims current; the claims after."""
        out = []
        for claim in claims:
            status = claim.get("status") or {}
            node = sched.get(status.get("nodeName") or "")
            if phase(claim) != "Ready" or node is None:
                out.append(claim)
                continue
            empty = node.name not in busy
            threshold = float(
                ((pools.get(claim["spec"]["nodePool"]) or {}).get("spec") or {})
                .get("consolidation", {})
                .get("utilizationThreshold", 0.5)
            )
            share = _allocated_share(node)
            under = not empty and share < threshold
            wanted = dict(status)
            _since(wanted, "emptySince", empty, now)
            _since(wanted, "underusedSince", under, now)
            if wanted != status:
                updated = copy.deepcopy(claim)
                updated["status"] = wanted
                claim = self.ctx.update_status(updated) or claim
            out.append(claim)
        return out

    # -- applying the plan ---------------------------------------------------------------------

    def _launch(self, decided: ScalePlan, pools: dict[str, Obj], now: float) -> dict[str, str]:
        """Write a NodeClaim per new node; returns plan name ("pool#i") -> claim name."""
        made: dict[str, str] = {}
        for i, new in enumerate(decided.launch):
            pool = pools.get(new.pool)
            if pool is None:
                continue
            spec = pool["spec"]
            name = f"{new.pool}-{''.join(secrets.choice(_TOKEN) for _ in range(5))}"
            reason = (
                f"for {', '.join(new.gangs[:3])}{' and more' if len(new.gangs) > 3 else ''}: no node had room"
                if new.gangs
                else f"pool {new.pool} keeps minNodes {spec.get('minNodes', 0)}"
            )
            doc = {
                "apiVersion": "muster.dev/v1",
                "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {NODEPOOL_LABEL: new.pool}},
                "spec": {
                    "nodePool": new.pool,
                    "provider": spec["provider"],
                    "providerConfig": dict(spec.get("providerConfig") or {}),
                    "capacityType": spec.get("capacityType") or "on-demand",
                    "pricePerHour": float(spec.get("pricePerHour") or 0.0),
                    "template": copy.deepcopy(spec.get("template") or {}),
                    "provisioningDelaySeconds": float(spec.get("provisioningDelaySeconds", 60.0)),
                    "registrationTimeoutSeconds": float(spec.get("registrationTimeoutSeconds", 900.0)),
                    "reason": reason,
                },
                "status": {
                    "phase": "Pending",
                    "workloads": sorted(new.gangs),
                    "message": "asked for; the provider is called next",
                    "expectedReadyAt": iso(now + float(spec.get("provisioningDelaySeconds", 60.0))),
                },
            }
            validated = registry.validate(doc, keep_status=True).obj
            assert validated is not None
            created = self.ctx.create(validated)
            if created is None:
                continue
            made[f"{new.pool}#{i}"] = name
            self.ctx.metrics.scale_events.labels(new.pool, "up").inc()
            eta = float(spec.get("provisioningDelaySeconds", 60.0))
            self.ctx.event(created, EventSpec("Normal", "Requested", reason))
            self.ctx.event(pool, EventSpec("Normal", "ScaleUp", f"node {name} asked for, {reason}"))
            for key in new.gangs:
                wl = self._workload(key)
                if wl is not None:
                    self.ctx.event(
                        wl,
                        EventSpec(
                            "Normal",
                            "TriggeredScaleUp",
                            f"waiting for node {name} of pool {new.pool} (ETA {eta:.0f}s)",
                        ),
                    )
        return made

    def _record_waits(self, decided: ScalePlan, made: dict[str, str], claims: list[Obj], now: float) -> None:
        by_node = {(c.get("status") or {}).get("nodeName"): c["metadata"]["name"] for c in claims}
        waiting: dict[str, set[str]] = {}
        for gang, names in decided.waits.items():
            for name in names:
                claim = made.get(name) or by_node.get(name) or name
                waiting.setdefault(claim, set()).add(gang)
        for claim in self.ctx.cache.list("NodeClaim"):
            if phase(claim) not in ACTIVE_PHASES:
                continue
            want = sorted(waiting.get(claim["metadata"]["name"], ()))
            if list((claim.get("status") or {}).get("workloads") or []) == want:
                continue
            updated = copy.deepcopy(claim)
            updated.setdefault("status", {})["workloads"] = want
            self.ctx.update_status(updated)

    def _tell_unplaceable(self, decided: ScalePlan, workloads: list[Obj]) -> None:
        pending = {
            f"{w['metadata'].get('namespace') or 'default'}/{w['metadata']['name']}" for w in workloads
        }
        self._told = {k: v for k, v in self._told.items() if k in pending}
        for key, why in decided.unplaceable.items():
            if self._told.get(key) == why:
                continue
            wl = self._workload(key)
            if wl is None:
                continue
            self._told[key] = why
            self.ctx.event(
                wl, EventSpec("Warning", "NotScaledUp", f"no NodePool can make room for it: {why}")
            )

    def _remove(self, decided: ScalePlan, claims: list[Obj], pools: dict[str, Obj], now: float) -> None:
        by_node = {(c.get("status") or {}).get("nodeName"): c for c in claims}
        for node, why in decided.remove:
            claim = by_node.get(node)
            if claim is None or phase(claim) != "Ready":
                continue
            updated = copy.deepcopy(claim)
            event = move_claim(updated, "Terminating", f"scale down: {why}", now)
            stored = self.ctx.update_status(updated)
            if stored is None:
                continue
            self.ctx.event(stored, event)
            self.ctx.metrics.scale_events.labels(claim["spec"]["nodePool"], "down").inc()
            pool = pools.get(claim["spec"]["nodePool"])
            if pool is not None:
                self.ctx.event(pool, EventSpec("Normal", "ScaleDown", f"node {node} removed: {why}"))

    def _repack(
        self,
        views: list[Pool],
        pools: dict[str, Obj],
        claims: list[Obj],
        nodes: list[Obj],
        sched: dict[str, Node],
        holding: list[Obj],
        pods: list[Obj],
        now: float,
    ) -> None:
        claims = self.ctx.cache.list("NodeClaim")
        for name, pool in pools.items():
            rule = pool["spec"].get("consolidation") or {}
            if not rule.get("repackUnderutilized"):
                continue
            mine = [c for c in claims if c["spec"]["nodePool"] == name]
            if any(phase(c) in ("Draining", "Pending", "Launched") for c in mine):
                continue  # one move at a time, and none while the pool grows
            ttl = float(rule.get("ttlSecondsAfterEmpty", 300.0))
            for claim in sorted(mine, key=lambda c: c["metadata"]["name"]):
                since = epoch((claim.get("status") or {}).get("underusedSince"))
                node = (claim.get("status") or {}).get("nodeName") or ""
                if phase(claim) != "Ready" or since is None or now - since < ttl or node not in sched:
                    continue
                movable = self._movable(node, holding, pods)
                if movable is None:
                    continue
                others = [b for b in self._bins(nodes, claims, sched, now) if b.node.name != node and b.ready]
                trial = plan(movable, [], others, now, ready_verdict=False)
                if trial.unplaceable or trial.launch or any(len(w) for w in trial.waits.values()):
                    continue
                self._drain(claim, node, sched[node], pool, now)
                break

    def _movable(self, node: str, holding: list[Obj], pods: list[Obj]) -> list[Gang] | None:
        """The gangs on ``node`` when every pod there may be checkpointed and moved; else None."""
        on = [p for p in pods if (p.get("spec") or {}).get("nodeName") == node and not is_final(p)]
        if any((p["metadata"].get("annotations") or {}).get(CHECKPOINTABLE_ANNOTATION) != "true" for p in on):
            return None
        owners = {
            ((p["metadata"].get("namespace") or ""), (p["metadata"].get("labels") or {}).get(WORKLOAD_LABEL))
            for p in on
        }
        gangs = []
        for wl in holding:
            key = (wl["metadata"].get("namespace") or "", wl["metadata"]["name"])
            placed = any(
                pod.get("node") == node
                for a in (wl.get("status") or {}).get("admission", {}).get("podSetAssignments") or []
                for pod in a.get("pods") or []
            )
            if not placed:
                continue
            if key not in owners or not wl["spec"].get("preemptible", True):
                return None
            gangs.append(Gang(key[0], key[1], [pod_set_of(ps) for ps in wl["spec"]["podSets"]]))
        return gangs

    def _drain(self, claim: Obj, node_name: str, node: Node, pool: Obj, now: float) -> None:
        share = _allocated_share(node)
        threshold = float((pool["spec"].get("consolidation") or {}).get("utilizationThreshold", 0.5))
        message = (
            f"under-used ({share:.0%} of its GPUs allocated, threshold {threshold:.0%}): its "
            "checkpointed jobs move to the pool's other nodes"
        )
        updated = copy.deepcopy(claim)
        event = move_claim(updated, "Draining", message, now)
        stored = self.ctx.update_status(updated)
        if stored is None:
            return
        self.ctx.event(stored, event)
        self.ctx.event(pool, EventSpec("Normal", "Repack", f"node {node_name}: {message}"))
        obj = self.ctx.cache.get("Node", node_name)
        if obj is not None:
            drained = copy.deepcopy(obj)
            drained.setdefault("spec", {})["unschedulable"] = True
            drained["metadata"].setdefault("annotations", {})[DRAIN_ANNOTATION] = iso(now)
            self.ctx.update(drained)

    def _pool_status(self, pools: dict[str, Obj], claims: list[Obj], nodes: list[Obj], now: float) -> None:
        for name, pool in pools.items():
            mine = [c for c in claims if c["spec"]["nodePool"] == name and phase(c) in ACTIVE_PHASES]
            ready = [c for c in mine if phase(c) in ("Ready", "Draining")]
            gpus = int((pool["spec"].get("template") or {}).get("gpus") or 0)
            price = float(pool["spec"].get("pricePerHour") or 0.0)
            old = pool.get("status") or {}
            status = {
                "nodes": len(mine),
                "readyNodes": len(ready),
                "provisioning": len(mine) - len(ready),
                "gpus": gpus * len(ready),
                "costPerHour": round(price * len([c for c in mine if phase(c) != "Pending"]), 6),
                "conditions": old.get("conditions") or [],
            }
            if old.get("lastScaleTime"):
                status["lastScaleTime"] = old["lastScaleTime"]
            if status["nodes"] != old.get("nodes"):
                status["lastScaleTime"] = iso(now)
            if {k: v for k, v in status.items()} != {k: old.get(k) for k in status}:
                updated = copy.deepcopy(pool)
                updated["status"] = status
                self.ctx.update_status(updated)

    def _workload(self, key: str) -> Obj | None:
        ns, _, name = key.partition("/")
        return self.ctx.cache.get("Workload", name, ns)


def _gangs(workloads: Iterable[Obj], flavors: list[Flavor]) -> list[Gang]:
    by_name = {f.name: f for f in flavors}
    out = []
    for wl in workloads:
        status = wl.get("status") or {}
        pending = status.get("pending") or {}
        if (
            pending.get("reason") not in CAPACITY_REASONS
            or workload_state(wl) is not WorkloadState.PENDING
            or not wl["spec"].get("active", True)
        ):
            continue
        options = []
        for option in (pending.get("details") or {}).get("flavorOptions") or []:
            options.append(
                [
                    tuple(by_name.get(n) or Flavor(n) for n in dict.fromkeys((m or {}).values()))
                    for m in option
                ]
            )
        out.append(
            Gang(
                namespace=wl["metadata"].get("namespace") or "default",
                name=wl["metadata"]["name"],
                pod_sets=[pod_set_of(ps) for ps in wl["spec"]["podSets"]],
                priority=int(wl["spec"].get("priority") or 0),
                queue_time=epoch(wl["metadata"].get("creationTimestamp")) or 0.0,
                options=options,
            )
        )
    return out


def _busy_nodes(holding: list[Obj], pods: list[Obj]) -> set[str]:
    busy = {
        pod.get("node")
        for wl in holding
        for a in (wl.get("status") or {}).get("admission", {}).get("podSetAssignments") or []
        for pod in a.get("pods") or []
    }
    busy |= {(p.get("spec") or {}).get("nodeName") for p in pods if not is_final(p)}
    return {b for b in busy if b}


def _allocated_share(node: Node) -> float:
    if not node.gpus:
        cpu = node.allocatable.get("cpu", 0)
        return node.used.get("cpu", 0) / cpu if cpu else 0.0
    free = sum(node.gpu_free) if node.gpu_free else node.gpus * GPU_MILLI
    return 1.0 - free / (node.gpus * GPU_MILLI)


def _since(status: Obj, key: str, holds: bool, now: float) -> None:
    if holds and not status.get(key):
        status[key] = iso(now)
    elif not holds:
        status.pop(key, None)
