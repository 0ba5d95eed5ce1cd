"""Part 2 of benchmarks/experiments.py: one TPE + ASHA search through ``muster up`` against
Optuna alone (its TPE sampler and SuccessiveHalvingPruner, ``n_jobs`` = GPUs) running the same
trial process on the same budget of trials. The GPUs are the search's for its whole run, so a
search holds ``GPUs x wall`` GPU-seconds; its work is the steps its trials computed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import experiment_curves as curves
import experiment_trace as trace

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
    starts: int = 0  # trial processes started (a promoted trial starts another)
    cpu: float = 0.0  # CPU-seconds the search's own process used (muster up; the Optuna script)


def part2(seeds: int, gpus: int, trials: int, step_time: float, repeats: int = 1) -> None:
    target = curves.best(STEPS) * 1.01
    print(
        f"\n== live: TPE + ASHA through muster up vs Optuna alone (TPE + SuccessiveHalving), "
        f"{trials} trials, {gpus} GPUs, {STEPS} steps of {step_time}s, target <= {target:.4f}"
    )
    header = (
        f"{'seed':>4} {'system':<14} {'wall s':>7} {'GPU-s held':>10} {'work GPU-s':>10} {'held/work':>9} "
        f"{'to target GPU-s':>16} {'starts':>6} {'idle GPU-s':>10} {'in-process':>10} {'CPU s':>6}"
    )
    print(header)
    ratios, target_ratios = [], []
    for seed in [s for s in range(seeds) for _ in range(repeats)]:
        runs = {
            "muster": _muster(seed, gpus, trials, step_time, target),
            "optuna alone": _optuna(seed, gpus, trials, step_time, target),
        }
        for name, r in runs.items():
            held, work = gpus * r.wall, r.steps * step_time
            reach = "never" if r.to_target is None else f"{gpus * r.to_target:.0f}"
            print(
                f"{seed:>4} {name:<14} {r.wall:>7.1f} {held:>10.1f} {work:>10.1f} {held / work:>9.2f} "
                f"{reach:>16} {r.starts:>6} {held - r.process_seconds:>10.1f} "
                f"{r.process_seconds - work:>10.1f} {r.cpu:>6.1f}"
            )
        m, o = runs["muster"], runs["optuna alone"]
        ratios.append((m.wall / m.steps) / (o.wall / o.steps))
        if m.to_target is not None and o.to_target is not None:
            target_ratios.append(m.to_target / o.to_target)
    print(
        f"GPU-seconds held per step of work, muster / optuna alone: {', '.join(f'{r:.3f}' for r in ratios)} "
        f"(median {statistics.median(ratios):.3f})"
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
            assert up.proc is not None
            cpu_before, start = _cpu_seconds(up.proc.pid), time.time()
            client.apply([doc])

            def finished() -> dict | None:
                exp = client.get("Experiment", "bench", "default")
                conds = (exp.get("status") or {}).get("conditions") or []
                ended = any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)
                return exp if ended else None

            # Its end is the one the server recorded, so how often this client looks is not the
            # search's cost; looking once a second keeps the look from loading the server.
            exp = wait_for(finished, timeout=1800, interval=1.0, what="the experiment to finish")
            wall = (epoch(exp["status"]["completionTime"]) or time.time()) - start
            cpu = _cpu_seconds(up.proc.pid) - cpu_before
            items = client.list("Trial", "default")["items"]
            if os.environ.get("MUSTER_BENCH_TRACE"):
                dump = {
                    k: client.list(k, None)["items"]
                    for k in ("Trial", "TrainingJob", "Workload", "Pod", "Event")
                }
                trace.save("muster", start, wall, times, dump)
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
        return _live(wall, min(reached) if reached else None, times, len(items), cpu)


def _optuna(seed: int, gpus: int, trials: int, step_time: float, target: float) -> Live:
    """Optuna alone, in an interpreter of its own: like a fresh ``muster up``, which imports optuna
    for the experiment's first suggestion, it imports optuna on its clock."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "live.json"
        args = [str(seed), str(gpus), str(trials), str(step_time), str(target), str(out)]
        subprocess.run([sys.executable, __file__, "--optuna-alone", *args], check=True)
        return Live(**json.loads(out.read_text()))


def _optuna_alone(seed: int, gpus: int, trials: int, step_time: float, target: float) -> Live:
    reached: list[float] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory() as tmp:
        times = Path(tmp) / "times.jsonl"
        cpu_before, start = _cpu_seconds(os.getpid()), time.time()
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=10),
            pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=MIN_RESOURCE, reduction_factor=3),
        )

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
        if os.environ.get("MUSTER_BENCH_TRACE"):
            trace.save("optuna alone", start, wall, times, {})
        cpu = _cpu_seconds(os.getpid()) - cpu_before
        return _live(wall, min(reached) if reached else None, times, trials, cpu)


def _final(assignments: list[dict]) -> float:
    p = {a["name"]: a["value"] for a in assignments}
    return curves.loss(float(p["lr"]), float(p["momentum"]), int(p["width"]), STEPS, noise=False)


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _live(wall: float, to_target: float | None, times: Path, trials: int, cpu: float) -> Live:
    records = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
    return Live(
        wall=wall,
        to_target=to_target,
        steps=sum(r["steps"] for r in records),
        process_seconds=sum(r["end"] - r["start"] for r in records),
        trials=trials,
        starts=len(records),
        cpu=cpu,
    )


def main() -> int:
    if sys.argv[1:2] == ["--optuna-alone"]:  # one run of the Optuna side (see _optuna)
        seed, gpus, trials, step_time, target, out = sys.argv[2:8]
        live = _optuna_alone(int(seed), int(gpus), int(trials), float(step_time), float(target))
        Path(out).write_text(json.dumps(dataclasses.asdict(live)))
        return 0
    parser = argparse.ArgumentParser(description="Part 2 of benchmarks/experiments.py alone.")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--step-time", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=1, help="Runs of each seed (each side).")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    part2(args.seeds, args.gpus, args.trials, args.step_time, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
