"""The RayCluster ``status.state`` and RayJob ``status.jobDeploymentStatus`` transition tables.

Every move goes through :func:`move_cluster` / :func:`move_job`, which check the table, set
the state, its reason and condition, and return the Event to record.
"""

from __future__ import annotations

from typing import Any

from muster.api.conditions import set_condition
from muster.api.lifecycle import EventSpec, check

__all__ = ["CLUSTER_STATES", "JOB_DEPLOYMENT_STATES", "move_cluster", "move_job"]

Obj = dict[str, Any]

# "" is a cluster not yet looked at; pending: queued, or admitted and its pods starting.
CLUSTER_STATES: dict[tuple[str, str], str] = {
    ("", "pending"): "created",
    ("", "suspended"): "created suspended",
    ("pending", "ready"): "every pod runs",
    ("pending", "suspended"): "suspended",
    ("pending", "failed"): "a pod failed before it was ever ready",
    ("ready", "pending"): "a pod ended or the cluster was requeued",
    ("ready", "suspended"): "suspended",
    ("suspended", "pending"): "resumed",
}

JOB_DEPLOYMENT_STATES: dict[tuple[str, str], str] = {
    ("", "Initializing"): "creating or waiting for its cluster",
    ("", "Suspended"): "created suspended",
    ("Initializing", "Running"): "the entrypoint was submitted",
    ("Initializing", "Suspended"): "suspended",
    ("Initializing", "Failed"): "its cluster failed",
    ("Running", "Complete"): "the entrypoint succeeded",
    ("Running", "Failed"): "the entrypoint failed or ran out of time",
    ("Running", "Retrying"): "the entrypoint failed; backoffLimit allows another run",
    ("Running", "Suspended"): "suspended",
    ("Retrying", "Initializing"): "a new run",
    ("Retrying", "Suspended"): "suspended",
    ("Suspended", "Initializing"): "resumed",
}


def move_cluster(cluster: Obj, to: str, reason: str, message: str, now: float) -> EventSpec | None:
    """Move the cluster to ``to`` (None when it is there already)."""
    status = cluster.setdefault("status", {})
    frm = status.get("state") or ""
    if frm == to:
        return None
    check(CLUSTER_STATES, frm, to, f"RayCluster {cluster['metadata']['name']}")
    status["state"], status["reason"] = to, message
    set_condition(cluster, "Ready", "True" if to == "ready" else "False", reason, message, now)
    if to in ("suspended", "failed"):
        set_condition(cluster, to.capitalize(), "True", reason, message, now)
    elif to == "pending":
        set_condition(cluster, "Suspended", "False", reason, message, now)
    return EventSpec("Warning" if to == "failed" else "Normal", reason, message)


def move_job(job: Obj, to: str, reason: str, message: str, now: float) -> EventSpec | None:
    """Move the RayJob's deployment status to ``to`` (None when it is there already)."""
    status = job.setdefault("status", {})
    frm = status.get("jobDeploymentStatus") or ""
    if frm == to:
        return None
    check(JOB_DEPLOYMENT_STATES, frm, to, f"RayJob {job['metadata']['name']}")
    status["jobDeploymentStatus"], status["reason"], status["message"] = to, reason, message
    for kind in ("Running", "Complete", "Failed", "Suspended"):
        set_condition(job, kind, "True" if kind == to else "False", reason, message, now)
    return EventSpec("Warning" if to in ("Failed", "Retrying") else "Normal", reason, message)
