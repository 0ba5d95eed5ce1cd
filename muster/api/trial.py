"""Trial and TrialMetrics: what the Experiment controller records about each trial.

A **Trial** is one point of the search: its parameter values are written to the store (the
sampler's decision) before its TrainingJob, of the same name, is created, so a server that
restarts finds every trial it chose and repeats none. Its status follows the job and holds
the summary of what the trial reported (per metric: min, max, latest), the ASHA rungs it
reached and what was decided there, and the GPU-seconds its pods held.

**TrialMetrics** objects hold a trial's time series: one object per segment of at most
:data:`SEGMENT_POINTS` points (every metric's step, value and time), the last one appended to
until it is full. A series is a handful of objects, never one per point, and each write
rewrites one bounded segment; beyond :data:`THIN_AFTER` reports of a metric only every 2nd,
then 4th, ... report is kept (the summary still counts every one).
"""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from pydantic import Field

from muster.api.base import MusterModel, Object

__all__ = [
    "SEGMENT_POINTS",
    "THIN_AFTER",
    "TRIAL_PHASES",
    "ParameterAssignment",
    "Series",
    "Trial",
    "TrialMetric",
    "TrialMetrics",
    "TrialSpec",
    "TrialStatus",
]

TrialPhaseName = Literal[
    "Pending", "Running", "Stopping", "EarlyStopped", "Succeeded", "Failed", "MetricsUnavailable", "Killed"
]
TRIAL_PHASES: tuple[str, ...] = get_args(TrialPhaseName)
SEGMENT_POINTS = 1000
THIN_AFTER = 5000


class ParameterAssignment(MusterModel):
    name: str = Field(description="Parameter name.")
    value: str = Field(description="The value this trial runs with (as a string, as Katib writes it).")


class TrialMetric(MusterModel):
    name: str = Field(description="Metric name.")
    min: float | None = Field(default=None, description="Lowest value reported.")
    max: float | None = Field(default=None, description="Highest value reported.")
    latest: float | None = Field(default=None, description="Last value reported.")
    reports: int = Field(default=0, ge=0, description="Values reported.")


class RungRecord(MusterModel):
    rung: int = Field(ge=0, description="Rung index within the trial's bracket.")
    step: int = Field(ge=1, description="The objective report the rung is at.")
    value: float = Field(description="The trial's objective value at that step.")
    decision: Literal["Continued", "Paused", "Promoted"] = Field(
        description="Continued (in the top 1/eta when it got there), Paused, or Promoted later."
    )
    time: str | None = Field(default=None, description="When it was decided (UTC).")
    checkpoint: str | None = Field(
        default=None, description="For a promotion: the newest file in its checkpoint directory then."
    )


class TrialSpec(MusterModel):
    experiment: str = Field(description="The Experiment (same namespace).")
    index: int = Field(ge=0, description="Its number in the experiment, from 0.")
    parameter_assignments: list[ParameterAssignment] = Field(description="The values it runs with.")
    bracket: int | None = Field(
        default=None, ge=0, description="Its ASHA bracket, when the search has rungs."
    )


class TrialStatus(MusterModel):
    phase: Literal[
        "Pending",
        "Running",
        "Stopping",
        "EarlyStopped",
        "Succeeded",
        "Failed",
        "MetricsUnavailable",
        "Killed",
    ] = Field(default="Pending", description="Where the trial is.")
    reason: str = Field(default="", description="Machine-readable reason of the phase.")
    message: str = Field(default="", description="Human-readable detail.")
    start_time: str | None = Field(default=None, description="When its job first ran.")
    completion_time: str | None = Field(default=None, description="When it reached a final phase.")
    objective_value: float | None = Field(
        default=None, description="Its objective value (per metricStrategies)."
    )
    observation: list[TrialMetric] = Field(default_factory=list, description="Per metric: min, max, latest.")
    rungs: list[RungRecord] = Field(default_factory=list, description="ASHA rungs reached and decisions.")
    gpu_seconds: float = Field(default=0.0, ge=0, description="GPU-seconds its pods held (finished runs).")
    open_runs: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="Pods holding GPUs now, by uid: start (epoch seconds) and GPUs."
    )


class Trial(Object):
    """One point of an Experiment's search and the TrainingJob that evaluates it."""

    KIND: ClassVar[str] = "Trial"
    kind: Literal["Trial"] = Field(default="Trial", description="Always Trial.")
    spec: TrialSpec = Field(description="Its experiment and parameter values.")
    status: TrialStatus | None = Field(default=None, description="Phase, metrics, rungs.")


class Series(MusterModel):
    steps: list[int] = Field(default_factory=list, description="Report numbers (1 = the first report).")
    values: list[float] = Field(default_factory=list, description="Reported values.")
    times: list[float] = Field(default_factory=list, description="When each was read (epoch seconds).")


class TrialMetricsSpec(MusterModel):
    trial: str = Field(description="The Trial (same namespace).")
    segment: int = Field(ge=0, description="Segment number, from 0.")
    series: dict[str, Series] = Field(default_factory=dict, description="Per metric, this segment's points.")
    cursors: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="How far each source (stdout, file) was read when this segment was written.",
    )
    reports: dict[str, int] = Field(
        default_factory=dict, description="Per metric, the reports counted up to this segment's end."
    )


class TrialMetrics(Object):
    """A segment of a trial's metric time series."""

    KIND: ClassVar[str] = "TrialMetrics"
    kind: Literal["TrialMetrics"] = Field(default="TrialMetrics", description="Always TrialMetrics.")
    spec: TrialMetricsSpec = Field(description="The points.")
