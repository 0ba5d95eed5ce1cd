"""Hyperparameter search: GPU-seconds to get within 1% of the best objective.

Part 1, *simulated* (a virtual clock, K GPUs, many seeds): Muster's own samplers and ASHA rules
(the code the Experiment controller runs: ``muster.controllers.experiment.space``,
``.suggest`` and ``.stopping``) on two objectives with a known best:

* the synthetic learning-curve family of ``experiment_curves.py`` (432 configurations,
  seeded noise), 27 steps at most, one GPU-second a step;
* the small PyTorch model of ``examples/experiment_train.py``: its learning curves measured
  once here for every configuration of a 64-point space (a tabular benchmark), 9 epochs at most,
  each epoch costing its measured time.

Methods: ASHA (random + rungs, pause and promote), random search without early stopping, grid
(in a seeded order), TPE + ASHA (``tpe`` with ``earlyStopping: asha``), and Optuna alone
(``TPESampler`` + ``SuccessiveHalvingPruner``, ask-and-tell on the same clock). A (re)started
trial costs ``--start-cost`` GPU-seconds (a process start and a checkpoint load). A method
"reaches" the target when a trial that ran to the end has a noise-free final value within 1% of
the best one.

Part 2, *live* (``--live``): the same TPE + ASHA search through ``muster up --fake-gpus K``
(the trial is ``experiment_curves.py`` as a process) against Optuna alone running the same
trial process with its sampler and pruner (``n_jobs=K``), same budget of trials: wall time,
GPU-seconds held (K x wall), GPU-seconds of work done (steps x step time), and the ratio.

    python benchmarks/experiments.py                # part 1 (a few minutes)
    python benchmarks/experiments.py --live         # parts 1 and 2
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import experiment_curves as curves

from muster.api.experiment_plan import AshaOptions, SearchPlan
from muster.controllers.experiment.space import Parameter, grid_points, parameters_of, sample
from muster.controllers.experiment.stopping import RungEntry, asha_decision, promotable
from muster.controllers.experiment.suggest import Observed, TpeMemory, suggest

REPO = Path(__file__).resolve().parents[1]
Value = Callable[[dict[str, str], int, bool], float]  # (params, step, noisy) -> loss


@dataclass
class Objective:
    name: str
    params: list[Parameter]
    steps: int
    step_cost: float  # GPU-seconds a step
    value: Value
    best: float
    start_cost: float | None = None  # GPU-seconds to (re)start a trial; None: --start-cost

    @property
    def min_resource(self) -> int:
        """The first rung: a ninth of a full trial (eta 3: rungs at R/9 and R/3)."""
        return max(1, self.steps // 9)

    def target(self) -> float:
        return self.best * 1.01


@dataclass
class Trial:
    index: int
    params: dict[str, str]
    bracket: int = 0
    step: int = 0
    curve: dict[int, float] = field(default_factory=dict)
    state: str = "running"  # running, paused, done
    judged: int = 0  # rungs recorded


@dataclass
class Run:
    """One method on one seed: when it reached the target, what it spent."""

    to_target: float | None = None  # GPU-seconds when a finished trial first got within 1%
    spent: float = 0.0
    trials: int = 0
    finished: int = 0


# -- part 1: the simulator ------------------------------------------------------------------------


def simulate(method: str, obj: Objective, seed: int, gpus: int, budget: float, start_cost: float) -> Run:
    """Run ``method`` on ``obj`` with ``gpus`` workers until ``budget`` GPU-seconds are spent."""
    asha = AshaOptions(obj.min_resource, obj.steps, 3, 1, None)
    trials: list[Trial] = []
    entries: list[RungEntry] = []
    grid = grid_points(obj.params, seed) if method == "grid" else []
    run = Run()
    clock = 0.0
    busy: list[tuple[float, int, Trial]] = []  # (finish time, tiebreak, trial)
    tie = itertools.count()
    optuna_state = _OptunaSim(obj, seed) if method == "optuna" else None
    memory = TpeMemory()

    def segment_end(t: Trial) -> int:
        if method in ("asha", "tpe+asha"):
            milestones = asha.milestones(t.bracket)
            return milestones[t.judged] if t.judged < len(milestones) else obj.steps
        if optuna_state is not None:
            return t.step + 1  # Optuna's pruner looks at every step
        return obj.steps

    def launch(t: Trial, restart: bool) -> None:
        end = segment_end(t)
        cost = (start_cost if restart else 0.0) + (end - t.step) * obj.step_cost
        run.spent += cost
        heapq.heappush(busy, (clock + cost, next(tie), t))

    def next_trial() -> Trial | None:
        if method in ("asha", "tpe+asha"):
            entry = promotable(entries, asha.reduction_factor, False)
            if entry is not None:
                t = trials[entry.index]
                t.state = "running"
                entries[:] = [
                    RungEntry(e.trial, e.index, e.bracket, e.rung, e.value, False) if e is entry else e
                    for e in entries
                ]
                return t
        index = len(trials)
        if method == "grid":
            if index >= len(grid):
                return None
            params = grid[index]
        elif method == "tpe+asha":
            plan = SearchPlan(sampler="tpe", tpe={"n_startup_trials": 10, "constant_liar": True})
            observed = [_observed(t, obj) for t in trials]
            params = suggest(plan, obj.params, seed, index, observed, "minimize", memory)
        elif optuna_state is not None:
            params = optuna_state.ask(index)
        else:
            params = sample(obj.params, seed, index)
        t = Trial(index, dict(params))
        trials.append(t)
        run.trials += 1
        return t

    for _ in range(gpus):
        t = next_trial()
        if t is not None:
            launch(t, restart=True)
    while busy:
        clock, _, t = heapq.heappop(busy)
        end = segment_end(t)
        for s in range(t.step + 1, end + 1):
            t.curve[s] = obj.value(t.params, s, True)
        t.step = end
        goes_on = True
        if optuna_state is not None:
            goes_on = optuna_state.report(t) and t.step < obj.steps
        elif method in ("asha", "tpe+asha") and t.step < obj.steps:
            value = t.curve[t.step]
            goes_on = asha_decision(entries, t.index, 0, t.judged, value, asha.reduction_factor, False)
            entries.append(RungEntry(str(t.index), t.index, 0, t.judged, value, paused=not goes_on))
            t.judged += 1
        if t.step >= obj.steps:
            goes_on = False
            t.state = "done"
            run.finished += 1
            if optuna_state is not None:
                optuna_state.tell(t, t.curve[t.step])
            if run.to_target is None and obj.value(t.params, obj.steps, False) <= obj.target():
                run.to_target = run.spent - sum(c - clock for c, _, _ in busy)  # spent up to now
        elif not goes_on:
            t.state = "paused"
        if goes_on:
            launch(t, restart=False)
            continue
        if run.spent < budget and run.to_target is None:
            nxt = next_trial()
            if nxt is not None:
                launch(nxt, restart=True)
    return run


def _observed(t: Trial, obj: Objective) -> Observed:
    state = {"done": "complete", "paused": "pruned"}.get(t.state, "running")
    value = t.curve[obj.steps] if t.state == "done" else None
    return Observed(t.params, state, value, dict(t.curve), t.index)  # type: ignore[arg-type]


class _OptunaSim:
    """Optuna's TPE sampler and SuccessiveHalvingPruner, ask-and-tell, on the simulated clock."""

    def __init__(self, obj: Objective, seed: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.obj = obj
        self.study = optuna.create_study(
            sampler=optuna.samplers.TPESampler(seed=seed, n_startup_trials=10),
            pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=obj.min_resource, reduction_factor=3),
        )
        self.dists = {p.name: _distribution(optuna, p) for p in obj.params}
        self.live: dict[int, object] = {}

    def ask(self, index: int) -> dict[str, str]:
        trial = self.study.ask(self.dists)
        self.live[index] = trial
        return {k: str(v) for k, v in trial.params.items()}

    def report(self, t: Trial) -> bool:
        trial = self.live[t.index]
        trial.report(t.curve[t.step], t.step)  # type: ignore[attr-defined]
        if t.step < self.obj.steps and trial.should_prune():  # type: ignore[attr-defined]
            self.study.tell(trial, state=self.optuna.trial.TrialState.PRUNED)
            return False
        return True

    def tell(self, t: Trial, value: float) -> None:
        self.study.tell(self.live[t.index], value)


def _distribution(optuna: object, p: Parameter) -> object:
    dist = optuna.distributions  # type: ignore[attr-defined]
    if p.choices:
        return dist.CategoricalDistribution(list(p.choices))
    return dist.IntDistribution(int(p.low), int(p.high))


def synthetic() -> Objective:
    params = parameters_of({"parameters": curves.parameters()})

    def value(p: dict[str, str], step: int, noisy: bool) -> float:
        return curves.loss(float(p["lr"]), float(p["momentum"]), int(p["width"]), step, noise=noisy)

    return Objective("synthetic curves", params, 27, 1.0, value, curves.best(27))


def pytorch_table(path: Path) -> Objective:
    """The small PyTorch model's curves for every configuration (measured once, then cached)."""
    space = [
        {
            "name": "lr",
            "parameterType": "discrete",
            "feasibleSpace": {"list": ["0.001", "0.003", "0.01", "0.03", "0.1", "0.3"]},
        },
        {"name": "hidden", "parameterType": "discrete", "feasibleSpace": {"list": ["8", "16", "32", "64"]}},
        {"name": "optimizer", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
    ]
    epochs = 9
    table = json.loads(path.read_text()) if path.exists() else _measure(space, epochs)
    if "start_seconds" not in table:
        table["start_seconds"] = _start_seconds()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table))
    params = parameters_of({"parameters": space})

    def value(p: dict[str, str], step: int, noisy: bool) -> float:
        return table["curves"][f"{p['lr']}/{p['hidden']}/{p['optimizer']}"][step - 1]

    best = min(c[-1] for c in table["curves"].values())
    obj = Objective("PyTorch MLP (tabular)", params, epochs, table["epoch_seconds"], value, best)
    obj.start_cost = table["start_seconds"]
    return obj


def _start_seconds() -> float:
    """What (re)starting the trainer costs: a process that imports torch and loads its data
    (its CPU time, as for the epochs)."""
    import resource
    import subprocess

    script = str(REPO / "examples" / "experiment_train.py")
    took = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, script, "--epochs", "0"], check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        took.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return round(statistics.median(took), 3)


def _measure(space: list[dict], epochs: int) -> dict:
    import contextlib
    import io
    import os
    import tempfile

    sys.path.insert(0, str(REPO / "examples"))
    import experiment_train

    out: dict = {"curves": {}}
    # CPU time, not wall time: the same as wall time on an idle machine (torch runs on one
    # thread here), and not inflated by whatever else shares the benchmark machine.
    started = time.process_time()
    lists = [p["feasibleSpace"]["list"] for p in space]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MUSTER_CHECKPOINT_DIR"] = tmp
        for lr, hidden, opt in itertools.product(*lists):
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                experiment_train.main(
                    ["--lr", lr, "--hidden", hidden, "--optimizer", opt, "--epochs", str(epochs)]
                )
            os.remove(Path(tmp) / "checkpoint.pt")
            values = [
                float(line.split("val_loss=")[1].split()[0])
                for line in buf.getvalue().splitlines()
                if "val_loss=" in line
            ]
            out["curves"][f"{lr}/{hidden}/{opt}"] = values
    out["epoch_seconds"] = round((time.process_time() - started) / (len(out["curves"]) * epochs), 4)
    return out


def part1(seeds: int, gpus: int, start_cost: float) -> list[dict]:
    rows = []
    for obj in (synthetic(), pytorch_table(REPO / "benchmarks" / ".cache" / "experiment_mlp_curves.json")):
        restart = obj.start_cost if obj.start_cost is not None else start_cost
        full = obj.steps * obj.step_cost + restart
        budget = 100 * full
        print(
            f"\n== {obj.name}: best {obj.best:.4f}, target <= {obj.target():.4f}; a full trial costs "
            f"{full:.2f} GPU-s (a start {restart:.2f}); budget {budget:.0f} GPU-s; {gpus} GPUs; {seeds} seeds"
        )
        print(
            f"{'method':<12} {'reached':>8} {'median GPU-s':>13} {'p25':>8} {'p75':>8} {'x ASHA':>7} "
            f"{'trials':>7}"
        )
        results: dict[str, list[Run]] = {}
        for method in ("asha", "random", "grid", "tpe+asha", "optuna"):
            results[method] = [simulate(method, obj, seed, gpus, budget, restart) for seed in range(seeds)]
        base = _median([r.to_target if r.to_target is not None else math.inf for r in results["asha"]])
        for method, runs in results.items():
            costs = [r.to_target if r.to_target is not None else math.inf for r in runs]
            med = _median(costs)
            q = [_rank(costs, 0.25), med, _rank(costs, 0.75)]
            label = {"optuna": "optuna alone", "tpe+asha": "tpe+asha"}.get(method, method)
            print(
                f"{label:<12} {sum(c < math.inf for c in costs):>5}/{len(costs):<2} {_fmt(med):>13} "
                f"{_fmt(q[0]):>8} {_fmt(q[2]):>8} {med / base if base < math.inf else math.nan:>7.2f} "
                f"{statistics.mean(r.trials for r in runs):>7.1f}"
            )
            rows.append(
                {
                    "objective": obj.name,
                    "method": method,
                    "median": med,
                    "reached": sum(c < math.inf for c in costs),
                }
            )
    return rows


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _rank(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile: one of the values (``never`` stays ``never``; an
    interpolating quantile of two seeds extrapolates below zero or mixes a cost with infinity)."""
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, math.ceil(q * len(ranked)) - 1))] if ranked else math.nan


def _fmt(v: float) -> str:
    return "never" if v == math.inf else f"{v:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--start-cost", type=float, default=1.0, help="GPU-seconds to (re)start a trial.")
    parser.add_argument("--live", action="store_true", help="Also run part 2 through muster up (minutes).")
    parser.add_argument("--live-seeds", type=int, default=2)
    parser.add_argument("--live-trials", type=int, default=24)
    parser.add_argument("--step-time", type=float, default=0.25)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    part1(args.seeds, args.gpus, args.start_cost)
    if args.live:
        from experiment_live import part2

        part2(args.live_seeds, args.gpus, args.live_trials, args.step_time)
    return 0


if __name__ == "__main__":
    sys.exit(main())
