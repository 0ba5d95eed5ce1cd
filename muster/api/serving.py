"""InferenceService: a model served by replicas behind Muster's OpenAI-compatible gateway.

The shape follows KServe's ``serving.kserve.io/v1beta1`` InferenceService (a ``predictor``
that is a pod spec, ``minReplicas``/``maxReplicas``, ``scaleMetric``/``scaleTarget``,
``containerConcurrency``, ``canaryTrafficPercent``) with KubeAI's load-balancing block, so the
converters in :mod:`muster.api.compat.serving` are mechanical. docs/serving.md is the guide.

Each replica is one Workload of one pod, admitted through the service's LocalQueue like any
other workload; a change of ``spec.predictor`` is a new *revision* (``<name>-00002``), and
``canaryTrafficPercent`` splits traffic between the latest revision and the last one rolled
out, as KServe does in its Knative mode.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.common import ObjectName
from muster.api.errors import FieldError, child_path
from muster.api.podspec import PodSpec

__all__ = [
    "DEFAULT_CONCURRENCY_TARGET",
    "DEFAULT_RPS_TARGET",
    "INFERENCESERVICE_CONDITIONS",
    "LB_STRATEGIES",
    "InferenceService",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "LoadBalancing",
    "PredictorSpec",
    "PrefixHashSpec",
    "ReplicaStatus",
    "RevisionStatus",
    "TrafficTarget",
]

INFERENCESERVICE_CONDITIONS = ("Ready", "PredictorReady", "IngressReady")
# LeastLoad and PrefixHash are KubeAI's; PrefixLoad is Muster's default (docs/serving.md,
# "Routing"); RoundRobin is the baseline the benchmarks compare against.
LB_STRATEGIES = ("PrefixLoad", "LeastLoad", "PrefixHash", "RoundRobin")
Strategy = Literal["PrefixLoad", "LeastLoad", "PrefixHash", "RoundRobin"]
DEFAULT_CONCURRENCY_TARGET = 10.0
DEFAULT_RPS_TARGET = 100.0
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,255}$")


class PredictorSpec(PodSpec):
    """The replicas' pod: a PodSpec whose first container is the model server, plus where it
    listens and how its readiness is checked."""

    port: int = Field(
        default=8080,
        ge=1,
        le=65535,
        description="Port the model server listens on. On Kubernetes every pod uses it; on the local "
        "runtime replicas share the host's network, so each one gets a port of its own in $PORT "
        "(write $(PORT) in command or args).",
    )
    readiness_path: str = Field(
        default="/health",
        description="HTTP path that answers 200 once the server can take requests; a replica gets "
        "traffic only after it does (/health for vLLM and Muster's model server, /v2/health/ready "
        "for KServe v2 servers).",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = super().field_rules(path)
        if not self.readiness_path.startswith("/"):
            errors.append(
                FieldError(
                    child_path(path, "readinessPath"),
                    "must start with '/'",
                    self.readiness_path,
                    "e.g. /health",
                )
            )
        if self.node_name:
            errors.append(
                FieldError(
                    child_path(path, "nodeName"),
                    "may not be set: the scheduler places every replica",
                    self.node_name,
                    "use nodeSelector or affinity to choose nodes",
                )
            )
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        notes = super().field_warnings(path)
        if self.restart_policy is not None:
            notes.append(
                FieldError(
                    child_path(path, "restartPolicy"), "ignored: a replica that exits is always restarted"
                )
            )
        if not _mentions_port(self):
            notes.append(
                FieldError(
                    child_path(path, "containers", 0),
                    "does not refer to $(PORT): on the local runtime every replica listens on a port of "
                    "its own, given in $PORT; a fixed port lets only one replica run per machine",
                    hint='e.g. args: ["--port", "$(PORT)"]',
                )
            )
        return notes


class PrefixHashSpec(MusterModel):
    """KubeAI's consistent hashing with bounded loads (CHWBL)."""

    mean_load_factor: int = Field(
        default=125,
        ge=100,
        description="A replica is skipped while its in-flight requests exceed this percentage of the "
        "mean load ((total + 1) / replicas).",
    )
    replication: int = Field(
        default=256, ge=1, le=4096, description="Virtual nodes of each replica on the hash ring."
    )
    prefix_char_length: int = Field(
        default=100,
        ge=1,
        description="Characters of the first user message (chat) or the prompt that are hashed.",
    )


class LoadBalancing(MusterModel):
    strategy: Strategy = Field(
        default="PrefixLoad",
        description="PrefixLoad (default: the replica with the least estimated work, counting the "
        "prompt tokens it has cached and the requests it holds), LeastLoad (fewest in-flight "
        "requests), PrefixHash (KubeAI's CHWBL on the prompt's prefix) or RoundRobin.",
    )
    prefix_hash: PrefixHashSpec = Field(
        default_factory=PrefixHashSpec, description="Settings of the PrefixHash strategy."
    )


class InferenceServiceSpec(MusterModel):
    predictor: PredictorSpec = Field(description="The pod every replica runs: the model server.")
    model_names: list[str] = Field(
        default_factory=list,
        description="Names clients put in a request's `model` field (default: the service's name).",
    )
    min_replicas: int = Field(
        default=1, ge=0, description="Fewest replicas per revision in traffic; 0 lets it scale to zero."
    )
    max_replicas: int | None = Field(
        default=None, ge=1, description="Most replicas per revision (default: minReplicas, at least 1)."
    )
    scale_metric: Literal["concurrency", "rps"] = Field(
        default="concurrency",
        description="What the autoscaler keeps at scaleTarget per replica: in-flight requests "
        "(concurrency) or requests per second (rps), both measured at the gateway.",
    )
    scale_target: float | None = Field(
        default=None,
        gt=0,
        description="Per-replica target of scaleMetric (default: concurrency 10, or "
        "containerConcurrency when set; rps 100).",
    )
    target_utilization_percentage: int = Field(
        default=70, ge=1, le=100, description="Share of scaleTarget the autoscaler aims for (Knative's 70)."
    )
    stable_window_seconds: int = Field(
        default=60, ge=6, le=3600, description="Window the stable replica count is averaged over."
    )
    panic_window_percentage: float = Field(
        default=10.0, ge=1, le=100, description="Panic window as a percentage of the stable window."
    )
    panic_threshold_percentage: float = Field(
        default=200.0,
        gt=100,
        description="Demand over the panic window, as a percentage of ready capacity, that starts panic "
        "mode (scale up at once, never down).",
    )
    scale_down_delay_seconds: int = Field(
        default=30, ge=0, le=3600, description="A lower replica count must hold this long before it applies."
    )
    scale_to_zero_delay_seconds: int = Field(
        default=60,
        ge=0,
        le=86400,
        description="With minReplicas 0: seconds without any request before the last replica goes.",
    )
    container_concurrency: int = Field(
        default=0,
        ge=0,
        description="Most requests one replica is sent at once (0: unlimited); more wait at the gateway.",
    )
    max_queued_requests: int = Field(
        default=100,
        ge=0,
        description="Requests the gateway holds while no replica has room (at zero replicas, or all "
        "at containerConcurrency); beyond it, 429 with Retry-After.",
    )
    queue_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="How long a held request waits for a replica before 503 with Retry-After (covers "
        "a cold start).",
    )
    timeout_seconds: int = Field(
        default=600,
        ge=1,
        description="Longest a request may take on a replica; a replica being scaled down is stopped "
        "only once its requests finished or this ran out.",
    )
    canary_traffic_percent: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Share of traffic for the latest revision while the previous rolled-out one takes "
        "the rest; 100 or unset promotes it, 0 rolls back.",
    )
    load_balancing: LoadBalancing = Field(
        default_factory=LoadBalancing, description="How the gateway picks a replica for a request."
    )
    queue_name: ObjectName | None = Field(
        default=None, description="LocalQueue the replicas are admitted through (default: 'default')."
    )
    priority_class_name: ObjectName | None = Field(
        default=None,
        description="PriorityClass of the replicas. Without one, replicas are never preempted (by a "
        "training job or anything else); with one, they are preempted by priority like any workload.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.max_replicas is not None and self.max_replicas < self.min_replicas:
            errors.append(
                FieldError(
                    child_path(path, "maxReplicas"),
                    f"must be >= minReplicas ({self.min_replicas})",
                    self.max_replicas,
                    "raise maxReplicas or lower minReplicas",
                )
            )
        for i, name in enumerate(self.model_names):
            if not _MODEL_NAME.match(name):
                errors.append(
                    FieldError(
                        child_path(path, "modelNames", i),
                        "must be 1-256 letters, digits or . _ : / @ -, starting with a letter or digit",
                        name,
                    )
                )
        seen: set[str] = set()
        for i, name in enumerate(self.model_names):
            if name in seen:
                errors.append(FieldError(child_path(path, "modelNames", i), "duplicate model name", name))
            seen.add(name)
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        notes: list[FieldError] = []
        if (
            self.scale_metric == "concurrency"
            and self.container_concurrency
            and self.scale_target is not None
            and self.scale_target > self.container_concurrency
        ):
            notes.append(
                FieldError(
                    child_path(path, "scaleTarget"),
                    f"capped at containerConcurrency ({self.container_concurrency})",
                    self.scale_target,
                )
            )
        return notes

    # -- derived values the controller and the gateway share ---------------------------------

    def replica_bounds(self) -> tuple[int, int]:
        """(min, max) replicas of a revision in traffic."""
        return self.min_replicas, self.max_replicas or max(1, self.min_replicas)

    def target_per_replica(self) -> float:
        """What one replica should carry of the scale metric (before the utilisation factor)."""
        if self.scale_metric == "rps":
            return self.scale_target or DEFAULT_RPS_TARGET
        target = self.scale_target or (self.container_concurrency or DEFAULT_CONCURRENCY_TARGET)
        if self.container_concurrency:
            target = min(target, float(self.container_concurrency))
        return float(target)


class TrafficTarget(MusterModel):
    revision_name: str = Field(description="Revision the share goes to.")
    percent: int = Field(ge=0, le=100, description="Share of requests, in percent.")
    tag: str | None = Field(default=None, description="latest (the canary) or prev (the rolled-out one).")
    latest_revision: bool = Field(default=False, description="Whether this is the latest revision.")


class ReplicaStatus(MusterModel):
    name: str = Field(description="Replica name: its Workload's and its pod's.")
    revision: str = Field(description="Revision the replica runs.")
    state: Literal["Pending", "Starting", "Ready", "Draining", "Stopping", "Failed"] = Field(
        description="Pending (waiting for admission), Starting (not ready yet), Ready (in routing), "
        "Draining (no new requests; in-flight ones finish), Stopping, Failed (restarting)."
    )
    address: str | None = Field(default=None, description="host:port the gateway sends requests to.")
    node: str | None = Field(default=None, description="Node it runs on.")
    gpus: list[int] = Field(default_factory=list, description="GPU indices it holds on that node.")
    restarts: int = Field(default=0, ge=0, description="Times it was restarted after exiting.")
    message: str = Field(default="", description="Why it waits or failed.")


class RevisionStatus(MusterModel):
    name: str = Field(description="<service>-<5-digit number>, as Knative names revisions.")
    number: int = Field(ge=1, description="Revision number.")
    hash: str = Field(description="Hash of the predictor it runs.")
    created_at: str | None = Field(default=None, description="When the revision was created.")
    predictor: dict[str, Any] = Field(description="The predictor spec of this revision, as applied.")
    desired_replicas: int = Field(default=0, ge=0, description="Replicas the autoscaler wants.")
    ready_replicas: int = Field(default=0, ge=0, description="Replicas in routing.")
    next_index: int = Field(default=0, ge=0, description="Index of the next replica created.")
    autoscaler: dict[str, Any] = Field(
        default_factory=dict,
        description="The autoscaler's last decision: observed stable/panic demand, mode, reason.",
    )


class InferenceServiceStatus(MusterModel):
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready (PredictorReady and IngressReady), PredictorReady, IngressReady.",
    )
    observed_generation: int | None = Field(default=None, description="Spec generation this reflects.")
    url: str | None = Field(default=None, description="The gateway's base URL (OpenAI API under /v1).")
    model_names: list[str] = Field(default_factory=list, description="Model names routed to this service.")
    desired_replicas: int = Field(default=0, ge=0, description="Replicas wanted, all revisions.")
    ready_replicas: int = Field(default=0, ge=0, description="Replicas in routing, all revisions.")
    replicas: list[ReplicaStatus] = Field(default_factory=list, description="Every replica.")
    revisions: list[RevisionStatus] = Field(default_factory=list, description="Revisions still kept.")
    traffic: list[TrafficTarget] = Field(default_factory=list, description="The split in force.")
    latest_created_revision: str | None = Field(default=None, description="Newest revision.")
    latest_ready_revision: str | None = Field(
        default=None, description="Newest revision with a ready replica."
    )
    latest_rolledout_revision: str | None = Field(
        default=None, description="Revision that last took all traffic."
    )
    previous_rolledout_revision: str | None = Field(
        default=None, description="The one rolled out before it (rollback goes there)."
    )


class InferenceService(Object):
    """A served model: autoscaled replicas through the queues, behind the gateway."""

    KIND: ClassVar[str] = "InferenceService"
    kind: Literal["InferenceService"] = Field(
        default="InferenceService", description="Always InferenceService."
    )
    spec: InferenceServiceSpec = Field(description="Predictor, scaling, traffic and routing.")
    status: InferenceServiceStatus | None = Field(default=None, description="Replicas, revisions, traffic.")


def _mentions_port(predictor: PredictorSpec) -> bool:
    if not predictor.containers:
        return True
    first = predictor.containers[0]
    words = [*first.command, *first.args, *(e.value or "" for e in first.env)]
    return any("$(PORT)" in w or "$PORT" in w or "${PORT}" in w for w in words)
