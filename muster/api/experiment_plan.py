"""How an Experiment searches: its algorithm and early-stopping settings read into one
:class:`SearchPlan` (a sampler and a stopping rule with typed options).

Katib writes every setting as a ``{name, value}`` pair of strings and rejects a name its
backend does not know; so does Muster, naming the accepted ones. Algorithm names:

====================  =============================================================
``random``            independent random sampling (``random_state``)
``grid``              every grid point once, in a seeded random order (``random_state``)
``tpe``               Optuna's TPE sampler (``n_startup_trials``, ``n_ei_candidates``,
                      ``gamma``, ``prior_weight``, ``multivariate``, ``constant_liar``,
                      ``random_state``); running trials are "constant liars"
``multivariate-tpe``  ``tpe`` with ``multivariate`` on (Katib's Optuna backend)
``bayesianoptimization``  runs as ``tpe`` (a warning says so); ``n_initial_points`` is
                      its ``n_startup_trials``
``asha``              random sampling with ASHA rungs (``min_resource``,
                      ``max_resource``, ``reduction_factor``, ``brackets``,
                      ``resource_name``, ``random_state``)
``hyperband``         Katib's name: ``r_l`` (max resource), ``eta``, ``resource_name``;
                      runs as asynchronous Hyperband (ASHA brackets)
====================  =============================================================

Early stopping: ``medianstop`` (``min_trials_required``, ``start_step``) and ``asha`` (the
ASHA settings above, over any sampler). Resources are counted in objective reports: a
trial's n-th report of the objective metric is its step n.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from muster.api.errors import FieldError, child_path

__all__ = [
    "ALGORITHMS",
    "EARLY_STOPPING",
    "AshaOptions",
    "MedianOptions",
    "SearchPlan",
    "plan_search",
]

Setting = tuple[str, Callable[[str], Any], Any]  # (rule text, parser raising ValueError, default)


def _int(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = float(text)
        if not value.is_integer() or value < low:
            raise ValueError
        return int(value)

    return parse


def _float(low: float, high: float | None = None, open_low: bool = True) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if math.isnan(value) or value < low or (open_low and value == low):
            raise ValueError
        if high is not None and value >= high:
            raise ValueError
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError
    return text.strip()


_SEED: dict[str, Setting] = {"random_state": ("an integer >= 0", _int(0), None)}
_TPE: dict[str, Setting] = {
    **_SEED,
    "n_startup_trials": ("an integer >= 0", _int(0), 10),
    "n_ei_candidates": ("an integer >= 1", _int(1), 24),
    "gamma": ("a number between 0 and 1", _float(0.0, 1.0), None),
    "prior_weight": ("a number > 0", _float(0.0), None),
    "constant_liar": ("true or false", _bool, True),
}
_ASHA: dict[str, Setting] = {
    **_SEED,
    "min_resource": ("an integer >= 1", _int(1), 1),
    "max_resource": ("an integer >= 1", _int(1), None),
    "reduction_factor": ("an integer >= 2", _int(2), 3),
    "brackets": ("an integer >= 1", _int(1), 1),
    "resource_name": ("a parameter name", _text, None),
}

# algorithm name -> accepted settings
ALGORITHMS: dict[str, dict[str, Setting]] = {
    "random": _SEED,
    "grid": _SEED,
    "tpe": {
        **_TPE,
        "multivariate": ("true or false", _bool, False),
        "n_EI_candidates": ("an integer >= 1", _int(1), None),  # hyperopt's spelling (Katib's tpe)
    },
    "multivariate-tpe": _TPE,
    "bayesianoptimization": {
        **_SEED,
        "n_initial_points": ("an integer >= 0", _int(0), 10),
        "base_estimator": ("a name", _text, None),
        "acq_func": ("a name", _text, None),
        "acq_optimizer": ("a name", _text, None),
    },
    "asha": _ASHA,
    "hyperband": {
        **_SEED,
        "r_l": ("an integer >= 1", _int(1), None),
        "eta": ("an integer >= 2", _int(2), 3),
        "resource_name": ("a parameter name", _text, None),
    },
}
EARLY_STOPPING: dict[str, dict[str, Setting]] = {
    "medianstop": {
        "min_trials_required": ("an integer >= 1", _int(1), 3),
        "start_step": ("an integer >= 1", _int(1), 4),
    },
    "asha": {k: v for k, v in _ASHA.items() if k != "random_state"},
}
# Katib's names that Muster does not run, and what to use instead.
_UNSUPPORTED = {
    "cmaes": "CMA-ES is not offered",
    "sobol": "quasi-random Sobol sampling is not offered",
    "enas": "neural architecture search is not offered",
    "darts": "neural architecture search is not offered",
    "pbt": "population-based training is not offered",
}


@dataclass(frozen=True)
class AshaOptions:
    """Asynchronous successive halving: rung k of bracket s is at step
    ``min_resource * reduction_factor**(s + k)``, below ``max_resource``."""

    min_resource: int
    max_resource: int
    reduction_factor: int
    brackets: int
    resource_name: str | None

    def milestones(self, bracket: int) -> list[int]:
        out = []
        k = 0
        while True:
            step = self.min_resource * self.reduction_factor ** (bracket + k)
            if step >= self.max_resource:
                return out
            out.append(step)
            k += 1


@dataclass(frozen=True)
class MedianOptions:
    min_trials_required: int
    start_step: int


@dataclass
class SearchPlan:
    """The sampler (``random``, ``grid`` or ``tpe``) with its options, and the stopping rule."""

    sampler: str
    seed: int | None = None
    tpe: dict[str, Any] = field(default_factory=dict)
    asha: AshaOptions | None = None
    median: MedianOptions | None = None
    warnings: list[FieldError] = field(default_factory=list)


def plan_search(spec: Mapping[str, Any], parameters: Sequence[str], path: str = "spec") -> SearchPlan:
    """The plan of an Experiment spec (wire form), or InvalidObject-ready errors raised as
    ``ValueError(list[FieldError])`` via :class:`PlanErrors`."""
    errors: list[FieldError] = []
    algorithm = spec.get("algorithm") or {}
    name = str(algorithm.get("algorithmName") or "")
    apath = child_path(path, "algorithm")
    if name in _UNSUPPORTED:
        raise PlanErrors(
            [
                FieldError(
                    child_path(apath, "algorithmName"),
                    f"{_UNSUPPORTED[name]} by Muster",
                    name,
                    f"use one of {', '.join(ALGORITHMS)}",
                )
            ]
        )
    if name not in ALGORITHMS:
        raise PlanErrors(
            [
                FieldError(
                    child_path(apath, "algorithmName"),
                    "unknown algorithm",
                    name,
                    f"use one of {', '.join(ALGORITHMS)}",
                )
            ]
        )
    settings = _settings(algorithm.get("algorithmSettings") or [], ALGORITHMS[name], apath, errors)
    plan = SearchPlan(sampler="random", seed=settings.get("random_state"))
    if name == "grid":
        plan.sampler = "grid"
    elif name in ("tpe", "multivariate-tpe", "bayesianoptimization"):
        plan.sampler = "tpe"
        plan.tpe = _tpe_options(name, settings)
        if name == "bayesianoptimization":
            plan.warnings.append(
                FieldError(
                    child_path(apath, "algorithmName"),
                    "bayesianoptimization runs as Optuna's TPE sampler (Bayesian optimization with a "
                    "tree-structured Parzen estimator); base_estimator, acq_func and acq_optimizer "
                    "are ignored",
                )
            )
    elif name in ("asha", "hyperband"):
        plan.asha = _asha(name, settings, parameters, apath, errors)
        if name == "hyperband":
            plan.warnings.append(
                FieldError(
                    child_path(apath, "algorithmName"),
                    "hyperband runs asynchronously (ASHA brackets): a trial is paused at a rung and a "
                    "promoted one resumes from its checkpoint, instead of Katib's synchronous stages "
                    "that start each stage's trials afresh with resource_name set to the stage's budget",
                )
            )
    stopping = spec.get("earlyStopping")
    if stopping:
        _early_stopping(plan, stopping, parameters, child_path(path, "earlyStopping"), errors)
    if errors:
        raise PlanErrors(errors)
    return plan


class PlanErrors(ValueError):
    """The settings that break a rule, each a FieldError."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


def _early_stopping(
    plan: SearchPlan,
    stopping: Mapping[str, Any],
    parameters: Sequence[str],
    path: str,
    errors: list[FieldError],
) -> None:
    name = str(stopping.get("algorithmName") or "")
    if name not in EARLY_STOPPING:
        errors.append(
            FieldError(
                child_path(path, "algorithmName"),
                "unknown early-stopping algorithm",
                name,
                f"use one of {', '.join(EARLY_STOPPING)}",
            )
        )
        return
    settings = _settings(stopping.get("algorithmSettings") or [], EARLY_STOPPING[name], path, errors)
    if name == "medianstop":
        plan.median = MedianOptions(settings["min_trials_required"], settings["start_step"])
        plan.warnings.append(
            FieldError(
                child_path(path, "algorithmName"),
                "medianstop compares a trial's best value with the median of the completed trials' "
                "running averages at the same step (Katib's service uses their mean)",
            )
        )
        return
    if plan.asha is not None:
        errors.append(
            FieldError(
                child_path(path, "algorithmName"),
                "asha early stopping cannot be combined with an ASHA or Hyperband algorithm",
                hint="set it once: algorithm asha, or another algorithm with earlyStopping asha",
            )
        )
        return
    plan.asha = _asha("asha", settings, parameters, path, errors)


def _settings(
    given: Sequence[Any], accepted: Mapping[str, Setting], path: str, errors: list[FieldError]
) -> dict[str, Any]:
    out = {name: default for name, (_rule, _parse, default) in accepted.items()}
    for i, item in enumerate(given):
        where = child_path(path, "algorithmSettings", i)
        name = str((item or {}).get("name") or "")
        if name not in accepted:
            errors.append(
                FieldError(
                    child_path(where, "name"),
                    "unknown setting",
                    name,
                    f"accepted: {', '.join(accepted) or 'none'}",
                )
            )
            continue
        rule, parse, _default = accepted[name]
        value = (item or {}).get("value")
        try:
            out[name] = parse(str(value))
        except (ValueError, TypeError):
            errors.append(FieldError(child_path(where, "value"), f"{name} must be {rule}", value))
    spelled = out.pop("n_EI_candidates", None)
    if spelled is not None:
        out["n_ei_candidates"] = spelled
    return out


def _tpe_options(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    if name == "bayesianoptimization":
        return {
            "n_startup_trials": settings["n_initial_points"],
            "constant_liar": True,
            "multivariate": False,
        }
    options = {
        "n_startup_trials": settings["n_startup_trials"],
        "n_ei_candidates": settings["n_ei_candidates"],
        "constant_liar": settings["constant_liar"],
        "multivariate": name == "multivariate-tpe" or bool(settings.get("multivariate")),
    }
    if settings.get("gamma") is not None:
        options["gamma"] = settings["gamma"]
    if settings.get("prior_weight") is not None:
        options["prior_weight"] = settings["prior_weight"]
    return options


def _asha(
    name: str, settings: Mapping[str, Any], parameters: Sequence[str], path: str, errors: list[FieldError]
) -> AshaOptions | None:
    where = child_path(path, "algorithmSettings")
    resource = settings.get("resource_name")
    if resource is not None and resource not in parameters:
        errors.append(
            FieldError(
                where,
                f"resource_name {resource!r} names no parameter",
                hint=f"parameters: {', '.join(parameters)}",
            )
        )
    if name == "hyperband":
        top = settings.get("r_l")
        if top is None or resource is None:
            errors.append(
                FieldError(where, "hyperband needs r_l (the max resource) and resource_name", hint="as Katib")
            )
            return None
        eta = settings["eta"]
        brackets = math.floor(math.log(top) / math.log(eta) + 1e-9) + 1
        return AshaOptions(1, top, eta, brackets, resource)
    top = settings.get("max_resource")
    if top is None:
        errors.append(
            FieldError(
                where,
                "asha needs max_resource: the steps (objective reports) of a trial that runs to the end",
            )
        )
        return None
    low = settings["min_resource"]
    if low >= top:
        errors.append(FieldError(where, f"min_resource ({low}) must be below max_resource ({top})"))
        return None
    options = AshaOptions(low, top, settings["reduction_factor"], settings["brackets"], resource)
    if not options.milestones(options.brackets - 1):
        errors.append(
            FieldError(
                where,
                f"with {options.brackets} brackets the last one has no rung below max_resource",
                hint="use fewer brackets or a larger max_resource",
            )
        )
    return options
