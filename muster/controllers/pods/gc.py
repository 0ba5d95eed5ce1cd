"""Garbage collection: objects whose owner is gone go too.

A Workload or Pod whose ``ownerReferences`` name an owner (kind, name, uid: a TrainingJob, a
Workflow or an InferenceService) that no longer exists is removed: a Workload at once, a Pod
that has not ended by a stop request first (its executor stops the processes, stores the
final status and deletes it), so deleting a TrainingJob or an InferenceService never leaves
processes holding GPUs. The cache may lag a fresh owner, so an
owner is confirmed gone in the store before anything is deleted.
"""

from __future__ import annotations

from typing import Any

from muster.api.lifecycle import is_final
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, stop_requested, stop_requested_object
from muster.store.base import NotFound

__all__ = ["collect_garbage"]

Obj = dict[str, Any]
# Kinds whose objects are owned (by a TrainingJob, a Workflow, an Experiment, an
# InferenceService, a RayCluster or a RayJob) and collected here. A Workflow's or an
# Experiment's TrainingJob (a RayJob's RayCluster) goes first;
# its own Workload and Pods follow on the next pass.
_OWNED_KINDS = ("Trial", "TrainingJob", "RayCluster", "Workload", "Pod")
_OWNER_KINDS = ("TrainingJob", "Workflow", "Experiment", "InferenceService", "RayCluster", "RayJob")


def collect_garbage(ctx: Context) -> int:
    """Remove (or stop) every owned object whose owner is gone; returns how many were acted on."""
    owners = {
        (kind, o["metadata"].get("namespace") or "", o["metadata"]["name"]): o["metadata"].get("uid")
        for kind in _OWNER_KINDS
        for o in ctx.cache.list(kind)
    }
    acted = 0
    for kind in _OWNED_KINDS:
        for obj in ctx.cache.list(kind):
            if _orphaned(ctx, obj, owners):
                acted += _remove(ctx, obj)
    return acted


def _orphaned(ctx: Context, obj: Obj, owners: dict[tuple[str, str, str], str | None]) -> bool:
    refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") in _OWNER_KINDS]
    if not refs:
        return False
    ns = obj["metadata"].get("namespace") or ""
    for ref in refs:
        if owners.get((ref["kind"], ns, ref["name"])) == ref.get("uid"):
            return False
        try:
            current = ctx.writer().get(ref["kind"], ref["name"], ns or None)
        except NotFound:
            continue
        if current["metadata"].get("uid") == ref.get("uid"):
            ctx.cache.observe(current)
            return False
    return True


def _remove(ctx: Context, obj: Obj) -> int:
    if obj["kind"] == "Pod" and not is_final(obj):
        if stop_requested(obj):
            return 0
        return int(ctx.update(stop_requested_object(obj, StopReasons.DELETED, ctx.now())) is not None)
    return int(ctx.delete(obj))
