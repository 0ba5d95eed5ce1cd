"""Scheduling policy: the placement score, fair sharing and the seed for ties.

The placement policies are the named ones of DESIGN §5; the six of the FGD paper (random,
dotprod, gpu-clustering, gpu-packing, bestfit, fgd) follow the simulator of Weng et al.
exactly (see :mod:`muster.scheduler.placement.scores`). ``fgd`` needs the workload's
distribution, the *typical pod set*: give it in :attr:`Policy.typical_pods` (build one
from a trace with :func:`muster.scheduler.placement.fragmentation.typical_pods`); when it
is empty, the pods of the snapshot itself are used.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FAIR_SHARING_STRATEGIES", "PLACEMENT_POLICIES", "Policy", "TypicalPod"]

PLACEMENT_POLICIES = (
    "binpack",
    "spread",
    "bestfit",
    "dotprod",
    "gpu-packing",
    "gpu-clustering",
    "fgd",
    "random",
)

FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(frozen=True, slots=True)
class TypicalPod:
    """One pod shape of the typical pod set and how often it occurs (frequencies sum to 1).

    ``gpu_models`` empty means any model; ``gpu_milli`` is per GPU (0 for CPU-only pods).
    """

    cpu_milli: int
    gpu_milli: int
    gpus: int
    frequency: float
    gpu_models: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Policy:
    """How one cycle decides.

    ``placement`` is one of :data:`PLACEMENT_POLICIES`. ``fair_sharing`` switches queue
    ordering and cohort preemption to Kueue's fair sharing (dominant resource share, with
    ``fair_sharing_strategies`` in order). ``seed`` drives every random choice (the node
    order that breaks score ties, the random policy), so the same snapshot and policy give
    the same decisions. ``max_spec_cpu`` (milli) and ``max_spec_gpus`` normalise bestfit,
    dotprod and gpu-clustering as the FGD simulator does (128 cores, 8 GPUs).
    """

    placement: str = "binpack"
    fair_sharing: bool = False
    seed: int = 0
    typical_pods: tuple[TypicalPod, ...] = ()
    fair_sharing_strategies: tuple[str, ...] = FAIR_SHARING_STRATEGIES
    max_spec_cpu: int = 128_000
    max_spec_gpus: int = 8

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENT_POLICIES:
            raise ValueError(
                f"placement policy {self.placement!r} is unknown; use one of {', '.join(PLACEMENT_POLICIES)}"
            )
        for s in self.fair_sharing_strategies:
            if s not in FAIR_SHARING_STRATEGIES:
                raise ValueError(
                    f"fair sharing strategy {s!r} is unknown; use {' or '.join(FAIR_SHARING_STRATEGIES)}"
                )
        if not self.fair_sharing_strategies:
            raise ValueError("fair_sharing_strategies must name at least one strategy")
