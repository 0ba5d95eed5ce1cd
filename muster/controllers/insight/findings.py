"""What ``muster doctor`` finds and what it looks at: :class:`Finding`, :class:`Inputs` and
:class:`Thresholds`, shared by the checks (:mod:`muster.controllers.insight.checks`) and the
report (:mod:`muster.controllers.insight.doctor`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from muster.controllers.nodes.gpumonitor import History

__all__ = [
    "CODES",
    "SEVERITIES",
    "Finding",
    "Inputs",
    "Obj",
    "Severity",
    "Thresholds",
    "capped",
    "object_ref",
    "owner_ref",
]

Obj = Mapping[str, Any]
Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")
CODES = (
    "NodeNotReady",
    "GPUUnhealthy",
    "NoGPUs",
    "JobFailed",
    "NeverFits",
    "AvoidableWait",
    "OOMLoop",
    "RestartLoop",
    "IdleGPU",
    "PendingTooLong",
    "FragmentationBlocksGang",
    "QuotaUnusedWhileOthersWait",
    "NodeCordoned",
)


@dataclass(frozen=True)
class Thresholds:
    """When a finding is raised (server defaults: the ``MUSTER_DOCTOR_*`` settings)."""

    idle_threshold: float = 5.0  # percent utilisation under which an allocated GPU is idle
    idle_minutes: float = 10.0  # ... for at least this long
    pending_minutes: float = 30.0  # a Workload waiting longer is reported
    restarts: int = 3  # gang restarts that make a restart loop

    def to_dict(self) -> dict[str, Any]:
        return {
            "idleThreshold": self.idle_threshold,
            "idleMinutes": self.idle_minutes,
            "pendingMinutes": self.pending_minutes,
            "restarts": self.restarts,
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
    # What the scheduler's snapshot needs besides, to explain a waiting Workload as `why` does.
    flavors: Sequence[Obj] = ()
    topologies: Sequence[Obj] = ()
    cohorts: Sequence[Obj] = ()
    priority_classes: Sequence[Obj] = ()
    history: History = field(default_factory=dict)
    sample_seconds: float | None = None
    now: float = 0.0


def owner_ref(wl: Obj) -> str:
    """``trainingjob/NS/NAME`` of the Workload's owner, else ``workload/NS/NAME``."""
    ns = wl["metadata"].get("namespace") or "default"
    for ref in wl["metadata"].get("ownerReferences") or []:
        return f"{str(ref.get('kind', '')).lower()}/{ns}/{ref.get('name')}"
    return f"workload/{ns}/{wl['metadata']['name']}"


def object_ref(obj: Obj) -> str:
    """``NS/NAME``."""
    return f"{obj['metadata'].get('namespace') or 'default'}/{obj['metadata']['name']}"


def capped(lines: Sequence[str], listed: int = 10) -> list[str]:
    """The first ``listed`` evidence lines, and how many more there are."""
    return list(lines[:listed]) + ([f"and {len(lines) - listed} more"] if len(lines) > listed else [])
