"""``muster doctor``: everything that looks wrong in the cluster, most severe first, each with
its evidence and a fix.

Pure functions over the objects and the GPU readings (:class:`Inputs`); the checks are in
:mod:`muster.controllers.doctor_checks`. A finding is ``critical`` when something is broken
now (a node that stopped answering, an unhealthy GPU), a ``warning`` when resources or time
are being wasted (an idle allocated GPU, an OOM loop, a restart loop, a job waiting long, a
gang blocked by fragmentation, quota idle in one queue while another waits) and ``info``
for what an operator should know (a cordoned node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from muster.controllers.gpumonitor import History
from muster.runtime.base import iso_from_epoch

__all__ = [
    "CODES",
    "SEVERITIES",
    "Finding",
    "Inputs",
    "Thresholds",
    "diagnose",
    "markdown",
    "report",
]

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
    history: History = field(default_factory=dict)
    sample_seconds: float | None = None
    now: float = 0.0


def diagnose(inputs: Inputs, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every finding, most severe first (then by code and title)."""
    from muster.controllers import doctor_checks as checks

    t = thresholds or Thresholds()
    found: list[Finding] = []
    for check in checks.CHECKS:
        found.extend(check(inputs, t))
    return sorted(found, key=lambda f: (SEVERITIES.index(f.severity), CODES.index(f.code), f.title))


def report(findings: Sequence[Finding], inputs: Inputs, thresholds: Thresholds) -> dict[str, Any]:
    """The JSON answer of ``GET /api/v1/doctor`` and ``muster doctor -o json``."""
    return {
        "checkedAt": iso_from_epoch(inputs.now),
        "gpuSamples": inputs.sample_seconds is not None,
        "thresholds": thresholds.to_dict(),
        "counts": {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        "findings": [f.to_dict() for f in findings],
    }


def markdown(answer: Mapping[str, Any]) -> str:
    """A report (as :func:`report` gives it) as Markdown, for a ticket or a chat."""
    counts = answer["counts"]
    lines = [
        "# muster doctor",
        "",
        f"Checked at {answer['checkedAt']}: {counts['critical']} critical, {counts['warning']} "
        f"warning(s), {counts['info']} note(s).",
    ]
    if not answer["gpuSamples"]:
        lines += ["", "_No GPU readings: allocated-but-idle GPUs were not checked._"]
    if not answer["findings"]:
        lines += ["", "Nothing found: the cluster looks healthy."]
    for f in answer["findings"]:
        lines += ["", f"## {f['severity'].upper()} {f['code']}: {f['title']}", ""]
        if f["objects"]:
            lines.append("Objects: " + ", ".join(f"`{o}`" for o in f["objects"]))
            lines.append("")
        lines += [f"- {e}" for e in f["evidence"]]
        if f["fix"]:
            lines += ["", f"**Fix:** {f['fix']}"]
    return "\n".join(lines) + "\n"
