"""The Experiment controller's pure parts: the search space, Katib's metric lines, the ASHA and
median stopping rules, and the TrainingJob a trial becomes (queue, priority, substitution)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from muster.api import registry
from muster.api.experiment_plan import AshaOptions, MedianOptions
from muster.controllers.experiment.metrics import LineParser
from muster.controllers.experiment.space import Parameter, grid_points, parameters_of, sample
from muster.controllers.experiment.stopping import (
    RungEntry,
    asha_decision,
    median_stop,
    next_milestone,
    promotable,
    rung_cut,
)
from muster.controllers.experiment.trials import trial_job
from tests.controllers.experiments import experiment


def test_a_trial_s_values_depend_on_the_seed_and_index_only():
    params = [
        Parameter("lr", "double", low=1e-5, high=1e-1, distribution="logUniform"),
        Parameter("layers", "int", low=1, high=8, step=2),
        Parameter("opt", "categorical", choices=("sgd", "adam")),
    ]
    draws = [sample(params, seed=7, index=i) for i in range(200)]
    assert draws == [sample(params, seed=7, index=i) for i in range(200)]
    assert draws != [sample(params, seed=8, index=i) for i in range(200)]
    lrs = [float(d["lr"]) for d in draws]
    assert all(1e-5 <= v <= 1e-1 for v in lrs)
    # Log scale: about as many draws in each decade (uniform would put ~90% in the last one).
    below = sum(1 for v in lrs if v < 1e-3)
    assert 60 <= below <= 140
    assert {d["layers"] for d in draws} == {"1", "3", "5", "7"}
    assert {d["opt"] for d in draws} == {"sgd", "adam"}


def test_the_grid_is_every_combination_once_in_a_seeded_order():
    spec = experiment(algorithm="grid")["spec"]
    spec["parameters"] = [
        {
            "name": "lr",
            "parameterType": "double",
            "feasibleSpace": {"min": "0.1", "max": "0.3", "step": "0.1"},
        },
        {"name": "act", "parameterType": "discrete", "feasibleSpace": {"list": ["1", "2"]}},
    ]
    params = parameters_of(spec)
    points = grid_points(params, seed=1)
    assert sorted((p["lr"], p["act"]) for p in points) == [
        (lr, act) for lr in ("0.1", "0.2", "0.3") for act in ("1", "2")
    ]
    assert points == grid_points(params, seed=1)


def test_katib_s_stdout_format_and_json_lines():
    parser = LineParser(["loss", "accuracy"])
    assert parser.parse("epoch 3: loss=0.25 accuracy = 9.1e-1 lr=0.01") == [
        ("loss", 0.25, None),
        ("accuracy", 0.91, None),
    ]
    stamped = parser.parse("2026-01-02T03:04:05Z loss=1.5")
    assert stamped[0][:2] == ("loss", 1.5) and stamped[0][2] is not None
    assert parser.parse("nothing to see; loss=nan?") == []
    as_json = LineParser(["loss"], json_lines=True)
    assert as_json.parse('{"loss": "0.5", "timestamp": 12.0}') == [("loss", 0.5, 12.0)]
    assert as_json.parse("not json") == []


def test_asha_keeps_the_top_third_of_a_rung_and_promotes_the_best_paused_trial():
    assert rung_cut([(0.5, 0), (0.2, 1), (0.9, 2)], eta=3, maximize=False) == {1}
    assert rung_cut([(0.5, 0), (0.2, 1)], eta=3, maximize=False) == set()  # too few to keep any
    entries = [RungEntry(f"t{i}", i, 0, 0, v, paused=True) for i, v in enumerate([0.5, 0.9])]
    # The third arrival at rung 0 goes on only if it is the best of the three.
    assert asha_decision(entries, 2, 0, 0, 0.1, eta=3, maximize=False)
    assert not asha_decision(entries, 2, 0, 0, 0.7, eta=3, maximize=False)
    assert asha_decision(entries, 2, 0, 0, 0.95, eta=3, maximize=True)
    # Once three values are recorded, the paused one in the top third is promoted.
    recorded = [*entries, RungEntry("t2", 2, 0, 0, 0.7, paused=True)]
    assert promotable(recorded, eta=3, maximize=False) == recorded[0]
    assert promotable(recorded[:2], eta=3, maximize=False) is None
    # A higher rung's candidate goes first.
    higher = [RungEntry(f"u{i}", 10 + i, 0, 1, 5.0 + i, paused=i == 0) for i in range(3)]
    assert promotable(recorded + higher, eta=3, maximize=False) == higher[0]


def test_asha_rungs_are_geometric_below_the_full_budget():
    options = AshaOptions(min_resource=1, max_resource=27, reduction_factor=3, brackets=2, resource_name=None)
    assert options.milestones(0) == [1, 3, 9]
    assert options.milestones(1) == [3, 9]
    assert next_milestone(options, 0, 0) == (0, 1)
    assert next_milestone(options, 0, 2) == (2, 9)
    assert next_milestone(options, 0, 3) is None


def test_median_stopping_compares_with_the_completed_trials_running_averages():
    done = [{1: 1.0, 2: 0.8, 3: 0.6}, {1: 0.9, 2: 0.7, 3: 0.5}, {1: 1.2, 2: 1.0, 3: 0.9}]
    options = MedianOptions(min_trials_required=3, start_step=2)
    assert median_stop({1: 1.5, 2: 1.4}, done, options, maximize=False) is not None
    assert median_stop({1: 0.7, 2: 0.6}, done, options, maximize=False) is None
    assert median_stop({1: 1.5}, done, options, maximize=False) is None  # before start_step
    assert median_stop({1: 1.5, 2: 1.4}, done[:2], options, maximize=False) is None  # too few done
    assert median_stop({1: 0.1, 2: 0.2}, done, options, maximize=True) is not None


def test_a_trial_s_job_carries_the_experiment_s_queue_and_priority_and_its_values(tmp_path: Path):
    doc = experiment(queueName="research", priorityClassName="low")
    containers = doc["spec"]["trialTemplate"]["template"]["spec"]["containers"]
    containers[0]["env"] = [{"name": "LR", "value": "${trialParameters.lr}"}]
    exp = registry.validate(doc).obj
    assert exp is not None
    exp["metadata"]["uid"] = "u-1"  # as stored
    trial = {
        "metadata": {"name": "search-3", "namespace": "default"},
        "spec": {
            "experiment": "search",
            "index": 3,
            "parameterAssignments": [{"name": "lr", "value": "0.01"}, {"name": "epochs", "value": "9"}],
        },
    }
    job = trial_job(exp, trial, tmp_path)
    assert job["spec"]["queueName"] == "research" and job["spec"]["priorityClassName"] == "low"
    assert job["metadata"]["labels"] == {"muster.dev/experiment": "search", "muster.dev/trial": "search-3"}
    (replica,) = job["spec"]["replicaSpecs"].values()
    container = replica["template"]["spec"]["containers"][0]
    assert container["command"][-1] == "--lr=0.01"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["LR"] == "0.01" and env["MUSTER_TRIAL_NAME"] == "search-3"
    assert env["MUSTER_METRICS_FILE"].startswith(str(tmp_path))


@pytest.mark.parametrize("value", ["1e-3", "0.05"])
def test_log_scale_values_stay_in_bounds(value: str):
    p = Parameter("lr", "double", low=float(value), high=0.1, distribution="logNormal")
    for i in range(50):
        v = float(sample([p], seed=0, index=i)["lr"])
        assert float(value) <= v <= 0.1 and not math.isnan(v)
