"""Early stopping rules, as pure functions of the trials' curves.

**ASHA** (Li et al., MLSys 2020), with pause and resume: when a trial's objective reaches a
rung's step it is recorded there; it goes on only if it is in the top ``1/eta`` of the values
recorded at that rung so far (itself included), else it is paused (its job suspended: the
checkpoint handshake, its GPUs back to the queue). Whenever the experiment has room for a trial,
a paused trial that is now in the top ``1/eta`` of its rung is promoted (highest rungs first)
before a new configuration starts: it resumes from its checkpoint.

**Median stopping** (Golovin et al., KDD 2017, as Vizier and Optuna's MedianPruner): once
``min_trials_required`` trials completed, a running trial past ``start_step`` reports is
stopped when its best value so far is strictly worse than the median of the completed trials'
running averages up to the same step.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from muster.api.experiment_plan import AshaOptions, MedianOptions

__all__ = ["RungEntry", "asha_decision", "median_stop", "next_milestone", "promotable", "rung_cut"]


@dataclass(frozen=True)
class RungEntry:
    """A trial's value recorded at rung ``rung`` of bracket ``bracket``; ``paused`` while it
    waits there (it may be promoted)."""

    trial: str
    index: int
    bracket: int
    rung: int
    value: float
    paused: bool


def rung_cut(values: Sequence[tuple[float, int]], eta: int, maximize: bool) -> set[int]:
    """The trial indices in the top ``floor(n / eta)`` of ``(value, index)`` pairs (ties: the
    earlier trial first)."""
    keep = len(values) // eta
    ranked = sorted(values, key=lambda vi: (-vi[0] if maximize else vi[0], vi[1]))
    return {i for _v, i in ranked[:keep]}


def asha_decision(
    entries: Sequence[RungEntry], index: int, bracket: int, rung: int, value: float, eta: int, maximize: bool
) -> bool:
    """Whether trial ``index``, arriving at ``rung`` with ``value``, goes on (True) or pauses."""
    here = [
        (e.value, e.index) for e in entries if (e.bracket, e.rung) == (bracket, rung) and e.index != index
    ]
    return index in rung_cut([*here, (value, index)], eta, maximize)


def promotable(entries: Sequence[RungEntry], eta: int, maximize: bool) -> RungEntry | None:
    """The paused trial to promote now: the best of those in the top ``1/eta`` of their rung,
    highest rung first; None when no paused trial qualifies."""
    rungs: dict[tuple[int, int], list[RungEntry]] = {}
    for e in entries:
        rungs.setdefault((e.bracket, e.rung), []).append(e)
    best: RungEntry | None = None
    for here in rungs.values():
        paused = [e for e in here if e.paused]
        if not paused:
            continue
        cut = rung_cut([(x.value, x.index) for x in here], eta, maximize)
        for e in paused:
            if e.index in cut and (
                best is None
                or (e.rung, _better(e.value, maximize), -e.index)
                > (best.rung, _better(best.value, maximize), -best.index)
            ):
                best = e
    return best


def next_milestone(options: AshaOptions, bracket: int, judged: int) -> tuple[int, int] | None:
    """(rung, step) of the first rung after the ``judged`` ones (None: it runs to the end)."""
    milestones = options.milestones(bracket)
    return (judged, milestones[judged]) if judged < len(milestones) else None


def median_stop(
    curve: Mapping[int, float],
    completed: Sequence[Mapping[int, float]],
    options: MedianOptions,
    maximize: bool,
) -> str | None:
    """Why the trial with ``curve`` (step -> value) should stop now, or None."""
    if not curve or len(completed) < options.min_trials_required:
        return None
    step = max(curve)
    if step < options.start_step:
        return None
    averages = []
    for other in completed:
        upto = [v for s, v in other.items() if s <= step]
        if upto:
            averages.append(sum(upto) / len(upto))
    if len(averages) < options.min_trials_required:
        return None
    median = statistics.median(averages)
    best = max(curve.values()) if maximize else min(curve.values())
    worse = best < median if maximize else best > median
    if not worse:
        return None
    return (
        f"its best value {best:.6g} after {step} reports is worse than the median {median:.6g} of "
        f"{len(averages)} completed trials' running averages at that step"
    )


def _better(value: float, maximize: bool) -> float:
    return value if maximize else -value
