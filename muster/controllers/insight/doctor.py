"""``muster doctor``: everything that looks wrong in the cluster, most severe first, each with
its evidence and a fix.

Pure functions over the objects and the GPU readings (:class:`Inputs`); the checks are in
:mod:`muster.controllers.insight.checks` and :mod:`muster.controllers.insight.stuck`. A
finding is ``critical`` when something is broken now (a node that stopped answering, an
unhealthy GPU, no GPU at all for jobs that ask for GPUs), a ``warning`` when resources or
time are being wasted (a failed job, a job that can never be admitted as the cluster is or
that a fixable fact keeps out, named by the root cause ``muster why`` gives, an idle
allocated GPU, an OOM loop, a restart loop, a job waiting long, a gang blocked by
fragmentation, quota idle in one queue while another waits) and ``info`` for what an
operator should know (a cordoned node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from muster.api.conditions import iso
from muster.controllers.insight.checks import CHECKS
from muster.controllers.insight.findings import (
    CODES,
    SEVERITIES,
    Finding,
    Inputs,
    Thresholds,
)

__all__ = [
    "CODES",
    "SEVERITIES",
    "Finding",
    "Inputs",
    "Thresholds",
    "diagnose",
    "report",
]


def diagnose(inputs: Inputs, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every finding, most severe first (then by code and title)."""
    t = thresholds or Thresholds()
    found: list[Finding] = []
    for check in CHECKS:
        found.extend(check(inputs, t))
    return sorted(found, key=lambda f: (SEVERITIES.index(f.severity), CODES.index(f.code), f.title))


def report(findings: Sequence[Finding], inputs: Inputs, thresholds: Thresholds) -> dict[str, Any]:
    """The JSON answer of ``GET /api/v1/doctor`` and ``muster doctor -o json``."""
    return {
        "checkedAt": iso(inputs.now),
        "gpuSamples": inputs.sample_seconds is not None,
        "thresholds": thresholds.to_dict(),
        "counts": {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        "findings": [f.to_dict() for f in findings],
    }
