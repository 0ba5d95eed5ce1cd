"""Preemption: choosing victims so that a pending workload's quota *and* gang placement fit.

:func:`find_targets` dispatches to classical (Kueue's candidate groups, attempts with and
without borrowing, fill-back) or fair-sharing preemption (dominant resource share
strategies); both add node-by-node victims when quota allows the preemptor but its gang
has no placement, and both leave the chosen victims removed from the cycle's state.
"""

from __future__ import annotations

from muster.scheduler.preemption.classical import classical_targets
from muster.scheduler.preemption.common import PreemptionCtx, Target
from muster.scheduler.preemption.fairsharing import fair_targets

__all__ = ["PreemptionCtx", "Target", "find_targets"]


def find_targets(ctx: PreemptionCtx) -> list[Target] | None:
    """Victims for the preemptor (left removed from the cycle), or None."""
    if ctx.cycle.fair:
        return fair_targets(ctx)
    return classical_targets(ctx)
