"""Part 2 of benchmarks/experiments.py: one TPE + ASHA search through ``muster up`` against
Optuna alone (its TPE sampler and SuccessiveHalvingPruner, ``n_jobs`` = GPUs) running the same
trial process on the same budget of trials. The GPUs are the search's for its whole run, so a
search holds ``GPUs x wall`` GPU-seconds; its work is the steps its trials computed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import experiment_curves as curves

from muster.api.conditions import epoch
from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp

SCRIPT = str(Path(curves.__file__).resolve())
STEPS = 27
MIN_RESOURCE = 3  # rungs at 3 and 9 steps, as in part 1


@dataclass
class Live:
    wall: float
    to_target: float | None  # seconds from the start until a finished trial got within 1%
    steps: int  # steps the trials computed
    process_seconds: float  # trial processes' lifetimes, summed
    trials: int


def part2(seeds: int, gpus: int, trials: int, step_time: float) -> None:
    target = curves.best(STEPS) * 1.01
    print(
        f"\n== live: TPE + ASHA through muster up vs Optuna alone (TPE + SuccessiveHalving), "
        f"{trials} trials, {gpus} GPUs, {STEPS} steps of {step_time}s, target <= {target:.4f}"
    )
    header = (
        f"{'seed':>4} {'system':<14} {'wall s':>7} {'GPU-s held':>10} {'work GPU-s':>10} {'held/work':>9} "
        f"{'to target GPU-s':>16}"
    )
    print(header)
    ratios, target_ratios = [], []
    for seed in range(seeds):
        runs = {
            "muster": _muster(seed, gpus, trials, step_time, target),
            "optuna alone": _optuna(seed, gpus, trials, step_time, target),
        }
        for name, r in runs.items():
            held, work = gpus * r.wall, r.steps * step_time
            reach = "never" if r.to_target is None else f"{gpus * r.to_target:.0f}"
            print(
                f"{seed:>4} {name:<14} {r.wall:>7.1f} {held:>10.1f} {work:>10.1f} {held / work:>9.2f} "
                f"{reach:>16}"
            )
        m, o = runs["muster"], runs["optuna alone"]
        ratios.append((m.wall / m.steps) / (o.wall / o.steps))
        if m.to_target is not None and o.to_target is not None:
            target_ratios.append(m.to_target / o.to_target)
    print(
        f"GPU-seconds held per step of work, muster / optuna alone: {', '.join(f'{r:.3f}' for r in ratios)}"
    )
    if target_ratios:
        print(
            "GPU-seconds to the target, muster / optuna alone: "
            + ", ".join(f"{r:.2f}" for r in target_ratios)
        )


def _command(step_time: float, times: Path) -> list[str]:
    return [
        sys.executable,
        SCRIPT,
        "--steps",
        str(STEPS),
        "--step-time",
        str(step_time),
        "--times",
        str(times),
    ]


def _muster(seed: int, gpus: int, trials: int, step_time: float, target: float) -> Live:
    with tempfile.TemporaryDirectory() as tmp:
        home, times = Path(tmp) / "home", Path(tmp) / "times.jsonl"
        doc = {
            "apiVersion": "muster.dev/v1",
            "kind": "Experiment",
            "metadata": {"name": "bench"},
            "spec": {
                "objective": {
                    "type": "minimize",
                    "objectiveMetricName": "loss",
                    "metricStrategies": [{"name": "loss", "value": "latest"}],
                },
                "algorithm": {
                    "algorithmName": "tpe",
                    "algorithmSettings": [
                        {"name": "random_state", "value": str(seed)},
                        {"name": "n_startup_trials", "value": "10"},
                    ],
                },
                "earlyStopping": {
                    "algorithmName": "asha",
                    "algorithmSettings": [
                        {"name": "min_resource", "value": str(MIN_RESOURCE)},
                        {"name": "max_resource", "value": str(STEPS)},
                        {"name": "reduction_factor", "value": "3"},
                    ],
                },
                "parallelTrialCount": gpus,
                "maxTrialCount": trials,
                "parameters": curves.parameters(),
                "trialTemplate": {
                    "template": {
                        "spec": {
                            "terminationGracePeriodSeconds": 5,
                            "containers": [
                                {
                                    "name": "main",
                                    "command": [
                                        *_command(step_time, times),
                                        "--lr=${trialParameters.lr}",
                                        "--momentum=${trialParameters.momentum}",
                                        "--width=${trialParameters.width}",
                                    ],
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ],
                        }
                    }
                },
            },
        }
        up = MusterUp(home, extra_args=["--fake-gpus", str(gpus)]).start(timeout=300)
        with up, Client(up.url, up.token) as client:
            start = time.time()
            client.apply([doc])

            def done() -> bool:
                conds = (client.get("Experiment", "bench", "default").get("status") or {}).get(
                    "conditions"
                ) or []
                return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)

            wait_for(done, timeout=1800, interval=0.2, what="the experiment to finish")
            wall = time.time() - start
            items = client.list("Trial", "default")["items"]
            if os.environ.get("MUSTER_BENCH_DEBUG"):
                for t in sorted(items, key=lambda t: t["spec"]["index"]):
                    st = t["status"]
                    print(
                        t["metadata"]["name"],
                        st.get("phase"),
                        st.get("reason"),
                        st.get("objectiveValue"),
                        [(r["rung"], r["step"], r["decision"]) for r in st.get("rungs") or []],
                        st.get("startTime"),
                        st.get("completionTime"),
                    )
        reached = [
            epoch(t["status"]["completionTime"]) - start
            for t in items
            if t["status"]["phase"] == "Succeeded" and _final(t["spec"]["parameterAssignments"]) <= target
        ]
        return _live(wall, min(reached) if reached else None, times, len(items))


def _optuna(seed: int, gpus: int, trials: int, step_time: float, target: float) -> Live:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=10),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=MIN_RESOURCE, reduction_factor=3),
    )
    reached: list[float] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        times = Path(tmp) / "times.jsonl"
        start = time.time()

        def objective(trial: optuna.Trial) -> float:
            lr = trial.suggest_categorical("lr", curves.LRS)
            momentum = trial.suggest_categorical("momentum", curves.MOMENTA)
            width = trial.suggest_int("width", *curves.WIDTHS)
            args = [*_command(step_time, times), f"--lr={lr}", f"--momentum={momentum}", f"--width={width}"]
            args += ["--checkpoint-dir", str(Path(tmp) / f"trial-{trial.number}")]
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
            value = float("nan")
            assert proc.stdout is not None
            for line in proc.stdout:
                step, value = int(line.split()[1].rstrip(":")), float(line.split("loss=")[1])
                trial.report(value, step)
                if step < STEPS and trial.should_prune():
                    proc.terminate()
                    proc.wait()
                    raise optuna.TrialPruned()
            proc.wait()
            if (
                _final(
                    [
                        {"name": "lr", "value": lr},
                        {"name": "momentum", "value": momentum},
                        {"name": "width", "value": str(width)},
                    ]
                )
                <= target
            ):
                with lock:
                    reached.append(time.time() - start)
            return value

        study.optimize(objective, n_trials=trials, n_jobs=gpus)
        wall = time.time() - start
        return _live(wall, min(reached) if reached else None, times, trials)


def _final(assignments: list[dict]) -> float:
    p = {a["name"]: a["value"] for a in assignments}
    return curves.loss(float(p["lr"]), float(p["momentum"]), int(p["width"]), STEPS, noise=False)


def _live(wall: float, to_target: float | None, times: Path, trials: int) -> Live:
    records = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
    return Live(
        wall=wall,
        to_target=to_target,
        steps=sum(r["steps"] for r in records),
        process_seconds=sum(r["end"] - r["start"] for r in records),
        trials=trials,
    )
