"""What ``muster doctor`` finds and what it looks at: :class:`Finding`, :class:`Inputs` and
:class:`Thresholds`, shared by the checks (:mod:`muster.controllers.insight.checks`) and the
report (:mod:`muster.controllers.insight.doctor`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from muster.controllers.nodes.gpumonitor import History

__all__ = ["CODES", "SEVERITIES", "Finding", "Inputs", "Obj", "Severity", "Thresholds"]

Obj = Mapping[str, Any]
Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")
CODES = (
    "NodeNotReady",
    "GPUUnhealthy",
    "OOMLoop",
    "RestartLoop",
    "IdleGPU",
    "PendingTooLong",
    "FragmentationBlocksGang",
    "QuotaUnusedWhileOthersWait",
    "PoolIdleCost",
    "NodeCordoned",
)


@dataclass(frozen=True)
class Thresholds:
    """When a finding is raised (server defaults: the ``MUSTER_DOCTOR_*`` settings)."""

    idle_threshold: float = 5.0  # percent utilisation under which an allocated GPU is idle
    idle_minutes: float = 10.0  # ... for at least this long
    pending_minutes: float = 30.0  # a Workload waiting longer is reported
    restarts: int = 3  # gang restarts that make a restart loop
    idle_pool_cost: float = 5.0  # idle cost per hour of a NodePool (over the last hour) that is reported

    def to_dict(self) -> dict[str, Any]:
        return {
            "idleThreshold": self.idle_threshold,
            "idleMinutes": self.idle_minutes,
            "pendingMinutes": self.pending_minutes,
            "restarts": self.restarts,
            "idlePoolCost": self.idle_pool_cost,
        }


@dataclass
class Finding:
    severity: Severity
    code: str  # one of CODES
    title: str
    objects: list[str] = field(default_factory=list)  # kind/name or kind/namespace/name
    evidence: list[str] = field(default_factory=list)
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Inputs:
    """The cluster as the doctor sees it. ``history`` holds GPU readings by UUID (oldest first);
    ``sample_seconds`` is None when nothing samples GPUs (the idle check is then skipped)."""

    nodes: Sequence[Obj] = ()
    pods: Sequence[Obj] = ()
    workloads: Sequence[Obj] = ()
    jobs: Sequence[Obj] = ()
    cluster_queues: Sequence[Obj] = ()
    local_queues: Sequence[Obj] = ()
    events: Sequence[Obj] = ()
    history: History = field(default_factory=dict)
    sample_seconds: float | None = None
    now: float = 0.0
    usage_records: Sequence[Obj] = ()  # the cost ledger (UsageRecords)
