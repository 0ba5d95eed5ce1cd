"""The search space: drawing a value of each parameter, the grid, and values as text.

Every draw takes its own ``random.Random``, seeded by the experiment's seed and the trial's
index, so trial *n* of an experiment always gets the same values, whoever asks and however
often (a server that crashed between choosing a trial and storing it chooses it again, the
same). Values are written as Katib writes them: strings; a double as the shortest text that
reads back as the same number (after rounding to its step, if it has one).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Parameter", "format_value", "grid_points", "parameters_of", "sample"]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Parameter:
    """One parameter of the space, parsed."""

    name: str
    type: str  # double, int, discrete, categorical
    low: float = 0.0
    high: float = 0.0
    step: float | None = None
    choices: tuple[str, ...] = ()
    distribution: str = "uniform"

    @property
    def log(self) -> bool:
        return self.distribution in ("logUniform", "logNormal")

    def grid(self) -> list[str]:
        """Every value on the grid, in order."""
        if self.choices:
            return list(self.choices)
        step = self.step if self.step else 1.0
        n = math.floor((self.high - self.low) / step + 1e-9) + 1
        return [format_value(self, self.low + i * step) for i in range(n)]


def parameters_of(spec: Obj) -> list[Parameter]:
    """The parsed parameters of an Experiment spec (wire form, already validated)."""
    out = []
    for p in spec["parameters"]:
        space = p.get("feasibleSpace") or {}
        kind = p["parameterType"]
        if kind in ("discrete", "categorical"):
            out.append(Parameter(p["name"], kind, choices=tuple(str(v) for v in space.get("list") or [])))
            continue
        step = float(space["step"]) if space.get("step") not in (None, "") else None
        if kind == "int" and step is None:
            step = 1.0
        out.append(
            Parameter(
                p["name"],
                kind,
                low=float(space["min"]),
                high=float(space["max"]),
                step=step,
                distribution=space.get("distribution") or "uniform",
            )
        )
    return out


def sample(params: Sequence[Parameter], seed: int, index: int) -> dict[str, str]:
    """Trial ``index``'s random values (the same for the same seed and index)."""
    rng = random.Random(f"{seed}:{index}")
    return {p.name: _draw(p, rng) for p in params}


def grid_points(params: Sequence[Parameter], seed: int) -> list[dict[str, str]]:
    """Every point of the grid, in a seeded random order (as Optuna's GridSampler visits it), so
    that stopping early still covers the space evenly."""
    axes = [p.grid() for p in params]
    points = [dict(zip((p.name for p in params), combo, strict=True)) for combo in itertools.product(*axes)]
    random.Random(f"grid:{seed}").shuffle(points)
    return points


def format_value(p: Parameter, value: float) -> str:
    """``value`` of ``p`` as text: an int as digits, a double rounded to its step's precision."""
    if p.type == "int":
        return str(round(value))
    if p.step:
        decimals = max(0, -math.floor(math.log10(p.step)) + 6)
        value = round(value, decimals)
    return repr(float(f"{value:.10g}"))


def _draw(p: Parameter, rng: random.Random) -> str:
    if p.choices:
        return rng.choice(p.choices)
    low, high = p.low, p.high
    if p.distribution == "uniform":
        value = rng.uniform(low, high)
    elif p.distribution == "logUniform":
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    elif p.distribution == "normal":
        # Katib's: mean at the middle, the range +-3 sigma; clipped into it.
        value = rng.gauss((low + high) / 2, (high - low) / 6)
    else:
        lo, hi = math.log(low), math.log(high)
        value = math.exp(rng.gauss((lo + hi) / 2, (hi - lo) / 6))
    value = min(max(value, low), high)
    if p.step:
        value = low + round((value - low) / p.step) * p.step
        if value > high + 1e-12:
            value -= p.step
    return format_value(p, value)
