"""Elastic Workloads (``spec.elastic``: an elastic TrainingJob's) as the scheduler loop sees them.

The scheduler core grows an admitted workload that lists its full-size pod sets
(:attr:`muster.scheduler.AdmittedWorkload.grow`, :mod:`muster.scheduler.grow`); whether it may
grow *now* is the driver's to decide, here, because it depends on the clock and the pods:

* only below its full size (some pod set admitted at fewer pods than its ``count``);
* only once every pod of its current size runs (a gang still starting is not restarted);
* only ``spec.elastic.growCooldownSeconds`` after its admission or its last resize.

On node loss, a drain or a failed GPU the health controller shrinks an elastic Workload in
place (:func:`shrunk`) when what is left keeps every pod set's ``minCount``, instead of
evicting it.

A workload that may not grow yet is *held* with the reason (GangStarting, CoolingDown), which
the writer stores in ``status.elastic.held`` as it does the core's reasons; ``muster why``
shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from muster.api.conditions import epoch, iso, transition_time
from muster.api.labels import WORKLOAD_LABEL
from muster.api.lifecycle import phase
from muster.api.quantity import Quantity
from muster.controllers.pods.stop import stop_requested
from muster.scheduler import PodSet

__all__ = ["COOLING_DOWN", "GANG_STARTING", "Growth", "below_full_size", "growth", "running_pods", "shrunk"]

Obj = dict[str, Any]
GANG_STARTING = "GangStarting"
COOLING_DOWN = "CoolingDown"


@dataclass(frozen=True)
class Growth:
    """Whether an admitted Workload may grow now: the pod sets to grow to (empty: not now), or
    why it is held, and when to look again."""

    grow: tuple[PodSet, ...] = ()
    held: tuple[str, str] | None = None
    wake_at: float | None = None


def below_full_size(wl: Obj) -> bool:
    """An elastic Workload admitted below some pod set's count."""
    if not (wl.get("spec") or {}).get("elastic"):
        return False
    admission = (wl.get("status") or {}).get("admission") or {}
    counts = {a["name"]: int(a["count"]) for a in admission.get("podSetAssignments") or ()}
    return any(counts.get(ps.get("name", "main"), 0) < int(ps["count"]) for ps in wl["spec"]["podSets"])


def running_pods(pods: Iterable[Obj]) -> dict[tuple[str, str], int]:
    """(namespace, workload) -> its pods that run and are not asked to stop."""
    out: dict[tuple[str, str], int] = {}
    for p in pods:
        owner = (p["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
        if owner and phase(p) == "Running" and not stop_requested(p):
            key = (p["metadata"].get("namespace") or "", owner)
            out[key] = out.get(key, 0) + 1
    return out


def growth(wl: Obj, running: int, now: float, pod_set_of: Callable[[Obj], PodSet]) -> Growth:
    """Whether the admitted ``wl`` may grow now (module docstring); ``pod_set_of`` converts a
    wire pod set to the scheduler's."""
    if not below_full_size(wl):
        return Growth()
    admission = wl["status"]["admission"]
    total = sum(int(a["count"]) for a in admission.get("podSetAssignments") or ())
    if running < total:
        return Growth(
            held=(
                GANG_STARTING,
                f"{running} of its {total} pod(s) run; it grows only once every pod of its current size runs",
            )
        )
    elastic = wl["spec"]["elastic"]
    cooldown = float(elastic.get("growCooldownSeconds", 60))
    last = max(
        transition_time(wl, "QuotaReserved") or 0.0,
        epoch((wl["status"].get("elastic") or {}).get("lastResizeTime")) or 0.0,
    )
    if now < last + cooldown:
        return Growth(
            held=(
                COOLING_DOWN,
                f"it may grow from {iso(last + cooldown)} on: growCooldownSeconds ({cooldown:g}s) after its "
                f"last start or resize at {iso(last)}",
            ),
            wake_at=last + cooldown,
        )
    return Growth(grow=tuple(pod_set_of(ps) for ps in wl["spec"]["podSets"]))


def shrunk(wl: Obj, lost: set[str], bad_gpus: Iterable[tuple[str, int]] = ()) -> list[Obj] | None:
    """The pod set assignments of the elastic ``wl`` without its pods on the ``lost`` nodes (lost
    or drained) and those holding a GPU of ``bad_gpus`` ((node, index): failed), when every pod
    set keeps at least its ``minCount`` (a pod set without one: all its pods); None when it
    cannot run smaller (then it is evicted and requeued as any other)."""
    if not (wl.get("spec") or {}).get("elastic"):
        return None
    specs = {ps.get("name", "main"): ps for ps in wl["spec"]["podSets"]}
    bad = set(bad_gpus)
    out = []
    dropped = False
    for a in wl["status"]["admission"].get("podSetAssignments") or ():
        pods = a.get("pods") or []
        kept = [p for p in pods if p.get("node") not in lost and not _holds(p, bad)]
        spec = specs.get(a["name"]) or {}
        least = spec.get("minCount") or spec.get("count") or len(pods)
        if len(kept) < len(pods):
            dropped = True
            if len(kept) < least:
                return None
        usage = {r: _scaled(q, len(kept), len(pods)) for r, q in (a.get("resourceUsage") or {}).items()}
        out.append({**a, "count": len(kept), "pods": kept, "resourceUsage": usage})
    return out if dropped else None


def _holds(pod: Obj, bad: set[tuple[str, int]]) -> bool:
    return any((pod.get("node"), int(index)) in bad for index in pod.get("gpus") or ())


def _scaled(quantity: str, kept: int, had: int) -> str:
    """A pod set's quota charge for ``kept`` of its ``had`` pods."""
    return str(Quantity.parse(quantity) * Fraction(kept, had)) if had else quantity
