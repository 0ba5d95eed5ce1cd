"""Experiment: hyperparameter search whose trials are ordinary TrainingJobs in the queues.

The spec is Katib's ``kubeflow.org/v1beta1`` Experiment spec,
so a Katib manifest converts field for field (:mod:`muster.api.compat.katib`); numbers may be
written as numbers or as Katib's strings. Muster adds ``queueName`` and ``priorityClassName``
(every trial's job carries them), the ``asha`` algorithm and early-stopping rule, and a
``trainingJob`` or pod ``template`` as the trial template. The controller
(:mod:`muster.controllers.experiment`) owns ``status``; the trials are :class:`~muster.api.trial.Trial`
objects.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from muster.api.base import Condition, MusterModel, Object
from muster.api.checks import duplicate_errors
from muster.api.common import ObjectName
from muster.api.errors import FieldError, child_path
from muster.api.experiment_plan import PlanErrors, plan_search
from muster.api.experiment_template import template_errors
from muster.api.trial import ParameterAssignment, TrialMetric

__all__ = [
    "EXPERIMENT_CONDITIONS",
    "METRIC_NAME",
    "AlgorithmSetting",
    "AlgorithmSpec",
    "Experiment",
    "ExperimentSpec",
    "ExperimentStatus",
    "FeasibleSpace",
    "ObjectiveSpec",
    "OptimalTrial",
    "ParameterSpec",
    "TrialTemplate",
]

EXPERIMENT_CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed")
METRIC_NAME = re.compile(r"^[\w|-]+$")  # what Katib's StdOut collector can parse
_MAX_NAME = 50  # trials are <experiment>-<n>; their pods <trial>-worker-<i> stay DNS labels


def _text(value: object) -> object:
    # Katib writes every number as a string; YAML users write numbers. Stored as Katib's strings.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return value


Text = Annotated[str, BeforeValidator(_text)]


class MetricStrategy(MusterModel):
    name: str = Field(description="A metric of the objective (objectiveMetricName or an additional one).")
    value: Literal["min", "max", "latest"] = Field(
        description="Which reported value counts: min, max or latest."
    )


class ObjectiveSpec(MusterModel):
    type: Literal["minimize", "maximize"] = Field(description="Whether lower or higher is better.")
    goal: float | None = Field(
        default=None, description="The experiment succeeds once a trial that succeeded reaches this value."
    )
    objective_metric_name: str = Field(description="The metric to optimise, as the trials report it.")
    additional_metric_names: list[str] = Field(
        default_factory=list, description="Other metrics to record (not the objective)."
    )
    metric_strategies: list[MetricStrategy] = Field(
        default_factory=list,
        description="Per metric, which reported value is the trial's: min, max or latest "
        "(default min when minimizing, max when maximizing).",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        names = [self.objective_metric_name, *self.additional_metric_names]
        for i, name in enumerate(names):
            where = (
                child_path(path, "objectiveMetricName")
                if i == 0
                else child_path(path, "additionalMetricNames", i - 1)
            )
            if not METRIC_NAME.match(name):
                errors.append(
                    FieldError(
                        where, "must be letters, digits, '_', '-' or '|' (a name=value line's name)", name
                    )
                )
        if self.objective_metric_name in self.additional_metric_names:
            errors.append(
                FieldError(
                    child_path(path, "additionalMetricNames"),
                    "must not contain the objective metric",
                    self.objective_metric_name,
                )
            )
        for i, strategy in enumerate(self.metric_strategies):
            if strategy.name not in names:
                errors.append(
                    FieldError(
                        child_path(path, "metricStrategies", i, "name"),
                        "names no metric of the objective",
                        strategy.name,
                        f"metrics: {', '.join(names)}",
                    )
                )
        return errors

    def strategy(self, metric: str) -> str:
        """The strategy of ``metric`` (Katib's defaulting: by the objective's type)."""
        for s in self.metric_strategies:
            if s.name == metric:
                return s.value
        return "min" if self.type == "minimize" else "max"


class AlgorithmSetting(MusterModel):
    name: str = Field(description="Setting name (muster.api.experiment_plan lists them per algorithm).")
    value: Text = Field(description="Setting value (a string, as Katib writes it).")


class AlgorithmSpec(MusterModel):
    algorithm_name: str = Field(
        description="random, grid, tpe, multivariate-tpe, bayesianoptimization (runs as tpe), asha "
        "or hyperband."
    )
    algorithm_settings: list[AlgorithmSetting] = Field(
        default_factory=list, description="Settings of the algorithm as name/value pairs."
    )


class EarlyStoppingSpec(MusterModel):
    algorithm_name: str = Field(description="medianstop or asha.")
    algorithm_settings: list[AlgorithmSetting] = Field(
        default_factory=list, description="Settings of the rule as name/value pairs."
    )


class FeasibleSpace(MusterModel):
    min: Text | None = Field(default=None, description="Lowest value (double and int).")
    max: Text | None = Field(default=None, description="Highest value (double and int).")
    step: Text | None = Field(default=None, description="Grid spacing (required for double under grid).")
    items: list[Text] = Field(
        default_factory=list, alias="list", description="The values of a categorical or discrete parameter."
    )
    distribution: Literal["uniform", "logUniform", "normal", "logNormal"] | None = Field(
        default=None, description="How random and TPE sampling draw a double or int (default uniform)."
    )


class ParameterSpec(MusterModel):
    name: str = Field(description="Parameter name (referenced by trialParameters).")
    parameter_type: Literal["double", "int", "discrete", "categorical"] = Field(description="Kind of values.")
    feasible_space: FeasibleSpace = Field(description="The values it may take.")

    def field_rules(self, path: str) -> list[FieldError]:
        space, where = self.feasible_space, child_path(path, "feasibleSpace")
        if self.parameter_type in ("discrete", "categorical"):
            errors = [
                FieldError(child_path(where, key), f"must not be set for a {self.parameter_type} parameter")
                for key in ("min", "max", "step")
                if getattr(space, key) is not None
            ]
            if not space.items:
                errors.append(FieldError(child_path(where, "list"), "must list at least one value"))
            if self.parameter_type == "discrete":
                errors += [
                    FieldError(child_path(where, "list", i), "must be a number", v)
                    for i, v in enumerate(space.items)
                    if _number(v) is None
                ]
            errors += [
                FieldError(child_path(where, "list", i), "duplicate value", v)
                for i, v in enumerate(space.items)
                if v in space.items[:i]
            ]
            return errors
        errors = []
        if space.items:
            errors.append(
                FieldError(
                    child_path(where, "list"), f"must not be set for a {self.parameter_type} parameter"
                )
            )
        parse = _integer if self.parameter_type == "int" else _number
        bounds = {}
        for key in ("min", "max", "step"):
            text = getattr(space, key)
            if text is None:
                if key != "step":
                    errors.append(FieldError(child_path(where, key), "required field is missing"))
                continue
            value = parse(text)
            if value is None:
                kind = "an integer" if self.parameter_type == "int" else "a finite number"
                errors.append(FieldError(child_path(where, key), f"must be {kind}", text))
            else:
                bounds[key] = value
        if "min" in bounds and "max" in bounds and bounds["min"] > bounds["max"]:
            errors.append(FieldError(child_path(where, "min"), f"must be <= max ({space.max})", space.min))
        if bounds.get("step", 1) <= 0:
            errors.append(FieldError(child_path(where, "step"), "must be > 0", space.step))
        if space.distribution in ("logUniform", "logNormal") and bounds.get("min", 1) <= 0:
            errors.append(
                FieldError(
                    child_path(where, "min"),
                    f"must be > 0 for a {space.distribution} distribution",
                    space.min,
                )
            )
        return errors


class TrialParameterSpec(MusterModel):
    name: str = Field(description="The placeholder name: ${trialParameters.<name>} in the template.")
    description: str | None = Field(default=None, description="What it means, for people.")
    reference: str = Field(description="The parameter it takes its value from, or ${trialSpec.Name} etc.")


class TrialTemplate(MusterModel):
    primary_container_name: str | None = Field(
        default=None,
        description="The container of rank 0's pod whose output holds the metrics (default: its first).",
    )
    trial_parameters: list[TrialParameterSpec] = Field(
        default_factory=list, description="Placeholders and the values they take."
    )
    training_job: dict[str, Any] | None = Field(
        default=None, description="A TrainingJob spec (with placeholders) that each trial runs."
    )
    template: dict[str, Any] | None = Field(
        default=None,
        description="A pod template (with placeholders); each trial runs it as a one-pod TrainingJob.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = duplicate_errors(
            [p.name for p in self.trial_parameters], child_path(path, "trialParameters"), "name"
        )
        if (self.training_job is None) == (self.template is None):
            errors.append(FieldError(path, "must set exactly one of trainingJob and template"))
        return errors


class CollectorSpec(MusterModel):
    kind: Literal["StdOut", "File", "None"] = Field(
        default="StdOut",
        description="StdOut: name=value lines of the primary container's output; File: the trial writes "
        "them to $MUSTER_METRICS_FILE; None: collect nothing.",
    )


class FileSystemPath(MusterModel):
    path: str | None = Field(default=None, description="Katib's file path; Muster uses $MUSTER_METRICS_FILE.")
    kind: Literal["File", "Directory"] = Field(
        default="File", description="File (Directory is TensorFlow's)."
    )
    format: Literal["TEXT", "JSON"] = Field(
        default="TEXT", description="TEXT: name=value lines; JSON: one object per line."
    )


class FilterSpec(MusterModel):
    metrics_format: list[str] = Field(
        default_factory=list,
        description="Regular expressions with two groups (name, value) replacing the default.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        for i, text in enumerate(self.metrics_format):
            try:
                groups = re.compile(text).groups
            except re.error as exc:
                errors.append(
                    FieldError(
                        child_path(path, "metricsFormat", i), f"is not a regular expression: {exc}", text
                    )
                )
                continue
            if groups < 2:
                errors.append(
                    FieldError(
                        child_path(path, "metricsFormat", i), "needs two groups: the name and the value", text
                    )
                )
        return errors


class SourceSpec(MusterModel):
    file_system_path: FileSystemPath | None = Field(default=None, description="For the File collector.")
    filter: FilterSpec | None = Field(default=None, description="How lines are parsed.")


class MetricsCollectorSpec(MusterModel):
    collector: CollectorSpec = Field(default_factory=CollectorSpec, description="Where metrics come from.")
    source: SourceSpec | None = Field(default=None, description="The file and the parsing rules.")


class ExperimentSpec(MusterModel):
    objective: ObjectiveSpec = Field(description="The metric and its direction.")
    algorithm: AlgorithmSpec = Field(description="How parameters are chosen.")
    early_stopping: EarlyStoppingSpec | None = Field(default=None, description="Stop poor trials early.")
    parameters: list[ParameterSpec] = Field(min_length=1, description="The search space.")
    trial_template: TrialTemplate = Field(description="What each trial runs.")
    parallel_trial_count: int = Field(default=3, ge=1, description="Trials waiting or running at once.")
    max_trial_count: int | None = Field(
        default=None, ge=1, description="Trials in all (grid: the grid size)."
    )
    max_failed_trial_count: int | None = Field(
        default=None, ge=0, description="The experiment fails once more trials than this failed."
    )
    metrics_collector_spec: MetricsCollectorSpec = Field(
        default_factory=MetricsCollectorSpec, description="Where trial metrics come from."
    )
    resume_policy: Literal["Never", "LongRunning", "FromVolume"] = Field(
        default="Never",
        description="Katib's; Muster always resumes after a server restart, and an experiment that "
        "ended at maxTrialCount runs on when maxTrialCount is raised, whatever the policy.",
    )
    queue_name: ObjectName | None = Field(default=None, description="LocalQueue of every trial's job.")
    priority_class_name: ObjectName | None = Field(
        default=None, description="PriorityClass of every trial's job."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        names = [p.name for p in self.parameters]
        errors = duplicate_errors(names, child_path(path, "parameters"), "name", "duplicate parameter name")
        if self.max_trial_count is not None and self.parallel_trial_count > self.max_trial_count:
            errors.append(
                FieldError(
                    child_path(path, "parallelTrialCount"),
                    f"must be <= maxTrialCount ({self.max_trial_count})",
                    self.parallel_trial_count,
                )
            )
        if (
            self.max_trial_count is not None
            and self.max_failed_trial_count is not None
            and self.max_failed_trial_count > self.max_trial_count
        ):
            errors.append(
                FieldError(
                    child_path(path, "maxFailedTrialCount"),
                    f"must be <= maxTrialCount ({self.max_trial_count})",
                    self.max_failed_trial_count,
                )
            )
        wire = self.to_dict()
        try:
            plan_search(wire, names, path)
        except PlanErrors as exc:
            errors.extend(exc.errors)
        if self.algorithm.algorithm_name == "grid":
            errors.extend(self._grid_rules(path))
        errors.extend(template_errors(wire, path))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        out: list[FieldError] = []
        try:
            out += plan_search(self.to_dict(), [p.name for p in self.parameters], path).warnings
        except PlanErrors:
            pass
        source = self.metrics_collector_spec.source
        if source is not None and source.file_system_path is not None and source.file_system_path.path:
            out.append(
                FieldError(
                    child_path(path, "metricsCollectorSpec", "source", "fileSystemPath", "path"),
                    "not honoured: trials share this machine's file system, so each trial writes its metrics "
                    "to its own file, named by $MUSTER_METRICS_FILE",
                )
            )
        if self.algorithm.algorithm_name in ("tpe", "multivariate-tpe", "bayesianoptimization"):
            for i, p in enumerate(self.parameters):
                if p.feasible_space.distribution in ("normal", "logNormal"):
                    out.append(
                        FieldError(
                            child_path(path, "parameters", i, "feasibleSpace", "distribution"),
                            f"TPE samples a {p.feasible_space.distribution} parameter as "
                            f"{'uniform' if p.feasible_space.distribution == 'normal' else 'logUniform'}",
                        )
                    )
        return out

    def _grid_rules(self, path: str) -> list[FieldError]:
        errors = []
        size = 1
        for i, p in enumerate(self.parameters):
            space = p.feasible_space
            if p.parameter_type == "double" and space.step is None:
                errors.append(
                    FieldError(
                        child_path(path, "parameters", i, "feasibleSpace", "step"),
                        "is required for a double parameter under grid search",
                    )
                )
                continue
            size *= grid_size(p)
        if not errors and self.max_trial_count is not None and self.max_trial_count > size:
            errors.append(
                FieldError(
                    child_path(path, "maxTrialCount"),
                    f"must be <= the number of grid points ({size})",
                    self.max_trial_count,
                    "leave it unset to run the whole grid",
                )
            )
        return errors


def grid_size(p: ParameterSpec) -> int:
    """How many values parameter ``p`` takes on the grid (0 when its space is not valid)."""
    space = p.feasible_space
    if p.parameter_type in ("discrete", "categorical"):
        return len(space.items)
    low, high = _number(space.min or ""), _number(space.max or "")
    step = _number(space.step or "1")
    if low is None or high is None or not step or step <= 0:
        return 0
    return math.floor((high - low) / step + 1e-9) + 1


class OptimalTrial(MusterModel):
    best_trial_name: str = Field(default="", description="The trial with the best objective value so far.")
    parameter_assignments: list[ParameterAssignment] = Field(
        default_factory=list, description="Its parameters."
    )
    objective_value: float | None = Field(
        default=None, description="Its objective value (per metricStrategies)."
    )
    observation: list[TrialMetric] = Field(default_factory=list, description="Its metrics: min, max, latest.")


class SuggestionState(MusterModel):
    seed: int = Field(description="The seed every sampler draws from (random_state, else chosen at start).")
    exhausted: bool = Field(default=False, description="The grid has no point left.")


class ExperimentStatus(MusterModel):
    conditions: list[Condition] = Field(
        default_factory=list, description="Created, Running, Succeeded, Failed."
    )
    start_time: str | None = Field(default=None, description="When the controller first saw it.")
    completion_time: str | None = Field(default=None, description="When it succeeded or failed.")
    trials: int = Field(default=0, description="Trials created.")
    trials_pending: int = Field(default=0, description="Trials waiting in their queue.")
    trials_running: int = Field(default=0, description="Trials running (or being stopped).")
    trials_succeeded: int = Field(default=0, description="Trials that finished with an objective value.")
    trials_failed: int = Field(default=0, description="Trials whose job failed.")
    trials_killed: int = Field(default=0, description="Trials stopped because the experiment ended.")
    trials_early_stopped: int = Field(
        default=0, description="Trials stopped early (median rule or an ASHA rung)."
    )
    trial_metrics_unavailable: int = Field(
        default=0, description="Trials that succeeded without reporting the objective (counted as failed)."
    )
    gpu_seconds: float = Field(default=0.0, description="GPU-seconds the trials' pods have held so far.")
    current_optimal_trial: OptimalTrial | None = Field(default=None, description="The best trial so far.")
    suggestion: SuggestionState | None = Field(default=None, description="The sampler's stored state.")


class Experiment(Object):
    """Hyperparameter search: trials are TrainingJobs admitted by the queues."""

    KIND: ClassVar[str] = "Experiment"
    kind: Literal["Experiment"] = Field(default="Experiment", description="Always Experiment.")
    spec: ExperimentSpec = Field(description="Objective, search space, algorithm and trial template.")
    status: ExperimentStatus | None = Field(default=None, description="Trials, the best one, conditions.")

    def field_rules(self, path: str) -> list[FieldError]:
        if len(self.metadata.name) > _MAX_NAME:
            return [
                FieldError(
                    child_path(path, "metadata", "name"),
                    f"must be at most {_MAX_NAME} characters "
                    "(its trials' pods are named <name>-<n>-worker-0)",
                    self.metadata.name,
                )
            ]
        return []


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _integer(text: str) -> float | None:
    value = _number(text)
    return value if value is not None and value.is_integer() else None
