"""RayCluster and RayJob: a user's own Ray cluster as a workload, shaped like KubeRay's
``ray.io/v1`` kinds (docs/ray.md, "KubeRay manifests").

A RayCluster is one gang: its head and every worker group's ``replicas`` pods, admitted all
or nothing through the queues (quota from the containers' resources). Each pod's first
container runs ``ray start`` built from its group's ``rayStartParams``. ``minReplicas`` and
``maxReplicas`` are validated and reported; what is admitted is ``replicas`` (Ray-autoscaler
driven scaling between them is not done: a warning says so).

A RayJob creates a RayCluster from ``rayClusterSpec`` (or uses the one ``clusterSelector``
names), runs ``entrypoint`` against it once it is ready (``ray job submit`` semantics, in a
submitter pod), reports ``jobStatus``/``jobDeploymentStatus``, and with
``shutdownAfterJobFinishes`` deletes the cluster ``ttlSecondsAfterFinished`` after the end.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import BeforeValidator, Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.common import ObjectName
from muster.api.errors import FieldError, child_path
from muster.api.podspec import PodSpec, PodTemplateSpec

__all__ = [
    "CLUSTER_SELECTOR_LABEL",
    "HeadGroupSpec",
    "RayCluster",
    "RayClusterSpec",
    "RayClusterStatus",
    "RayJob",
    "RayJobSpec",
    "RayJobStatus",
    "RayPodSpec",
    "RayPodTemplateSpec",
    "WorkerGroupSpec",
    "runtime_env_of",
    "worker_count",
]

# The label a RayJob's clusterSelector names an existing cluster by (KubeRay's).
CLUSTER_SELECTOR_LABEL = "ray.io/cluster"


def _param(value: object) -> object:
    # KubeRay wants strings; YAML users write numbers and booleans (num-cpus: 1, block: true).
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


StartParams = dict[str, Annotated[str, BeforeValidator(_param)]]


class RayPodSpec(PodSpec):
    """A Ray node's pod: its first container's command is ``ray start`` (Muster's to set)."""

    def field_warnings(self, path: str) -> list[FieldError]:
        ray = child_path(path, "containers", 0, "command")
        return [w for w in super().field_warnings(path) if w.path != ray]


class RayPodTemplateSpec(PodTemplateSpec):
    spec: RayPodSpec = Field(description="The pods' specification; the first container runs Ray.")


class HeadGroupSpec(MusterModel):
    ray_start_params: StartParams = Field(
        default_factory=dict,
        description="`ray start --head` options without dashes (num-cpus, port, dashboard-port, ...).",
    )
    template: RayPodTemplateSpec = Field(description="The head pod; its first container runs Ray.")
    service_type: str | None = Field(
        default=None, description="Kubernetes Service type of the head (recorded; not used)."
    )


class WorkerGroupSpec(MusterModel):
    group_name: ObjectName = Field(description="The group's name (unique in the cluster).")
    replicas: int | None = Field(
        default=None, ge=0, description="Pods of this group admitted (default minReplicas, else 1)."
    )
    min_replicas: int | None = Field(default=None, ge=0, description="Fewest pods of the group.")
    max_replicas: int | None = Field(default=None, ge=0, description="Most pods of the group.")
    ray_start_params: StartParams = Field(
        default_factory=dict, description="`ray start --address` options without dashes (num-cpus, ...)."
    )
    template: RayPodTemplateSpec = Field(description="The group's pods; their first container runs Ray.")

    def count(self) -> int:
        return worker_count(self.replicas, self.min_replicas, self.max_replicas)


def worker_count(replicas: int | None, low: int | None, high: int | None) -> int:
    """The pods of a worker group admitted: replicas, else minReplicas, else 1, within
    [minReplicas, maxReplicas] (KubeRay's defaulting)."""
    count = replicas if replicas is not None else (low or 1)
    if high is not None:
        count = min(count, high)
    return max(count, low or 0)


class RayClusterSpec(MusterModel):
    head_group_spec: HeadGroupSpec = Field(description="The head node.")
    worker_group_specs: list[WorkerGroupSpec] = Field(
        default_factory=list, description="Groups of worker nodes."
    )
    ray_version: str | None = Field(default=None, description="Ray version of the image (recorded).")
    suspend: bool = Field(default=False, description="Suspended clusters run no pods and hold no quota.")
    queue_name: ObjectName | None = Field(
        default=None, description="LocalQueue to submit to (default: the namespace's default queue)."
    )
    priority_class_name: ObjectName | None = Field(default=None, description="PriorityClass of the cluster.")

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        seen: set[str] = set()
        for i, group in enumerate(self.worker_group_specs):
            gpath = child_path(path, "workerGroupSpecs", i)
            if group.group_name in seen:
                errors.append(FieldError(child_path(gpath, "groupName"), "duplicate group", group.group_name))
            seen.add(group.group_name)
            if group.group_name == "head":
                errors.append(
                    FieldError(child_path(gpath, "groupName"), "must not be head (the head's own group)")
                )
            low, high = group.min_replicas, group.max_replicas
            if low is not None and high is not None and low > high:
                errors.append(
                    FieldError(child_path(gpath, "minReplicas"), f"must be <= maxReplicas ({high})", low)
                )
            if group.replicas is not None and high is not None and group.replicas > high:
                errors.append(
                    FieldError(
                        child_path(gpath, "replicas"), f"must be <= maxReplicas ({high})", group.replicas
                    )
                )
        for where, template in self._templates(path):
            if not template.spec.containers:
                errors.append(
                    FieldError(child_path(where, "spec", "containers"), "must have a container to run Ray")
                )
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        out: list[FieldError] = []
        for i, group in enumerate(self.worker_group_specs):
            bounded = group.min_replicas is not None or group.max_replicas is not None
            if bounded and group.min_replicas != group.max_replicas:
                out.append(
                    FieldError(
                        child_path(path, "workerGroupSpecs", i),
                        f"minReplicas/maxReplicas: {group.count()} pod(s) are admitted; scaling "
                        "between them on the Ray autoscaler's demand is not done",
                    )
                )
        for where, template in self._templates(path):
            if template.spec.containers and template.spec.containers[0].command:
                out.append(
                    FieldError(
                        child_path(where, "spec", "containers", 0, "command"),
                        "replaced by `ray start` built from rayStartParams (as KubeRay does)",
                    )
                )
        return out

    def _templates(self, path: str) -> list[tuple[str, RayPodTemplateSpec]]:
        out = [(child_path(path, "headGroupSpec", "template"), self.head_group_spec.template)]
        out += [
            (child_path(path, "workerGroupSpecs", i, "template"), g.template)
            for i, g in enumerate(self.worker_group_specs)
        ]
        return out


class RayClusterEndpoints(MusterModel):
    gcs_server: str | None = Field(default=None, alias="gcs-server", description="host:port of the GCS.")
    dashboard: str | None = Field(default=None, description="host:port of the dashboard.")


class HeadInfo(MusterModel):
    pod_name: str | None = Field(default=None, description="The head pod.")
    pod_ip: str | None = Field(default=None, alias="podIP", description="Address of the head's node.")


class RayClusterStatus(MusterModel):
    state: Literal["", "pending", "ready", "suspended", "failed"] = Field(
        default="", description="pending (queued or starting), ready, suspended or failed."
    )
    reason: str | None = Field(default=None, description="Why the cluster is in its state.")
    head: HeadInfo | None = Field(default=None, description="The head pod and its address.")
    endpoints: RayClusterEndpoints | None = Field(default=None, description="The head's endpoints.")
    head_address: str | None = Field(default=None, description="host:port workers and drivers join.")
    dashboard_url: str | None = Field(
        default=None, alias="dashboardURL", description="http://host:port of the Ray dashboard."
    )
    desired_worker_replicas: int = Field(default=0, ge=0, description="Worker pods admitted.")
    ready_worker_replicas: int = Field(default=0, ge=0, description="Worker pods running.")
    available_worker_replicas: int = Field(default=0, ge=0, description="Worker pods running.")
    min_worker_replicas: int = Field(default=0, ge=0, description="Sum of the groups' minReplicas.")
    max_worker_replicas: int = Field(default=0, ge=0, description="Sum of the groups' maxReplicas.")
    restart_count: int = Field(default=0, ge=0, description="Times the cluster's pods were started again.")
    workload: str | None = Field(default=None, description="Name of its Workload (same namespace).")
    ready_time: str | None = Field(default=None, description="When the cluster last became ready.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready, Suspended, Failed.")


class RayCluster(Object):
    """A Ray cluster: one gang of a head and worker groups running `ray start`."""

    KIND: ClassVar[str] = "RayCluster"
    kind: Literal["RayCluster"] = Field(default="RayCluster", description="Always RayCluster.")
    spec: RayClusterSpec = Field(description="Head, worker groups and queue.")
    status: RayClusterStatus | None = Field(default=None, description="State, endpoints and counts.")


class RayJobSpec(MusterModel):
    entrypoint: str = Field(description="Shell command of the Ray driver (`ray job submit -- <entrypoint>`).")
    runtime_env_yaml: str | None = Field(
        default=None,
        alias="runtimeEnvYAML",
        description="The job's runtime_env as YAML: env_vars and a local working_dir are honoured.",
    )
    metadata: dict[str, str] = Field(default_factory=dict, description="Job metadata given to Ray.")
    job_id: str | None = Field(default=None, description="The Ray job's id (default: generated).")
    ray_cluster_spec: RayClusterSpec | None = Field(default=None, description="The cluster to create.")
    cluster_selector: dict[str, str] = Field(
        default_factory=dict, description="Use the existing RayCluster named by label ray.io/cluster."
    )
    shutdown_after_job_finishes: bool = Field(
        default=False, description="Delete the created cluster once the job has finished."
    )
    ttl_seconds_after_finished: int = Field(
        default=0, ge=0, description="Seconds after the end before the cluster is deleted."
    )
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Seconds the job may take from its start before it fails."
    )
    backoff_limit: int = Field(default=0, ge=0, description="Retries of the whole job (a new cluster each).")
    submitter_pod_template: RayPodTemplateSpec | None = Field(
        default=None, description="The submitter pod (its first container's command is replaced)."
    )
    suspend: bool = Field(default=False, description="Suspended jobs run nothing and hold no quota.")
    queue_name: ObjectName | None = Field(default=None, description="LocalQueue of the created cluster.")
    priority_class_name: ObjectName | None = Field(default=None, description="PriorityClass of the cluster.")

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if (self.ray_cluster_spec is None) == (not self.cluster_selector):
            errors.append(
                FieldError(
                    path,
                    "must set exactly one of rayClusterSpec and clusterSelector",
                    hint=f"clusterSelector: {{{CLUSTER_SELECTOR_LABEL}: <existing RayCluster>}}",
                )
            )
        if self.cluster_selector and CLUSTER_SELECTOR_LABEL not in self.cluster_selector:
            errors.append(
                FieldError(
                    child_path(path, "clusterSelector"), f"must hold the label {CLUSTER_SELECTOR_LABEL}"
                )
            )
        if not self.entrypoint.strip():
            errors.append(FieldError(child_path(path, "entrypoint"), "must not be empty"))
        try:
            runtime_env_of(self.runtime_env_yaml)
        except ValueError as exc:
            errors.append(FieldError(child_path(path, "runtimeEnvYAML"), str(exc)))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        try:
            env = runtime_env_of(self.runtime_env_yaml)
        except ValueError:
            return []
        out = []
        for key in sorted(env):
            if key == "working_dir" and "://" in str(env[key]):
                why = "a remote working_dir is not fetched: give a local directory"
            elif key in ("env_vars", "working_dir"):
                continue
            else:
                why = "not honoured: the cluster's own Python environment runs the job"
            out.append(FieldError(child_path(path, "runtimeEnvYAML", key), why))
        return out


def runtime_env_of(text: str | None) -> dict[str, Any]:
    """A runtimeEnvYAML string as a mapping (ValueError saying what is wrong)."""
    if not text:
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"is not valid YAML: {exc}") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be a YAML mapping (env_vars:, working_dir:, pip:, ...)")
    env_vars = value.get("env_vars")
    if env_vars is not None and not isinstance(env_vars, dict):
        raise ValueError("env_vars must be a mapping of names to values")
    return value


class RayJobStatus(MusterModel):
    job_id: str | None = Field(default=None, description="The Ray job's id.")
    ray_cluster_name: str | None = Field(default=None, description="The cluster it runs on.")
    dashboard_url: str | None = Field(
        default=None, alias="dashboardURL", description="The cluster's dashboard."
    )
    job_status: Literal["", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"] = Field(
        default="", description="The Ray job's status."
    )
    job_deployment_status: Literal[
        "", "Initializing", "Running", "Complete", "Failed", "Suspended", "Retrying"
    ] = Field(default="", description="Where the RayJob is: Initializing, Running, Complete, Failed, ...")
    reason: str | None = Field(default=None, description="Why it is where it is.")
    message: str | None = Field(default=None, description="Human-readable detail.")
    start_time: str | None = Field(default=None, description="When the job was started.")
    end_time: str | None = Field(default=None, description="When the job finished.")
    succeeded: int = Field(default=0, ge=0, description="Runs that succeeded.")
    failed: int = Field(default=0, ge=0, description="Runs that failed.")
    submitter: str | None = Field(default=None, description="The submitter pod of the current run.")
    conditions: list[Condition] = Field(default_factory=list, description="Running, Complete, Failed.")


class RayJob(Object):
    """A Ray job: its entrypoint run on a RayCluster it creates or reuses."""

    KIND: ClassVar[str] = "RayJob"
    kind: Literal["RayJob"] = Field(default="RayJob", description="Always RayJob.")
    spec: RayJobSpec = Field(description="Entrypoint, cluster and clean-up.")
    status: RayJobStatus | None = Field(default=None, description="Job and deployment status.")
