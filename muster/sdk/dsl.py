"""``@task`` and ``@workflow``: Python functions compiled to a Workflow object (DESIGN §8).

    @task(cache=True, retries=2, resources={"cpu": "1", "memory": "1Gi"})
    def prepare(rows: int) -> Path: ...

    @task(replicas=2)                      # a TrainingJob: Master + 1 Worker, the same code
    def train(data: Path, lr: float) -> Path: ...

    @workflow
    def pipeline(rows: int = 512, lr: float = 0.05):
        return train(prepare(rows), lr)

    result = pipeline.run(rows=1024)       # submit, wait with a progress display

Inside a ``@workflow`` function a task call runs nothing: it records the task and returns a
:class:`Promise` of its result, which later calls take as arguments (promise-style
composition); the dependencies follow from them. Each task becomes one Workflow task whose
container runs ``python -m muster.sdk.run FILE:QUALNAME`` (:mod:`muster.sdk.run`) in its own
pod. Values pass as JSON parameters; a ``pathlib.Path`` argument or return value (a file or a
directory) passes as an artifact, reaching the next task at ``MUSTER_INPUTS_DIR/<name>``. The
hash of the task's source (``inspect.getsource``, dedented, trailing spaces dropped) is in
the container's environment (``MUSTER_SDK_SOURCE_HASH``), so editing a task misses the cache.

Compiling is deterministic: the same functions and arguments give the same Workflow, hence
the same cache keys, wherever it is compiled.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.sdk.names import RESULT_ANNOTATION, RETURN

__all__ = [
    "RETURN",
    "Promise",
    "SdkError",
    "Task",
    "WorkflowDef",
    "source_hash",
    "task",
    "workflow",
]

Obj = dict[str, Any]
RETURN_FILE = "return.json"


class SdkError(TypeError):
    """A task or workflow that cannot be compiled; the message says which and why."""


def source_hash(fn: Callable[..., Any]) -> str:
    """SHA-256 of a function's source, dedented and without trailing whitespace."""
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError) as exc:
        raise SdkError(f"cannot read the source of {fn.__qualname__}: {exc}") from None
    lines = [line.rstrip() for line in textwrap.dedent(text).strip().splitlines()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


class Promise:
    """The future result of a task call (or a workflow parameter) inside a ``@workflow``."""

    def __init__(self, task: str | None, parameter: str | None = None, artifact: bool = False) -> None:
        self.task = task  # None: a workflow parameter
        self.parameter = parameter
        self.artifact = artifact

    def __repr__(self) -> str:
        return f"<result of {self.task}>" if self.task else f"<workflow parameter {self.parameter}>"

    def __bool__(self) -> bool:
        raise SdkError(
            f"{self!r} has no value while the workflow is compiled; pass it to a task instead of testing it"
        )


class Task:
    """A function decorated with ``@task``: called inside a ``@workflow`` it records a task;
    called anywhere else it is the plain function."""

    def __init__(self, fn: Callable[..., Any], options: Obj) -> None:
        self.fn = fn
        self.options = options
        self.name = re.sub(r"[^a-z0-9-]+", "-", fn.__name__.lower().replace("_", "-")).strip("-") or "task"
        self.signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        self.path_params = {n for n, t in hints.items() if n != "return" and _is_path(t)}
        returns = hints.get("return", inspect.Signature.empty)
        self.returns = "none" if returns is type(None) else "artifact" if _is_path(returns) else "parameter"
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        builder = _Builder.current
        if builder is None:
            return self.fn(*args, **kwargs)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise SdkError(f"task {self.name}: {exc}") from None
        return builder.add(self, bound)

    @property
    def reference(self) -> str:
        """``FILE:QUALNAME``, what ``python -m muster.sdk.run`` loads."""
        file = inspect.getsourcefile(self.fn)
        if file is None:
            raise SdkError(f"{self.fn.__qualname__} has no source file: define tasks in a .py file")
        if "<locals>" in self.fn.__qualname__:
            raise SdkError(
                f"{self.fn.__qualname__} is defined inside a function: define tasks at module level"
            )
        return f"{Path(file).resolve()}:{self.fn.__qualname__}"


def task(
    fn: Callable[..., Any] | None = None,
    *,
    cache: bool | str = False,
    cache_max_age: str | None = None,
    retries: int | None = None,
    retry_policy: str = "OnFailure",
    backoff: str | Mapping[str, Any] | None = None,
    timeout: str | None = None,
    resources: Mapping[str, Any] | None = None,
    replicas: int = 1,
    env: Mapping[str, str] | None = None,
    image: str = "python:3.11",
    queue: str | None = None,
    priority_class: str | None = None,
) -> Any:
    """Make ``fn`` a workflow task.

    ``cache`` True (or a version string) reuses an identical earlier run's outputs;
    ``retries`` is retryStrategy.limit with ``retry_policy`` and ``backoff`` (a duration such as
    ``"5s"`` or ``{"duration": "5s", "factor": 2, "maxDuration": "5m"}``); ``timeout`` fails an
    attempt that runs longer; ``resources`` are the container's limits (``{"cpu": "1",
    "memory": "2Gi", "nvidia.com/gpu": 1}``); ``replicas`` > 1 runs the function as a
    distributed TrainingJob (a Master and ``replicas - 1`` Workers, with the torchrun
    environment; rank 0's return value is the result).
    """
    options: Obj = {
        "cache": cache,
        "cache_max_age": cache_max_age,
        "retries": retries,
        "retry_policy": retry_policy,
        "backoff": backoff,
        "timeout": timeout,
        "resources": dict(resources or {}),
        "replicas": replicas,
        "env": dict(env or {}),
        "image": image,
        "queue": queue,
        "priority_class": priority_class,
    }
    if replicas < 1:
        raise SdkError(f"@task(replicas={replicas}): must be >= 1")

    def wrap(f: Callable[..., Any]) -> Task:
        return Task(f, options)

    return wrap(fn) if fn is not None else wrap


class WorkflowDef:
    """A function decorated with ``@workflow``: :meth:`compile` gives the Workflow object,
    :meth:`run` submits it and waits."""

    def __init__(self, fn: Callable[..., Any], options: Obj) -> None:
        self.fn = fn
        self.options = options
        self.name = re.sub(r"[^a-z0-9-]+", "-", fn.__name__.lower().replace("_", "-")).strip("-")
        self.signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def compile(self, name: str | None = None, namespace: str = "default", **params: Any) -> Obj:
        """The Workflow (a wire dict) for these parameter values (defaults fill the rest)."""
        try:
            bound = self.signature.bind_partial(**params)
        except TypeError as exc:
            raise SdkError(f"workflow {self.name}: {exc}") from None
        bound.apply_defaults()
        missing = [p for p in self.signature.parameters if p not in bound.arguments]
        if missing:
            raise SdkError(f"workflow {self.name}: no value for parameter(s) {', '.join(missing)}")
        builder = _Builder()
        with builder:
            result = self.fn(**{p: Promise(None, p) for p in bound.arguments})
        spec: Obj = {
            "tasks": builder.tasks,
            "arguments": {
                "parameters": [{"name": p, "value": json.dumps(v)} for p, v in bound.arguments.items()]
            },
        }
        for key, field in (("parallelism", "parallelism"), ("queue", "queueName")):
            if self.options.get(key) is not None:
                spec[field] = self.options[key]
        metadata: Obj = {"name": name or self.name, "namespace": namespace}
        if isinstance(result, Promise) and result.task:
            metadata["annotations"] = {RESULT_ANNOTATION: result.task}
        return {"apiVersion": API_VERSION, "kind": "Workflow", "metadata": metadata, "spec": spec}

    def run(self, **kwargs: Any) -> Any:
        """Submit and wait (see :func:`muster.sdk.submit.submit` for the options)."""
        from muster.sdk.submit import submit

        return submit(self, **kwargs)


def workflow(
    fn: Callable[..., Any] | None = None, *, parallelism: int | None = None, queue: str | None = None
) -> Any:
    """Make ``fn`` a workflow: its parameters are the workflow's (JSON values), its body calls
    tasks, and the task whose promise it returns gives the run's result."""

    def wrap(f: Callable[..., Any]) -> WorkflowDef:
        return WorkflowDef(f, {"parallelism": parallelism, "queue": queue})

    return wrap(fn) if fn is not None else wrap


class _Builder:
    """Records the task calls of one ``@workflow`` body."""

    current: _Builder | None = None

    def __init__(self) -> None:
        self.tasks: list[Obj] = []
        self.names: dict[str, Task] = {}

    def __enter__(self) -> _Builder:
        if _Builder.current is not None:
            raise SdkError("a workflow cannot be compiled inside another")
        _Builder.current = self
        return self

    def __exit__(self, *_exc: object) -> None:
        _Builder.current = None

    def add(self, t: Task, bound: inspect.BoundArguments) -> Promise:
        bound.apply_defaults()
        name = t.name
        n = 2
        while name in self.names:
            name, n = f"{t.name}-{n}", n + 1
        self.names[name] = t
        params: list[Obj] = []
        artifacts: list[Obj] = []
        argv = ["-m", "muster.sdk.run", t.reference]
        deps: list[str] = []
        for arg, value in bound.arguments.items():
            if arg in t.path_params:
                if not (isinstance(value, Promise) and value.artifact):
                    raise SdkError(
                        f"{t.name}({arg}=...): a Path argument must be the result of a task returning a Path"
                    )
                artifacts.append(
                    {"name": arg, "from": f"{{{{tasks.{value.task}.outputs.artifacts.{RETURN}}}}}"}
                )
                argv += ["--artifact", arg]
                deps.append(str(value.task))
                continue
            params.append({"name": arg, "value": _parameter_value(t, arg, value, deps)})
            argv += ["--param", f"{arg}={{{{inputs.parameters.{arg}}}}}"]
        argv += ["--returns", t.returns]
        container: Obj = {
            "name": "main",
            "image": t.options["image"],
            "command": [os.path.abspath(sys.executable)],
            "args": argv,
            "env": [
                {"name": "MUSTER_SDK_SOURCE_HASH", "value": source_hash(t.fn)},
                *({"name": k, "value": str(v)} for k, v in sorted(t.options["env"].items())),
            ],
        }
        if t.options["resources"]:
            container["resources"] = {"limits": {k: str(v) for k, v in t.options["resources"].items()}}
        entry: Obj = {"name": name, "dependencies": sorted(set(deps))}
        template = {"spec": {"containers": [container]}}
        if t.options["replicas"] > 1:
            entry["trainingJob"] = {
                "replicaSpecs": {
                    "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                    "Worker": {
                        "replicas": t.options["replicas"] - 1,
                        "restartPolicy": "OnFailure",
                        "template": template,
                    },
                },
                "runPolicy": {"backoffLimit": 0},
            }
        else:
            entry["template"] = template
        entry["inputs"] = {"parameters": params, "artifacts": artifacts}
        if t.returns == "parameter":
            entry["outputs"] = {"parameters": [{"name": RETURN, "valueFrom": {"path": RETURN_FILE}}]}
        elif t.returns == "artifact":
            entry["outputs"] = {"artifacts": [{"name": RETURN, "path": RETURN}]}
        entry.update(_policies(t.options))
        self.tasks.append(entry)
        return Promise(name, RETURN, artifact=t.returns == "artifact")


def _parameter_value(t: Task, arg: str, value: Any, deps: list[str]) -> str:
    if isinstance(value, Promise):
        if value.task is None:
            return f"{{{{workflow.parameters.{value.parameter}}}}}"
        if value.artifact:
            raise SdkError(f"{t.name}({arg}=...): {value!r} is a Path; annotate the parameter as Path")
        deps.append(value.task)
        return f"{{{{tasks.{value.task}.outputs.parameters.{RETURN}}}}}"
    try:
        return json.dumps(value, sort_keys=True)
    except TypeError:
        raise SdkError(
            f"{t.name}({arg}={value!r}): not JSON; pass numbers, strings, lists or dicts"
        ) from None


def _policies(options: Obj) -> Obj:
    out: Obj = {}
    cache = options["cache"]
    if cache:
        out["cache"] = {"version": cache if isinstance(cache, str) else ""}
        if options["cache_max_age"]:
            out["cache"]["maxAge"] = options["cache_max_age"]
    if options["retries"] is not None:
        strategy: Obj = {"limit": options["retries"], "retryPolicy": options["retry_policy"]}
        backoff = options["backoff"]
        if isinstance(backoff, str):
            strategy["backoff"] = {"duration": backoff}
        elif backoff:
            strategy["backoff"] = dict(backoff)
        out["retryStrategy"] = strategy
    if options["timeout"]:
        out["timeout"] = options["timeout"]
    if options["queue"]:
        out["queueName"] = options["queue"]
    if options["priority_class"]:
        out["priorityClassName"] = options["priority_class"]
    return out


def _is_path(annotation: Any) -> bool:
    if annotation is inspect.Signature.empty:
        return False
    if isinstance(annotation, type):
        return issubclass(annotation, Path)
    return any(_is_path(a) for a in typing.get_args(annotation) if a is not type(None))
