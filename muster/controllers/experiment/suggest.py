"""Samplers: the parameter values of the next trial, from the trials so far.

A sampler is a pure function of the experiment's seed, the new trial's index and the trials
already stored (their values, state and objective), so the suggestion state lives in the
store (the Trial objects and the seed in the Experiment's status) and a restarted server
resumes exactly where it stopped:

* ``random``: :func:`muster.controllers.experiment.space.sample` of the index;
* ``grid``: the first point of the seeded grid order that no trial has taken;
* ``tpe``: an Optuna study rebuilt from the trials (ask-and-tell; running trials are
  "constant liars", early-stopped ones pruned with their intermediate values), asked once,
  with a sampler seeded by the seed and the index.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from muster.api.experiment_plan import SearchPlan
from muster.controllers.experiment.space import Parameter, format_value, grid_points, sample

__all__ = ["Observed", "suggest"]

log = logging.getLogger(__name__)

State = Literal["running", "complete", "pruned", "failed"]


@dataclass(frozen=True)
class Observed:
    """A trial as a sampler sees it; ``value`` is the objective, ``curve`` step -> value."""

    params: Mapping[str, str]
    state: State
    value: float | None = None
    curve: Mapping[int, float] = field(default_factory=dict)


def suggest(
    plan: SearchPlan,
    params: Sequence[Parameter],
    seed: int,
    index: int,
    trials: Sequence[Observed],
    direction: Literal["minimize", "maximize"],
) -> dict[str, str] | None:
    """The values of trial ``index``, or None when the space is exhausted (grid)."""
    if plan.sampler == "grid":
        taken = {_key(t.params) for t in trials}
        for point in grid_points(params, seed):
            if _key(point) not in taken:
                return point
        return None
    if plan.sampler == "tpe":
        return _tpe(plan, params, seed, index, trials, direction)
    return sample(params, seed, index)


def _key(params: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(params.items()))


def _tpe(
    plan: SearchPlan,
    params: Sequence[Parameter],
    seed: int,
    index: int,
    trials: Sequence[Observed],
    direction: str,
) -> dict[str, str]:
    try:
        import optuna
    except ImportError as exc:  # the experiments extra is not installed
        raise RuntimeError("the tpe algorithm needs optuna: pip install 'muster[experiments]'") from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {p.name: _distribution(optuna, p) for p in params}
    options: dict[str, Any] = {
        "n_startup_trials": plan.tpe.get("n_startup_trials", 10),
        "n_ei_candidates": plan.tpe.get("n_ei_candidates", 24),
        "multivariate": plan.tpe.get("multivariate", False),
        "constant_liar": plan.tpe.get("constant_liar", True),
        "seed": (seed * 1_000_003 + index) % (2**32),
    }
    if plan.tpe.get("prior_weight") is not None:
        options["prior_weight"] = plan.tpe["prior_weight"]
    if plan.tpe.get("gamma") is not None:
        fraction = float(plan.tpe["gamma"])
        options["gamma"] = lambda n: min(int(-(-fraction * n // 1)), 25)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(**options))
    states = {
        "running": optuna.trial.TrialState.RUNNING,
        "complete": optuna.trial.TrialState.COMPLETE,
        "pruned": optuna.trial.TrialState.PRUNED,
        "failed": optuna.trial.TrialState.FAIL,
    }
    for t in trials:
        values = _native(t.params, params, optuna, dists)
        if values is None:
            continue
        state = t.state
        if state == "complete" and t.value is None:
            state = "failed"
        study.add_trial(
            optuna.trial.create_trial(
                state=states[state],
                value=t.value if state == "complete" else None,
                params=values,
                distributions=dists,
                intermediate_values=dict(t.curve) if state in ("pruned", "running") else None,
            )
        )
    asked = study.ask(fixed_distributions=dists)
    return {p.name: _text(p, asked.params[p.name]) for p in params}


def _distribution(optuna: Any, p: Parameter) -> Any:
    if p.choices:
        return optuna.distributions.CategoricalDistribution(list(p.choices))
    if p.type == "int":
        step = int(p.step or 1)
        if p.log:
            return optuna.distributions.IntDistribution(int(p.low), int(p.high), log=True)
        return optuna.distributions.IntDistribution(int(p.low), int(p.high), step=step)
    if p.log:
        return optuna.distributions.FloatDistribution(p.low, p.high, log=True)
    if p.step:
        # Optuna wants (high - low) to be a multiple of step: the last grid point is the top.
        top = p.low + int((p.high - p.low) / p.step + 1e-9) * p.step
        return optuna.distributions.FloatDistribution(p.low, top, step=p.step)
    return optuna.distributions.FloatDistribution(p.low, p.high)


def _native(
    values: Mapping[str, str], params: Sequence[Parameter], optuna: Any, dists: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A stored trial's values as Optuna's (None when one no longer fits the space, e.g. the
    experiment was edited: that trial is left out of the model)."""
    out: dict[str, Any] = {}
    for p in params:
        text = values.get(p.name)
        if text is None:
            return None
        try:
            value: Any = text if p.choices else (int(float(text)) if p.type == "int" else float(text))
        except ValueError:
            return None
        if not dists[p.name]._contains(dists[p.name].to_internal_repr(value)):
            return None
        out[p.name] = value
    return out


def _text(p: Parameter, value: Any) -> str:
    if p.choices:
        return str(value)
    return format_value(p, float(value))
