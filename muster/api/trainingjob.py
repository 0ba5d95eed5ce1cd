"""TrainingJob: distributed training (DESIGN §7), shaped like Kubeflow's PyTorchJob v1.

``replicaSpecs`` holds a Master (exactly one pod, rank 0) and/or Workers; the controller
turns them into one Workload (a gang), then into pods with the torchrun-compatible
environment. ``framework`` says whose environment the pods get: PyTorch (the default),
TensorFlow (replica types Chief or Master, Worker, PS, Evaluator; ``TF_CONFIG``, as Kubeflow's
TFJob) or MPI (a Launcher and Workers; a hostfile, as Kubeflow's MPIJob).

Restart policies and ``runPolicy`` follow the Training Operator (reference/workloads.md §1),
with two deliberate differences: a failed replica restarts the whole gang, and
``cleanPodPolicy`` defaults to Running (pods still running when the job ends are stopped, so
they do not hold GPUs).
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from muster.api.base import Condition, MusterModel, Object
from muster.api.common import ObjectName
from muster.api.errors import FieldError, child_path
from muster.api.podspec import PodTemplateSpec

__all__ = [
    "FRAMEWORK_REPLICA_TYPES",
    "REPLICA_TYPES",
    "SINGLE_REPLICA_TYPES",
    "TRAININGJOB_CONDITIONS",
    "ElasticPolicy",
    "PreemptionRecord",
    "ReplicaSpec",
    "ReplicaSpecs",
    "ReplicaStatus",
    "RunPolicy",
    "SchedulingPolicy",
    "TrainingJob",
    "TrainingJobSpec",
    "TrainingJobStatus",
    "template_warnings",
]

TRAININGJOB_CONDITIONS = (
    "Created",
    "Queued",
    "Running",
    "Restarting",
    "Preempted",
    "Suspended",
    "Succeeded",
    "Failed",
)
RestartPolicy = Literal["OnFailure", "Never", "ExitCode", "Always"]
Framework = Literal["PyTorch", "TensorFlow", "MPI"]
ReplicaType = Literal["Master", "Chief", "Launcher", "Worker", "PS", "Evaluator"]
# Every replica type, in the order their pods are listed (and PyTorch ranks counted).
REPLICA_TYPES: tuple[str, ...] = ("Master", "Chief", "Launcher", "Worker", "PS", "Evaluator")
# The replica types each framework knows, and those that are exactly one pod.
FRAMEWORK_REPLICA_TYPES: dict[str, tuple[str, ...]] = {
    "PyTorch": ("Master", "Worker"),
    "TensorFlow": ("Chief", "Master", "Worker", "PS", "Evaluator"),
    "MPI": ("Launcher", "Worker"),
}
SINGLE_REPLICA_TYPES = ("Master", "Chief", "Launcher")
# (one of these must be set, the hint naming the framework's replica types)
_FRAMEWORK_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "PyTorch": (("Master", "Worker"), "replica types are Master (rank 0, one pod) and Worker"),
    "TensorFlow": (
        ("Chief", "Master", "Worker"),
        "replica types are Chief (or Master; one pod), Worker, PS and Evaluator",
    ),
    "MPI": (("Launcher",), "replica types are Launcher (one pod) and Worker"),
}


def _nproc(value: object) -> object:
    # PyTorchJob writes nprocPerNode as a string; YAML users often write a number.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _nproc_rule(value: str) -> str:
    if value in ("auto", "cpu", "gpu") or (re.fullmatch(r"[1-9][0-9]*", value) is not None):
        return value
    raise ValueError(f"must be auto, cpu, gpu or a positive integer, got {value!r}")


NprocPerNode = Annotated[
    str,
    BeforeValidator(_nproc),
    AfterValidator(_nproc_rule),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": "^(auto|cpu|gpu|[1-9][0-9]*)$"},
                {"type": "integer", "minimum": 1},
            ]
        }
    ),
]


class ReplicaSpec(MusterModel):
    replicas: int = Field(default=1, ge=1, description="Number of pods of this replica type.")
    restart_policy: RestartPolicy = Field(
        default="OnFailure",
        description="OnFailure/Always: restart the gang on failure; Never: a failure fails the job; "
        "ExitCode: exit codes 1-127 fail the job, 128 and above (signals) restart it.",
    )
    template: PodTemplateSpec = Field(description="The pods of this replica type.")


class ReplicaSpecs(MusterModel):
    master: ReplicaSpec | None = Field(
        default=None,
        alias="Master",
        description="PyTorch: rank 0; TensorFlow: the chief (as Chief); exactly 1 replica.",
    )
    chief: ReplicaSpec | None = Field(
        default=None, alias="Chief", description="TensorFlow: the chief worker; exactly 1 replica."
    )
    launcher: ReplicaSpec | None = Field(
        default=None, alias="Launcher", description="MPI: runs mpirun with the hostfile; exactly 1 replica."
    )
    worker: ReplicaSpec | None = Field(
        default=None,
        alias="Worker",
        description="PyTorch: ranks 1..N (0.. without Master); TF and MPI workers.",
    )
    ps: ReplicaSpec | None = Field(default=None, alias="PS", description="TensorFlow: parameter servers.")
    evaluator: ReplicaSpec | None = Field(
        default=None, alias="Evaluator", description="TensorFlow: the evaluator (not part of the cluster)."
    )

    def present(self) -> list[tuple[str, ReplicaSpec]]:
        """(replica type, spec) of each type set, in :data:`REPLICA_TYPES` order."""
        specs = [(rtype, getattr(self, rtype.lower())) for rtype in REPLICA_TYPES]
        return [(rtype, spec) for rtype, spec in specs if spec is not None]


class ElasticPolicy(MusterModel):
    min_replicas: int | None = Field(default=None, ge=1, description="Fewest workers to run with.")
    max_replicas: int | None = Field(default=None, ge=1, description="Most workers to run with.")
    max_restarts: int | None = Field(default=None, ge=0, description="torchrun --max-restarts.")
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] = Field(
        default="c10d", description="Rendezvous backend."
    )
    rdzv_host: str | None = Field(default=None, description="Rendezvous host (default: the first worker).")
    rdzv_port: int | None = Field(default=None, ge=1, le=65535, description="Rendezvous port.")
    rdzv_id: str | None = Field(default=None, description="Rendezvous id (TORCHELASTIC_RUN_ID).")
    grow_cooldown_seconds: int | None = Field(
        default=None,
        ge=0,
        description="Muster: the least seconds between a start or resize of the job and its growing "
        "toward maxReplicas (each resize restarts every worker from the checkpoint); default 60.",
    )


class SchedulingPolicy(MusterModel):
    queue: ObjectName | None = Field(default=None, description="LocalQueue name (same as spec.queueName).")
    priority_class: ObjectName | None = Field(
        default=None, description="PriorityClass (same as spec.priorityClassName)."
    )
    min_available: int | None = Field(
        default=None, ge=1, description="Fewest pods the gang may start with (default: all)."
    )


class RunPolicy(MusterModel):
    backoff_limit: int | None = Field(
        default=None, ge=0, description="Gang restarts allowed before the job fails (unset: no limit)."
    )
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Seconds the job may run from its start (reset on resume)."
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None, ge=0, description="Delete the finished job after this many seconds."
    )
    clean_pod_policy: Literal["All", "Running", "None"] = Field(
        default="Running", description="Pods to stop when the job finishes: All, Running or None."
    )
    suspend: bool = Field(default=False, description="Suspended jobs hold no resources and run no pods.")
    scheduling_policy: SchedulingPolicy | None = Field(default=None, description="Gang and queue settings.")


class TrainingJobSpec(MusterModel):
    framework: Framework = Field(
        default="PyTorch",
        description="Whose environment the replicas get: PyTorch (torchrun's), TensorFlow (TF_CONFIG) "
        "or MPI (a hostfile for the Launcher).",
    )
    replica_specs: ReplicaSpecs = Field(
        description="Replica specs by type: Master, Worker (PyTorch); Chief or Master, Worker, PS, "
        "Evaluator (TensorFlow); Launcher, Worker (MPI)."
    )
    success_policy: Literal["", "AllWorkers"] = Field(
        default="",
        description="TensorFlow without a Chief: the job succeeds when worker 0 does (empty, the "
        "default) or when every worker does (AllWorkers).",
    )
    slots_per_worker: int | None = Field(
        default=None, ge=1, description="MPI: processes (slots) per Worker in the hostfile (default 1)."
    )
    nproc_per_node: NprocPerNode = Field(
        default="auto", description="Processes per pod for torchrun: auto, cpu, gpu or an integer."
    )
    elastic_policy: ElasticPolicy | None = Field(default=None, description="Elastic (torchrun) training.")
    run_policy: RunPolicy = Field(default_factory=RunPolicy, description="Restarts, deadlines, clean-up.")
    queue_name: ObjectName | None = Field(
        default=None, description="LocalQueue to submit to (default: the namespace's default queue)."
    )
    priority_class_name: ObjectName | None = Field(default=None, description="PriorityClass of the job.")

    @model_validator(mode="after")
    def _names_from_scheduling_policy(self) -> TrainingJobSpec:
        # schedulingPolicy.queue/priorityClass (PyTorchJob's place for them) stand in for the
        # top-level names, so controllers read one field.
        policy = self.run_policy.scheduling_policy
        if policy is not None:
            if self.queue_name is None and policy.queue:
                self.queue_name = policy.queue
                self.model_fields_set.add("queue_name")
            if self.priority_class_name is None and policy.priority_class:
                self.priority_class_name = policy.priority_class
                self.model_fields_set.add("priority_class_name")
        return self

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        specs = self.replica_specs
        rpath = child_path(path, "replicaSpecs")
        errors.extend(self._framework_rules(path))
        for rtype, spec in specs.present():
            if rtype in SINGLE_REPLICA_TYPES and spec.replicas != 1:
                errors.append(FieldError(child_path(rpath, rtype, "replicas"), "must be 1", spec.replicas))
        elastic = self.elastic_policy
        if elastic is not None:
            epath = child_path(path, "elasticPolicy")
            if specs.worker is None:
                errors.append(FieldError(child_path(rpath, "Worker"), "is required with elasticPolicy"))
            if elastic.min_replicas and elastic.max_replicas and elastic.min_replicas > elastic.max_replicas:
                errors.append(
                    FieldError(
                        child_path(epath, "minReplicas"),
                        f"must be <= maxReplicas ({elastic.max_replicas})",
                        elastic.min_replicas,
                    )
                )
        errors.extend(self._run_policy_rules(path))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        out: list[FieldError] = []
        for rtype, spec in self.replica_specs.present():
            tpath = child_path(path, "replicaSpecs", rtype, "template")
            out.extend(template_warnings(spec.template, tpath, restart_by="the replica's restartPolicy"))
        return out

    def total_replicas(self) -> int:
        return sum(spec.replicas for _, spec in self.replica_specs.present())

    def _framework_rules(self, path: str) -> list[FieldError]:
        """The replica types and fields each framework takes (FRAMEWORK_REPLICA_TYPES)."""
        errors: list[FieldError] = []
        rpath = child_path(path, "replicaSpecs")
        allowed = FRAMEWORK_REPLICA_TYPES[self.framework]
        needs, hint = _FRAMEWORK_NEEDS[self.framework]
        present = [rtype for rtype, _ in self.replica_specs.present()]
        for rtype in present:
            if rtype not in allowed:
                errors.append(
                    FieldError(child_path(rpath, rtype), f"is not a {self.framework} replica type", hint=hint)
                )
        if not any(rtype in present for rtype in needs):
            need = " or ".join(f"a {rtype}" for rtype in needs)
            errors.append(FieldError(rpath, f"must have {need} replica spec", hint=hint))
        if "Chief" in present and "Master" in present:
            errors.append(
                FieldError(
                    child_path(rpath, "Master"), "may not be set together with Chief (they are the same)"
                )
            )
        for field, value, only in (
            ("successPolicy", self.success_policy, "TensorFlow"),
            ("slotsPerWorker", self.slots_per_worker, "MPI"),
            ("elasticPolicy", self.elastic_policy, "PyTorch"),
            ("nprocPerNode", "nproc_per_node" in self.model_fields_set or None, "PyTorch"),
        ):
            if value and self.framework != only:
                errors.append(FieldError(child_path(path, field), f"is for framework {only} only"))
        return errors

    def _run_policy_rules(self, path: str) -> list[FieldError]:
        policy = self.run_policy.scheduling_policy
        if policy is None:
            return []
        errors: list[FieldError] = []
        ppath = child_path(path, "runPolicy", "schedulingPolicy")
        total = self.total_replicas()
        if policy.min_available is not None and total and policy.min_available > total:
            errors.append(
                FieldError(
                    child_path(ppath, "minAvailable"),
                    f"must be <= the total number of replicas ({total})",
                    policy.min_available,
                )
            )
        for mine, theirs, field in (
            (self.queue_name, policy.queue, "queueName"),
            (self.priority_class_name, policy.priority_class, "priorityClassName"),
        ):
            if mine and theirs and mine != theirs:
                where = child_path(ppath, "queue" if field == "queueName" else "priorityClass")
                errors.append(
                    FieldError(where, f"conflicts with {child_path(path, field)} ({mine!r})", theirs)
                )
        return errors


def template_warnings(template: PodTemplateSpec, path: str, restart_by: str) -> list[FieldError]:
    """Warnings for template fields a controller overrides (shared by jobs and workflows)."""
    spec = template.spec
    out: list[FieldError] = []
    if spec.restart_policy is not None:
        out.append(
            FieldError(child_path(path, "spec", "restartPolicy"), f"ignored: {restart_by} decides restarts")
        )
    if spec.node_name:
        out.append(
            FieldError(
                child_path(path, "spec", "nodeName"),
                "ignored: the scheduler chooses the node (use nodeSelector kubernetes.io/hostname)",
            )
        )
    return out


class ReplicaStatus(MusterModel):
    active: int = Field(default=0, ge=0, description="Pods running.")
    succeeded: int = Field(default=0, ge=0, description="Pods that succeeded.")
    failed: int = Field(default=0, ge=0, description="Pods that failed.")


class PreemptionRecord(MusterModel):
    time: str = Field(description="When the job was preempted (UTC).")
    preemptor: str | None = Field(default=None, description="Workload that caused it, namespace/name.")
    reason: str = Field(default="", description="InClusterQueue, InCohortReclamation, ...")
    message: str = Field(default="", description="Human-readable detail.")
    resumed_at: str | None = Field(
        default=None, description="When the next run's pods were created (UTC); unset until it resumes."
    )
    checkpoint_found: bool | None = Field(
        default=None, description="Whether MUSTER_CHECKPOINT_DIR held a checkpoint when it resumed."
    )
    checkpoint: str | None = Field(
        default=None, description="The newest file in MUSTER_CHECKPOINT_DIR then (relative path)."
    )


class ResizeRecord(MusterModel):
    time: str = Field(description="When the job's Workload was resized (UTC).")
    from_workers: int = Field(alias="from", ge=0, description="Workers before.")
    to_workers: int = Field(alias="to", ge=0, description="Workers after.")
    reason: str = Field(default="", description="CapacityReturned or NodeLost.")
    message: str = Field(default="", description="Human-readable detail.")
    started: str | None = Field(default=None, description="When the pods of the new size were created (UTC).")
    checkpoint: str | None = Field(
        default=None, description="The newest file in MUSTER_CHECKPOINT_DIR when the new size started."
    )


class TrainingJobStatus(MusterModel):
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Created, Queued, Running, Restarting, Preempted, Suspended, Succeeded, Failed.",
    )
    replica_statuses: dict[ReplicaType, ReplicaStatus] = Field(
        default_factory=dict, description="Pod counts per replica type."
    )
    start_time: str | None = Field(default=None, description="When pods first ran (reset on resume).")
    completion_time: str | None = Field(default=None, description="When the job finished.")
    restart_count: int = Field(default=0, ge=0, description="Gang restarts so far (MUSTER_RESTART_COUNT).")
    workload: str | None = Field(default=None, description="Name of its Workload (same namespace).")
    preemptions: list[PreemptionRecord] = Field(default_factory=list, description="Preemption history.")
    resizes: list[ResizeRecord] = Field(
        default_factory=list, description="Elastic resizes, the newest last (at most 20 kept)."
    )


class TrainingJob(Object):
    """Distributed training: a gang of replica pods with their framework's environment."""

    KIND: ClassVar[str] = "TrainingJob"
    kind: Literal["TrainingJob"] = Field(default="TrainingJob", description="Always TrainingJob.")
    spec: TrainingJobSpec = Field(description="Replicas, policies and queue.")
    status: TrainingJobStatus | None = Field(default=None, description="Conditions and replica counts.")
