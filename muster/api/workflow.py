"""Workflow: a DAG of tasks (DESIGN §8) with Argo's data-passing and retry semantics.

Each task is a pod template or an embedded TrainingJob spec. Tasks pass small string
parameters (``{{tasks.<task>.outputs.parameters.<name>}}``) and artifacts (files under
``MUSTER_OUTPUTS_DIR``); ``when`` skips a task, ``withItems``/``withParam`` fan it out over
``{{item}}``; ``retryStrategy`` and ``cache`` follow Argo (reference/workloads.md §4).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema

from muster.api.base import Condition, MusterModel, Object
from muster.api.checks import duplicate_errors
from muster.api.common import DNSLabel, ObjectName
from muster.api.errors import FieldError, child_path
from muster.api.podspec import PodTemplateSpec
from muster.api.trainingjob import TrainingJobSpec, template_warnings
from muster.api.workflow_refs import reference_rules

__all__ = [
    "TASK_PHASES",
    "Artifact",
    "ArtifactInput",
    "Backoff",
    "Duration",
    "Inputs",
    "Outputs",
    "Parameter",
    "RetryStrategy",
    "TaskCache",
    "TaskNode",
    "Workflow",
    "WorkflowSpec",
    "WorkflowStatus",
    "WorkflowTask",
    "order",
    "parse_duration",
]

TASK_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Skipped", "Cached", "Omitted", "Error")

_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(value: object) -> object:
    # Argo accepts seconds as a number or a string of digits; Go durations otherwise.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return f"{value}s"
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return f"{value}s"
    if isinstance(value, str) and _DURATION.fullmatch(value):
        return value
    raise ValueError(f"{value!r} is not a duration: use seconds (30) or a duration such as 90s, 5m, 1h30m")


Duration = Annotated[
    str,
    BeforeValidator(_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"},
                {"type": "integer", "minimum": 0},
            ]
        }
    ),
]


def parse_duration(text: str) -> float:
    """Seconds in a validated duration (``"1h30m"`` -> 5400.0)."""
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


class Parameter(MusterModel):
    name: str = Field(min_length=1, description="Parameter name.")
    value: str | None = Field(default=None, description="Value; may reference other parameters with {{...}}.")


class ArtifactInput(MusterModel):
    name: str = Field(min_length=1, description="Appears at MUSTER_INPUTS_DIR/<name>.")
    from_: str = Field(alias="from", description="Source: {{tasks.<task>.outputs.artifacts.<name>}}.")


class Inputs(MusterModel):
    parameters: list[Parameter] = Field(default_factory=list, description="Input parameters.")
    artifacts: list[ArtifactInput] = Field(default_factory=list, description="Input artifacts.")


class ValueFrom(MusterModel):
    path: str = Field(min_length=1, description="File (relative to MUSTER_OUTPUTS_DIR) holding the value.")


class OutputParameter(MusterModel):
    name: str = Field(min_length=1, description="Parameter name.")
    value_from: ValueFrom = Field(description="Where the task writes the value.")


class Artifact(MusterModel):
    name: str = Field(min_length=1, description="Artifact name.")
    path: str = Field(min_length=1, description="File or directory under MUSTER_OUTPUTS_DIR.")


class Outputs(MusterModel):
    parameters: list[OutputParameter] = Field(default_factory=list, description="Output parameters.")
    artifacts: list[Artifact] = Field(default_factory=list, description="Output artifacts.")


class Backoff(MusterModel):
    duration: Duration = Field(default="1s", description="Wait before the first retry.")
    factor: float = Field(default=2.0, ge=1, description="Each wait is the previous one times this.")
    max_duration: Duration | None = Field(
        default=None, description="Stop retrying once this long has passed since the first attempt."
    )


class RetryStrategy(MusterModel):
    limit: int | None = Field(
        default=None, ge=0, description="Retries after the first attempt; unset retries without limit (Argo)."
    )
    retry_policy: Literal["OnFailure", "OnError", "Always"] = Field(
        default="OnFailure",
        description="OnFailure: the task's process failed; OnError: the system failed it (node lost, "
        "preempted past its grace); Always: both.",
    )
    backoff: Backoff | None = Field(default=None, description="Waits between attempts.")


class TaskCache(MusterModel):
    enabled: bool = Field(default=True, description="Reuse the outputs of an identical earlier run.")
    version: str = Field(default="", description="Bump to invalidate earlier results.")
    max_age: Duration | None = Field(default=None, description="Ignore results older than this.")


class WorkflowTask(MusterModel):
    name: DNSLabel = Field(description="Task name, unique in the workflow (DNS-1123 label).")
    template: PodTemplateSpec | None = Field(default=None, description="Run one pod (or one per item).")
    training_job: TrainingJobSpec | None = Field(default=None, description="Run a distributed training job.")
    dependencies: list[str] = Field(
        default_factory=list, description="Tasks that must succeed (or be skipped) first."
    )
    when: str | None = Field(default=None, description="Run only if this expression on parameters is true.")
    with_items: list[Any] | None = Field(default=None, description="Fan out: one run per item ({{item}}).")
    with_param: str | None = Field(default=None, description="Fan out over a JSON list parameter.")
    inputs: Inputs = Field(default_factory=Inputs, description="Parameters and artifacts it reads.")
    outputs: Outputs = Field(default_factory=Outputs, description="Parameters and artifacts it writes.")
    retry_strategy: RetryStrategy | None = Field(default=None, description="Retries (none when unset).")
    timeout: Duration | None = Field(default=None, description="Fail an attempt that runs longer.")
    cache: TaskCache | None = Field(default=None, description="Step caching (off when unset).")
    queue_name: ObjectName | None = Field(default=None, description="LocalQueue (default: the workflow's).")
    priority_class_name: ObjectName | None = Field(
        default=None, description="PriorityClass (default: the workflow's)."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if (self.template is None) == (self.training_job is None):
            errors.append(FieldError(path, "must set exactly one of template and trainingJob"))
        if self.with_items is not None and self.with_param is not None:
            errors.append(FieldError(child_path(path, "withParam"), "may not be set together with withItems"))
        for group in ("parameters", "artifacts"):
            for where, items in (("inputs", self.inputs), ("outputs", self.outputs)):
                names = [p.name for p in getattr(items, group)]
                errors.extend(duplicate_errors(names, child_path(path, where, group), "name"))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        if (
            self.training_job is not None
            and self.training_job.run_policy.ttl_seconds_after_finished is not None
        ):
            where = child_path(path, "trainingJob", "runPolicy", "ttlSecondsAfterFinished")
            return [FieldError(where, "ignored: a workflow keeps its jobs until the workflow is deleted")]
        if self.template is None:
            return []
        return template_warnings(self.template, child_path(path, "template"), restart_by="retryStrategy")


class WorkflowArguments(MusterModel):
    parameters: list[Parameter] = Field(
        default_factory=list, description="Workflow parameters ({{workflow.parameters.<name>}})."
    )


class WorkflowSpec(MusterModel):
    tasks: list[WorkflowTask] = Field(min_length=1, description="The DAG's tasks; order does not matter.")
    arguments: WorkflowArguments = Field(default_factory=WorkflowArguments, description="Parameters.")
    on_exit: str | None = Field(default=None, description="Task that runs last, whatever happened before.")
    parallelism: int | None = Field(default=None, ge=1, description="Most tasks running at once.")
    queue_name: ObjectName | None = Field(default=None, description="LocalQueue for every task.")
    priority_class_name: ObjectName | None = Field(default=None, description="PriorityClass for every task.")

    def field_rules(self, path: str) -> list[FieldError]:
        tpath = child_path(path, "tasks")
        names = [t.name for t in self.tasks]
        errors = duplicate_errors(names, tpath, "name", "duplicate task name")
        for i, task in enumerate(self.tasks):
            for d, dep in enumerate(task.dependencies):
                where = child_path(tpath, i, "dependencies", d)
                if dep not in names:
                    errors.append(
                        FieldError(where, f"no task named {dep!r}", hint=f"tasks: {', '.join(names)}")
                    )
                elif dep == task.name:
                    errors.append(FieldError(where, "a task cannot depend on itself", dep))
                elif dep == self.on_exit:
                    errors.append(FieldError(where, f"{dep!r} is the onExit task, which runs last"))
        errors.extend(self._exit_rules(path, names))
        if errors:
            return errors
        cycle = _find_cycle(self.tasks)
        if cycle:
            return [FieldError(tpath, f"dependency cycle {' -> '.join(cycle)}")]
        params = [p.name for p in self.arguments.parameters]
        return reference_rules(self.tasks, tpath, params, self.on_exit)

    def _exit_rules(self, path: str, names: list[str]) -> list[FieldError]:
        if self.on_exit is None:
            return []
        where = child_path(path, "onExit")
        if self.on_exit not in names:
            return [FieldError(where, f"no task named {self.on_exit!r}", hint=f"tasks: {', '.join(names)}")]
        index = names.index(self.on_exit)
        if self.tasks[index].dependencies:
            return [
                FieldError(
                    child_path(path, "tasks", index, "dependencies"),
                    "must be empty for the onExit task: it runs after every other task",
                )
            ]
        return []


def _find_cycle(tasks: list[WorkflowTask]) -> list[str]:
    """The first dependency cycle as [a, b, ..., a] (a depends on b ...), or []."""
    deps = {t.name: t.dependencies for t in tasks}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = 1
        stack.append(name)
        for dep in deps.get(name, []):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        stack.pop()
        state[name] = 2
        return []

    for task in tasks:
        if task.name not in state and (found := visit(task.name)):
            return found
    return []


class TaskOutputs(MusterModel):
    parameters: dict[str, str] = Field(default_factory=dict, description="Output parameter values.")
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="Where each output artifact is stored."
    )


class TaskNode(MusterModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Skipped", "Cached", "Omitted", "Error"] = (
        Field(
            default="Pending",
            description="Task phase; Cached reuses earlier outputs, Omitted was never reached.",
        )
    )
    reason: str | None = Field(default=None, description="Machine-readable reason.")
    message: str = Field(default="", description="Human-readable detail.")
    started_at: str | None = Field(default=None, description="When the first attempt started (UTC).")
    finished_at: str | None = Field(default=None, description="When it finished (UTC).")
    attempts: int = Field(default=0, ge=0, description="Attempts so far (across `muster retry`).")
    attempts_before_retry: int = Field(
        default=0,
        ge=0,
        description="Attempts made before the last `muster retry`; retryStrategy.limit counts after.",
    )
    cache_key: str | None = Field(
        default=None, description="SHA-256 cache key of the task definition and inputs."
    )
    cache_hit: bool = Field(default=False, description="Whether outputs came from the cache.")
    outputs: TaskOutputs = Field(default_factory=TaskOutputs, description="Recorded outputs.")
    retry_at: str | None = Field(
        default=None, description="When the next attempt may start (retryStrategy backoff, UTC)."
    )
    item: Any = Field(default=None, description="The withItems/withParam item of this run.")
    children: list[str] = Field(
        default_factory=list, description="The runs of a fanned-out task, e.g. train(0), train(1)."
    )


class WorkflowStatus(MusterModel):
    phase: Literal["Pending", "Running", "Succeeded", "Failed", "Error"] = Field(
        default="Pending", description="Pending, Running, Succeeded, Failed or Error."
    )
    nodes: dict[str, TaskNode] = Field(
        default_factory=dict, description="Per task (fanned-out runs as task(0), task(1), ...)."
    )
    progress: str = Field(default="0/0", description="Finished tasks / all tasks, e.g. 3/5.")
    started_at: str | None = Field(default=None, description="When it started (UTC).")
    finished_at: str | None = Field(default=None, description="When it finished (UTC).")
    message: str = Field(default="", description="Why it failed, if it did.")
    retries: int = Field(
        default=0, ge=0, description="`muster retry` requests carried out (the muster.dev/retry annotation)."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Conditions.")


class Workflow(Object):
    """A DAG pipeline of pod and training-job tasks."""

    KIND: ClassVar[str] = "Workflow"
    kind: Literal["Workflow"] = Field(default="Workflow", description="Always Workflow.")
    spec: WorkflowSpec = Field(description="Tasks, parameters and policies.")
    status: WorkflowStatus | None = Field(default=None, description="Phase and per-task nodes.")


def order(tasks: list[dict[str, Any]]) -> list[str]:
    """Task names so that each comes after its dependencies (spec order among equals)."""
    deps = {t["name"]: list(t.get("dependencies") or []) for t in tasks}
    done: list[str] = []
    placed: set[str] = set()
    while len(done) < len(deps):
        progressed = False
        for name, needs in deps.items():
            if name not in placed and all(d in placed for d in needs):
                done.append(name)
                placed.add(name)
                progressed = True
        if not progressed:  # a cycle: validation rejects these; never loop forever
            done.extend(n for n in deps if n not in placed)
            break
    return done
