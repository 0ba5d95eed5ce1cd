"""Revisions and the traffic split between them, as KServe does it in Knative mode.

A revision is one version of ``spec.predictor``: a change of the predictor (its containers,
resources, port, ...) creates ``<name>-<n>`` with the next number; changes elsewhere (replica
bounds, scaling, routing, the canary percentage) do not. The split (reference/workloads.md §6):

* first deployment: the latest revision takes 100% (``canaryTrafficPercent`` is ignored) and is
  the rolled-out one;
* a new revision with ``canaryTrafficPercent: p`` (0 < p < 100): once it has a ready replica it
  takes p%, the last rolled-out revision the rest; until then the rolled-out one takes all;
* promote (the field removed, or 100): once the latest is ready it takes 100%; the rolled-out
  revision becomes the previous one and the latest the rolled-out one;
* roll back (``canaryTrafficPercent: 0``): the rolled-out revision takes 100% again;
* a rolled-out latest revision split below 100% again hands the rest back to the previous
  rolled-out revision, which becomes the rolled-out one again.

Only the latest, rolled-out and previous rolled-out revisions are kept; older ones are retired
(their replicas drained and stopped).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from muster.api.conditions import iso

__all__ = ["Split", "predictor_hash", "split_traffic", "sync_revisions"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class Split:
    """The traffic in force: (revision, percent) pairs summing to 100, and a note for the Event
    when it changed (empty when not)."""

    traffic: tuple[tuple[str, int], ...]
    note: str = ""


def predictor_hash(predictor: Obj) -> str:
    return hashlib.sha256(json.dumps(predictor, sort_keys=True).encode()).hexdigest()[:12]


def sync_revisions(name: str, spec: Obj, status: Obj, now: float) -> str | None:
    """Record a new revision in ``status`` when the predictor changed; its name, or None."""
    predictor = spec["predictor"]
    digest = predictor_hash(predictor)
    revisions: list[Obj] = status.setdefault("revisions", [])
    latest = status.get("latestCreatedRevision")
    current = next((r for r in revisions if r["name"] == latest), None)
    if current is not None and current["hash"] == digest:
        return None
    number = max((int(r["number"]) for r in revisions), default=0) + 1
    revision = f"{name}-{number:05d}"
    revisions.append(
        {"name": revision, "number": number, "hash": digest, "createdAt": iso(now), "predictor": predictor}
    )
    status["latestCreatedRevision"] = revision
    return revision


def split_traffic(spec: Obj, status: Obj, ready: set[str]) -> Split:
    """Decide the split and move ``status``'s rolled-out revisions as the rules above say.

    ``ready`` names the revisions that have (had) a ready replica."""
    latest = status.get("latestCreatedRevision")
    rolled = status.get("latestRolledoutRevision")
    previous = status.get("previousRolledoutRevision")
    percent = spec.get("canaryTrafficPercent")
    p = 100 if percent is None else int(percent)
    before = tuple((t["revisionName"], t["percent"]) for t in status.get("traffic") or [])
    if latest is None:
        return Split(())
    if rolled is None or (rolled == latest and p == 100):
        status["latestRolledoutRevision"] = latest
        traffic: tuple[tuple[str, int], ...] = ((latest, 100),)
    elif rolled == latest:  # a rolled-out latest split again: the rest goes back to the previous
        if previous is None:
            traffic = ((latest, 100),)
        else:
            status["latestRolledoutRevision"], status["previousRolledoutRevision"] = previous, None
            traffic = _split(latest, previous, p)
    elif p == 100:
        if latest in ready:
            status["previousRolledoutRevision"], status["latestRolledoutRevision"] = rolled, latest
            traffic = ((latest, 100),)
        else:
            traffic = ((rolled, 100),)
    elif p == 0 or latest not in ready:
        traffic = ((rolled, 100),)
    else:
        traffic = _split(latest, rolled, p)
    status["traffic"] = [_target(rev, pct, status) for rev, pct in traffic]
    note = "" if traffic == before else ", ".join(f"{rev} {pct}%" for rev, pct in traffic)
    return Split(traffic, note)


def kept_revisions(status: Obj) -> set[str]:
    """The revisions worth keeping: the latest, the rolled-out and the previous rolled-out one."""
    return {
        r
        for r in (
            status.get("latestCreatedRevision"),
            status.get("latestRolledoutRevision"),
            status.get("previousRolledoutRevision"),
        )
        if r
    }


def _split(latest: str, other: str, p: int) -> tuple[tuple[str, int], ...]:
    return (
        ((latest, p), (other, 100 - p)) if 0 < p < 100 else ((latest, 100),) if p >= 100 else ((other, 100),)
    )


def _target(revision: str, percent: int, status: Obj) -> Obj:
    tag = "latest" if revision == status.get("latestCreatedRevision") else "prev"
    return {
        "revisionName": revision,
        "percent": percent,
        "tag": tag,
        "latestRevision": revision == status.get("latestCreatedRevision"),
    }
