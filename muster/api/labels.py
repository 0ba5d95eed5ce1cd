"""The names that tie objects together: labels and annotations Muster sets and reads, and the
names it derives for the objects it creates.

Every layer reads these (controllers write them, the CLI, the dashboard and the runtimes select
and show by them), so they live here, below all of them (docs/control-plane.md, "Ownership").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ATTEMPT_LABEL",
    "DRAIN_ANNOTATION",
    "DRAIN_GRACE_ANNOTATION",
    "GPU",
    "GPU_MEMORY",
    "JOB_NAME_LABEL",
    "MASTER_PORT_ANNOTATION",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "RETRY_ANNOTATION",
    "STOP_GRACE_ANNOTATION",
    "STOP_REASON_ANNOTATION",
    "WORKFLOW_ATTEMPT_LABEL",
    "WORKFLOW_LABEL",
    "WORKFLOW_NODE_ANNOTATION",
    "WORKFLOW_TASK_LABEL",
    "WORKLOAD_LABEL",
    "pod_name",
    "replica_name",
]

# -- resources ----------------------------------------------------------------------------

GPU = "nvidia.com/gpu"  # whole GPUs
GPU_MEMORY = "muster.dev/gpu-memory"  # a share of one GPU sized by its memory

# -- pods of a job ---------------------------------------------------------------------------

JOB_NAME_LABEL = "muster.dev/job-name"
REPLICA_TYPE_LABEL = "muster.dev/replica-type"
REPLICA_INDEX_LABEL = "muster.dev/replica-index"
WORKLOAD_LABEL = "muster.dev/workload"
# Which run of the job a pod belongs to: "<Workload requeue count>-<job restart count>". Pods of
# an earlier run are stale: stopped and deleted before the next run's pods are created.
ATTEMPT_LABEL = "muster.dev/attempt"
# The job's MASTER_PORT, chosen when its Workload is created and kept for every run.
MASTER_PORT_ANNOTATION = "muster.dev/master-port"

# -- stopping pods and draining nodes ------------------------------------------------------

STOP_REASON_ANNOTATION = "muster.dev/stop-reason"
# A grace period (seconds) that overrides spec.terminationGracePeriodSeconds for this stop
# (a drain's --grace-period).
STOP_GRACE_ANNOTATION = "muster.dev/stop-grace-seconds"
DRAIN_ANNOTATION = "muster.dev/drain"  # when the drain was asked (RFC 3339)
DRAIN_GRACE_ANNOTATION = "muster.dev/drain-grace-seconds"

# -- workflows -------------------------------------------------------------------------------

# The Workflow a task's pods belong to (the Workflow controller sets it on every task attempt).
WORKFLOW_LABEL = "muster.dev/workflow"
WORKFLOW_TASK_LABEL = "muster.dev/workflow-task"
WORKFLOW_ATTEMPT_LABEL = "muster.dev/workflow-attempt"
WORKFLOW_NODE_ANNOTATION = "muster.dev/workflow-node"
# `muster retry` asks for a retry by setting this one above status.retries.
RETRY_ANNOTATION = "muster.dev/retry"


def pod_name(job: str, rtype: str, index: int) -> str:
    """The name of replica ``index`` of type ``rtype`` of a job: ``<job>-worker-1``."""
    return f"{job}-{rtype.lower()}-{index}"


def replica_name(pod: Mapping[str, Any]) -> str:
    """``worker-1`` for pod ``<job>-worker-1``: the replica type and index from its labels."""
    labels = pod["metadata"].get("labels") or {}
    rtype, index = labels.get(REPLICA_TYPE_LABEL), labels.get(REPLICA_INDEX_LABEL)
    if rtype and index is not None:
        return f"{rtype.lower()}-{index}"
    job = labels.get(JOB_NAME_LABEL)
    name = pod["metadata"]["name"]
    return name[len(job) + 1 :] if job and name.startswith(job + "-") else name
