"""Spot interruptions: a notice that the cloud takes a node back, and what Muster does about it.

A notice comes from ``muster node interrupt`` (fault injection, for tests and drills: shaped
like AWS's instance-action, ``{"action": "terminate", "time": ...}``, two minutes ahead by
default) or from the provider (:attr:`muster.providers.base.Instance.interruption`). Either
way, in this order, state first:

1. the node's NodeClaim records it (``status.interruption``) and moves to Draining;
2. the Node is cordoned and annotated with the termination time
   (``muster.dev/interruption``): the health controller evicts its Workloads with reason
   ``SpotInterrupted``, their pods get SIGTERM now (the checkpoint handshake) and SIGKILL at
   the termination time at the latest, and they are requeued keeping their place in the
   queue, ahead of newer work of the same priority;
3. the autoscaler sees the requeued work pending and asks for nodes for it (spot again where
   it tolerates it); at the termination time the claim is terminated and the machine goes.

The GPU-seconds of work the interruption cost (per pod, GPUs x its run since its last
checkpoint) are counted by the cost ledger (:mod:`.ledger`) onto the claim's
``status.interruption.lostGpuSeconds`` and the metric ``muster_spot_lost_gpu_seconds_total``.
"""

from __future__ import annotations

import copy
from typing import Any

from muster.api.conditions import iso
from muster.api.labels import INTERRUPTION_ANNOTATION
from muster.api.lifecycle import EventSpec
from muster.controllers.capacity.lifecycle import move_claim
from muster.controllers.capacity.pools import claim_of_node, phase
from muster.controllers.context import Context

__all__ = ["DEFAULT_NOTICE_SECONDS", "NotInterruptible", "interrupt"]

Obj = dict[str, Any]
DEFAULT_NOTICE_SECONDS = 120.0  # the clouds' two-minute warning (AWS; GCP and Azure give 30 s)


class NotInterruptible(ValueError):
    """The node cannot take a spot notice (no pool made it, or it is already going)."""


def interrupt(ctx: Context, node_name: str, at: float, action: str = "terminate") -> Obj:
    """Record a notice that ``node_name`` is taken back at ``at`` (epoch seconds); returns its
    NodeClaim as stored. Idempotent: a second notice for the same node keeps the first.
    Raises KeyError for an unknown node and :class:`NotInterruptible` for one that is not a
    pool node or is already going away."""
    node = ctx.cache.get("Node", node_name)
    if node is None:
        raise KeyError(f"node {node_name} not found")
    claim = claim_of_node(node, ctx.cache.list("NodeClaim"))
    if claim is None:
        raise NotInterruptible(
            f"node {node_name} was not made by a NodePool: only pool nodes have a provider that takes "
            "them back (drain it with muster node drain)"
        )
    now = ctx.now()
    if (claim.get("status") or {}).get("interruption"):
        _annotate(ctx, node, claim["status"]["interruption"]["terminationTime"])
        return claim
    if phase(claim) not in ("Launched", "Ready", "Draining"):
        raise NotInterruptible(f"node {node_name}'s claim {claim['metadata']['name']} is {phase(claim)}")
    updated = copy.deepcopy(claim)
    when = iso(max(at, now))
    updated.setdefault("status", {})["interruption"] = {
        "noticeTime": iso(now),
        "terminationTime": when,
        "action": action,
    }
    message = f"spot interruption: the provider takes node {node_name} back ({action}) at {when}"
    if phase(claim) in ("Launched", "Ready"):
        target = "Draining" if phase(claim) == "Ready" else "Terminating"
        event = move_claim(updated, target, message, now)
    else:
        updated["status"]["message"] = message
        event = EventSpec("Warning", "SpotInterrupted", message)
    stored = ctx.update_status(updated)
    if stored is None:
        raise NotInterruptible(f"node {node_name}'s claim changed meanwhile; send the notice again")
    ctx.event(stored, event)
    ctx.event(stored, EventSpec("Warning", "SpotInterrupted", message))
    pool = ctx.cache.get("NodePool", claim["spec"]["nodePool"])
    if pool is not None:
        ctx.event(pool, EventSpec("Warning", "SpotInterrupted", message))
    _annotate(ctx, node, when)
    ctx.event(node, EventSpec("Warning", "SpotInterrupted", message))
    ctx.wake_at(max(at, now), stored)
    return stored


def _annotate(ctx: Context, node: Obj, when: str) -> None:
    annotations = node["metadata"].get("annotations") or {}
    if annotations.get(INTERRUPTION_ANNOTATION) == when and (node.get("spec") or {}).get("unschedulable"):
        return
    updated = copy.deepcopy(node)
    updated["metadata"].setdefault("annotations", {})[INTERRUPTION_ANNOTATION] = when
    updated.setdefault("spec", {})["unschedulable"] = True
    ctx.update(updated)
