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
    "CAPACITY_TYPE_LABEL",
    "CHECKPOINTABLE_ANNOTATION",
    "DEVICE_PLUGIN_CONFIG_LABEL",
    "DRAIN_ANNOTATION",
    "DRAIN_GRACE_ANNOTATION",
    "EXPERIMENT_LABEL",
    "GPU",
    "GPU_MEMORY",
    "GPU_REPLICAS_LABEL",
    "GPU_SHARING_ANNOTATION",
    "INTERRUPTION_ANNOTATION",
    "JOB_NAME_LABEL",
    "KARPENTER_CAPACITY_TYPE_LABEL",
    "MASTER_PORT_ANNOTATION",
    "NODECLAIM_LABEL",
    "NODEPOOL_LABEL",
    "PRICE_LABEL",
    "RAY_CLUSTER_LABEL",
    "RAY_DASHBOARD_PORT_ANNOTATION",
    "RAY_GCS_PORT_ANNOTATION",
    "RAY_GROUP_LABEL",
    "RAY_JOB_LABEL",
    "RAY_NODE_TYPE_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_PORTS_ANNOTATION",
    "REPLICA_TYPE_LABEL",
    "RESUBMITTED_FROM_ANNOTATION",
    "RETRY_ANNOTATION",
    "SERVING_PORT_ANNOTATION",
    "SERVING_REPLICA_LABEL",
    "SERVING_REVISION_LABEL",
    "SERVING_SERVICE_LABEL",
    "SPOT_TAINT_KEY",
    "STOP_GRACE_ANNOTATION",
    "STOP_REASON_ANNOTATION",
    "TEAM_LABEL",
    "TRIAL_LABEL",
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
# On a TrainingJob's Workload: the port of each replica of a TensorFlow job, JSON
# {"worker-0": 41234, ...}, chosen when a run's pods are created (its TF_CONFIG's cluster).
REPLICA_PORTS_ANNOTATION = "muster.dev/replica-ports"

# -- stopping pods and draining nodes ------------------------------------------------------

STOP_REASON_ANNOTATION = "muster.dev/stop-reason"
# A grace period (seconds) that overrides spec.terminationGracePeriodSeconds for this stop
# (a drain's --grace-period).
STOP_GRACE_ANNOTATION = "muster.dev/stop-grace-seconds"
DRAIN_ANNOTATION = "muster.dev/drain"  # when the drain was asked (RFC 3339)
DRAIN_GRACE_ANNOTATION = "muster.dev/drain-grace-seconds"

# -- capacity: node pools, spot, cost (docs/capacity.md) ------------------------------------

# The NodePool and NodeClaim a node was made for (set on nodes a pool provisions).
NODEPOOL_LABEL = "muster.dev/nodepool"
NODECLAIM_LABEL = "muster.dev/nodeclaim"
# on-demand or spot; Karpenter's key is set too, so selectors written for it keep working.
CAPACITY_TYPE_LABEL = "muster.dev/capacity-type"
KARPENTER_CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
# Spot nodes carry this taint (value spot, NoSchedule): only work that tolerates interruption
# lands there.
SPOT_TAINT_KEY = "muster.dev/capacity-type"
# What a node costs per hour (a decimal such as 2.48); a pool sets it on its nodes, users may
# label static nodes with it.
PRICE_LABEL = "muster.dev/price-per-hour"
# A spot interruption notice on a Node: the termination time (RFC 3339), shaped like the
# clouds' two-minute warning; the node is drained and then terminated at that time.
INTERRUPTION_ANNOTATION = "muster.dev/interruption"
# On a pod template (or pod): "true" when the pod checkpoints on SIGTERM and may be moved off
# an under-used node by consolidation.
CHECKPOINTABLE_ANNOTATION = "muster.dev/checkpointable"
# The label cost reports group teams by unless told another (muster cost --by label:KEY).
TEAM_LABEL = "team"

# -- workflows -------------------------------------------------------------------------------

# The Workflow a task's pods belong to (the Workflow controller sets it on every task attempt).
WORKFLOW_LABEL = "muster.dev/workflow"
WORKFLOW_TASK_LABEL = "muster.dev/workflow-task"
WORKFLOW_ATTEMPT_LABEL = "muster.dev/workflow-attempt"
WORKFLOW_NODE_ANNOTATION = "muster.dev/workflow-node"
# `muster retry` asks for a retry by setting this one above status.retries.
RETRY_ANNOTATION = "muster.dev/retry"
# On a workflow made by `muster resubmit` (or the dashboard's Resubmit): the one it copies.
RESUBMITTED_FROM_ANNOTATION = "muster.dev/resubmitted-from"

# -- experiments -----------------------------------------------------------------------------

# The Experiment a Trial, its TrainingJob, its pods and its TrialMetrics belong to, and the Trial.
EXPERIMENT_LABEL = "muster.dev/experiment"
TRIAL_LABEL = "muster.dev/trial"


# -- Ray clusters and jobs (KubeRay's label names, so selectors written for it keep working) -----

# The RayCluster a pod belongs to; a RayJob's clusterSelector names a cluster by it too.
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"  # head or worker
RAY_GROUP_LABEL = "ray.io/group"  # headgroup or the worker group's name
# The RayJob a cluster it created and its submitter pods belong to.
RAY_JOB_LABEL = "muster.dev/rayjob"
# The cluster's GCS and dashboard ports, chosen when its Workload is created.
RAY_GCS_PORT_ANNOTATION = "muster.dev/ray-gcs-port"
RAY_DASHBOARD_PORT_ANNOTATION = "muster.dev/ray-dashboard-port"


# -- serving ---------------------------------------------------------------------------------

# The InferenceService a replica's Workload and pod belong to, its revision and its name.
SERVING_SERVICE_LABEL = "muster.dev/inferenceservice"
SERVING_REVISION_LABEL = "muster.dev/serving-revision"
SERVING_REPLICA_LABEL = "muster.dev/serving-replica"
# The port a replica's server listens on (its $PORT; on the local runtime one per replica).
SERVING_PORT_ANNOTATION = "muster.dev/serving-port"


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


# GPU time-slicing (docs/scheduler.md, "GPU sharing"): the NVIDIA device plugin's config label a
# node selects its GPUSharing config with, and the label GPU feature discovery sets on a node
# whose GPUs are time-sliced: each GPU is offered as this many replicas of nvidia.com/gpu.
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"
# The GPUSharing whose config set a node's GPU_REPLICAS_LABEL (so the label goes when it does).
GPU_SHARING_ANNOTATION = "muster.dev/gpu-sharing"
