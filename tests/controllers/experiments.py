"""Helpers for driving the Experiment controller on the fake runtime: experiments, and trials
that "print" metrics (lines written to the pod's log file, where the local runtime keeps it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from muster.runtime.local.logs import container_log
from tests.controllers.conftest import Harness

Obj = dict[str, Any]


def experiment(
    name: str = "search",
    algorithm: str = "random",
    settings: dict[str, Any] | None = None,
    early_stopping: Obj | None = None,
    parallel: int = 2,
    max_trials: int = 4,
    goal: float | None = None,
    objective_type: str = "minimize",
    gpus: int = 1,
    **spec: Any,
) -> Obj:
    objective: Obj = {"type": objective_type, "objectiveMetricName": "loss"}
    if goal is not None:
        objective["goal"] = goal
    body: Obj = {
        "objective": objective,
        "algorithm": {
            "algorithmName": algorithm,
            "algorithmSettings": [{"name": k, "value": str(v)} for k, v in (settings or {}).items()],
        },
        "parallelTrialCount": parallel,
        "maxTrialCount": max_trials,
        "parameters": [
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.001", "max": "0.1", "step": "0.001"},
            },
            {"name": "epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "27"}},
        ],
        "trialTemplate": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "command": ["python", "train.py", "--lr=${trialParameters.lr}"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ]
                }
            }
        },
        **spec,
    }
    if early_stopping is not None:
        body["earlyStopping"] = early_stopping
    return {"apiVersion": "muster.dev/v1", "kind": "Experiment", "metadata": {"name": name}, "spec": body}


def say(h: Harness, pod: str, *lines: str, container: str = "main") -> None:
    """Append ``lines`` to the pod's log, as its process would print them."""
    path: Path = container_log(h.home, "default", pod, container)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for line in lines:
            f.write(line + "\n")


def trials(h: Harness, experiment_name: str = "search") -> dict[str, Obj]:
    return {
        t["metadata"]["name"]: t
        for t in h.store.list("Trial", "default").items
        if t["spec"]["experiment"] == experiment_name
    }


def phase(h: Harness, trial: str) -> str:
    t = h.get("Trial", trial)
    return ((t or {}).get("status") or {}).get("phase", "")
