"""Samplers: the parameter values of the next trial, from the trials so far.

A sampler is a pure function of the experiment's seed, the new trial's index and the trials
already stored (their values, state and objective), so the suggestion state lives in the
store (the Trial objects and the seed in the Experiment's status) and a restarted server
resumes exactly where it stopped:

* ``random``: :func:`muster.controllers.experiment.space.sample` of the index;
* ``grid``: the first point of the seeded grid order that no trial has taken;
* ``tpe``: an Optuna study built from the trials (ask-and-tell; running trials are
  "constant liars", early-stopped ones pruned with their intermediate values), asked once,
  with a sampler seeded by the seed and the index. The study is kept in a :class:`TpeMemory`
  between asks and brought up to date with the trials (new ones added, finished ones told),
  so an ask costs what changed, not the whole history (a paused trial that is promoted stays
  a pruned one in the model until it ends, then its outcome is added); after a restart the
  study is rebuilt from the trials, so suggestions after a restart may differ from those the
  old server would have made, but no trial is lost or chosen twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from muster.api.experiment_plan import SearchPlan
from muster.controllers.experiment.space import Parameter, format_value, grid_points, sample

__all__ = ["Observed", "TpeMemory", "suggest"]

log = logging.getLogger(__name__)

State = Literal["running", "complete", "pruned", "failed"]


@dataclass(frozen=True)
class Observed:
    """A trial as a sampler sees it; ``value`` is the objective, ``curve`` step -> value."""

    params: Mapping[str, str]
    state: State
    value: float | None = None
    curve: Mapping[int, float] = field(default_factory=dict)
    index: int = -1  # the trial's index (-1: unknown, never remembered)


@dataclass
class TpeMemory:
    """An Optuna study in step with an experiment's trials (see the module docstring)."""

    study: Any = None
    key: Any = None  # what the study was built for: direction and distributions
    known: dict[int, tuple[int, str]] = field(default_factory=dict)  # trial index -> (trial id, state)
    added: int = 0  # trials in the study (their numbers are 0..added-1)


def suggest(
    plan: SearchPlan,
    params: Sequence[Parameter],
    seed: int,
    index: int,
    trials: Sequence[Observed],
    direction: Literal["minimize", "maximize"],
    memory: TpeMemory | None = None,
) -> dict[str, str] | None:
    """The values of trial ``index``, or None when the space is exhausted (grid)."""
    if plan.sampler == "grid":
        taken = {_key(t.params) for t in trials}
        for point in grid_points(params, seed):
            if _key(point) not in taken:
                return point
        return None
    if plan.sampler == "tpe":
        return _tpe(plan, params, seed, index, trials, direction, memory or TpeMemory())
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
    memory: TpeMemory,
) -> dict[str, str]:
    try:
        import optuna
    except ImportError as exc:  # the experiments extra is not installed
        raise RuntimeError("the tpe algorithm needs optuna: pip install 'muster[experiments]'") from exc
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {p.name: _distribution(optuna, p) for p in params}
    key = (direction, tuple(sorted((k, repr(v)) for k, v in dists.items())))
    if memory.study is None or memory.key != key or not _sync(optuna, memory, trials, dists):
        _rebuild(optuna, memory, key, direction, trials, dists)
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
    memory.study.sampler = optuna.samplers.TPESampler(**options)
    asked = memory.study.ask(fixed_distributions=dists)
    memory.added += 1
    memory.known[index] = (asked._trial_id, "running")
    return {p.name: _text(p, asked.params[p.name]) for p in params}


_STATES = ("running", "complete", "pruned", "failed")


def _rebuild(
    optuna: Any, memory: TpeMemory, key: Any, direction: str, trials: Sequence[Observed], dists: dict
) -> None:
    memory.study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler())
    memory.key, memory.known, memory.added = key, {}, 0
    for t in trials:
        _add(optuna, memory, t, dists)


def _sync(optuna: Any, memory: TpeMemory, trials: Sequence[Observed], dists: dict) -> bool:
    """Bring the study up to date with ``trials``; False when it cannot be (rebuild it)."""
    storage = memory.study._storage
    finished = {
        "complete": optuna.trial.TrialState.COMPLETE,
        "pruned": optuna.trial.TrialState.PRUNED,
        "failed": optuna.trial.TrialState.FAIL,
    }
    for t in trials:
        state = _state(t)
        entry = memory.known.get(t.index) if t.index >= 0 else None
        if entry is None:
            _add(optuna, memory, t, dists)
            continue
        trial_id, was = entry
        if was == state:
            continue
        if was == "pruned" and state == "running":
            continue  # promoted (ASHA): it stays a pruned trial in the model until it ends
        if was == "pruned":
            _add(optuna, memory, t, dists)  # a promoted trial ended: its outcome joins the model
            continue
        if was != "running":
            return False  # the trials do not fit the study (edited by hand?): rebuild it
        if state == "pruned":
            for step, value in sorted(t.curve.items()):
                storage.set_trial_intermediate_value(trial_id, step, value)
        storage.set_trial_state_values(trial_id, finished[state], [t.value] if state == "complete" else None)
        memory.known[t.index] = (trial_id, state)
    return True


def _add(optuna: Any, memory: TpeMemory, t: Observed, dists: dict) -> None:
    values = _native(optuna, t.params, dists)
    if values is None:
        return
    state = _state(t)
    states = {
        "running": optuna.trial.TrialState.RUNNING,
        "complete": optuna.trial.TrialState.COMPLETE,
        "pruned": optuna.trial.TrialState.PRUNED,
        "failed": optuna.trial.TrialState.FAIL,
    }
    memory.study.add_trial(
        optuna.trial.create_trial(
            state=states[state],
            value=t.value if state == "complete" else None,
            params=values,
            distributions=dists,
            intermediate_values=dict(t.curve) if state in ("pruned", "running") else None,
        )
    )
    trial_id = memory.study._storage.get_trial_id_from_study_id_trial_number(
        memory.study._study_id, memory.added
    )
    memory.added += 1
    if t.index >= 0:
        memory.known[t.index] = (trial_id, state)


def _state(t: Observed) -> str:
    return "failed" if t.state == "complete" and t.value is None else t.state


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


def _native(optuna: Any, values: Mapping[str, str], dists: Mapping[str, Any]) -> dict[str, Any] | None:
    """A stored trial's values as Optuna's (None when one no longer fits the space, e.g. the
    experiment was edited: that trial is left out of the model)."""
    out: dict[str, Any] = {}
    for name, dist in dists.items():
        text = values.get(name)
        if text is None:
            return None
        try:
            if isinstance(dist, optuna.distributions.CategoricalDistribution):
                value: Any = text
            elif isinstance(dist, optuna.distributions.IntDistribution):
                value = int(float(text))
            else:
                value = float(text)
            if not dist._contains(dist.to_internal_repr(value)):
                return None
        except (ValueError, TypeError):
            return None
        out[name] = value
    return out


def _text(p: Parameter, value: Any) -> str:
    if p.choices:
        return str(value)
    return format_value(p, float(value))
