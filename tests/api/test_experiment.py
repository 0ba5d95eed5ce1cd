"""The Experiment kind: its rules (search space, algorithms and their settings, the trial
template and its placeholders) and the errors that name the field and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from muster.api.registry import validate
from tests.api.helpers import errors_of
from tests.controllers.experiments import experiment


def _with(doc: dict[str, Any], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["spec"].update(spec)
    return out


def test_a_valid_experiment_is_stored_with_katib_s_strings_and_defaults():
    doc = experiment()
    doc["spec"]["parameters"][0]["feasibleSpace"] = {"min": 0.001, "max": 0.1}  # numbers, as YAML users write
    v = validate(doc)
    spec = v.obj["spec"]
    assert spec["parameters"][0]["feasibleSpace"] == {"min": "0.001", "max": "0.1"}
    assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
    assert v.warnings == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"algorithm": {"algorithmName": "cmaes"}},
            "spec.algorithm.algorithmName: CMA-ES is not offered by Muster, got 'cmaes'",
        ),
        ({"algorithm": {"algorithmName": "gridd"}}, "spec.algorithm.algorithmName: unknown algorithm"),
        (
            {"algorithm": {"algorithmName": "tpe", "algorithmSettings": [{"name": "gama", "value": "0.2"}]}},
            "spec.algorithm.algorithmSettings[0].name: unknown setting, got 'gama' (accepted: random_state",
        ),
        (
            {
                "algorithm": {
                    "algorithmName": "asha",
                    "algorithmSettings": [{"name": "max_resource", "value": "x"}],
                }
            },
            "spec.algorithm.algorithmSettings[0].value: max_resource must be an integer >= 1, got 'x'",
        ),
        ({"algorithm": {"algorithmName": "asha"}}, "asha needs max_resource"),
        ({"parallelTrialCount": 9}, "spec.parallelTrialCount: must be <= maxTrialCount (4), got 9"),
        (
            {"earlyStopping": {"algorithmName": "median"}},
            "spec.earlyStopping.algorithmName: unknown early-stopping algorithm, got 'median'",
        ),
    ],
)
def test_search_settings_are_checked(change, expected):
    errors = errors_of(_with(experiment(), **change))
    assert any(expected in e for e in errors), errors


def test_parameter_rules():
    doc = experiment()
    doc["spec"]["parameters"] = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.01"}},
        {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1.5", "max": "4"}},
        {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "a"], "min": "1"}},
        {"name": "lr", "parameterType": "discrete", "feasibleSpace": {"list": ["x"]}},
        {
            "name": "w",
            "parameterType": "double",
            "feasibleSpace": {"min": "0", "max": "1", "distribution": "logUniform"},
        },
    ]
    errors = errors_of(doc)
    for expected in (
        "spec.parameters[0].feasibleSpace.min: must be <= max (0.01), got '0.1'",
        "spec.parameters[1].feasibleSpace.min: must be an integer, got '1.5'",
        "spec.parameters[2].feasibleSpace.min: must not be set for a categorical parameter",
        "spec.parameters[2].feasibleSpace.list[1]: duplicate value, got 'a'",
        "spec.parameters[3].feasibleSpace.list[0]: must be a number, got 'x'",
        "spec.parameters[3].name: duplicate parameter name, got 'lr'",
        "spec.parameters[4].feasibleSpace.min: must be > 0 for a logUniform distribution, got '0'",
    ):
        assert any(expected in e for e in errors), (expected, errors)


def test_grid_needs_a_step_and_at_most_its_size_of_trials():
    doc = _with(experiment(), algorithm={"algorithmName": "grid"})
    doc["spec"]["parameters"][0]["feasibleSpace"].pop("step")
    assert any(
        "feasibleSpace.step: is required for a double parameter under grid" in e for e in errors_of(doc)
    )
    doc = _with(experiment(), algorithm={"algorithmName": "grid"}, maxTrialCount=10**6)
    assert any("spec.maxTrialCount: must be <= the number of grid points (2700)" in e for e in errors_of(doc))


def test_template_placeholders_and_the_job_are_checked():
    doc = experiment()
    container = doc["spec"]["trialTemplate"]["template"]["spec"]["containers"][0]
    container["command"].append("--momentum=${trialParameters.momentum}")
    container["resources"] = {"limits": {"nvidia.com/gpu": "-1"}}
    doc["spec"]["trialTemplate"]["trialParameters"] = [{"name": "rate", "reference": "lrr"}]
    errors = errors_of(doc)
    assert any(
        "spec.trialTemplate.template: ${trialParameters.momentum} names no trialParameter" in e
        for e in errors
    )
    assert any(
        "spec.trialTemplate.trialParameters[0].reference: names no parameter, got 'lrr'" in e for e in errors
    )
    assert any(e.startswith("spec.trialTemplate.template.spec.containers[0].resources") for e in errors), (
        errors
    )


def test_a_placeholder_in_a_number_field_takes_the_sample_value():
    doc = experiment()
    doc["spec"]["trialTemplate"] = {
        "trialParameters": [{"name": "workers", "reference": "epochs"}],
        "trainingJob": {
            "replicaSpecs": {
                "Worker": {
                    "replicas": "${trialParameters.workers}",
                    "template": {"spec": {"containers": [{"name": "main", "command": ["true"]}]}},
                }
            }
        },
    }
    validate(doc)
    doc["spec"]["trialTemplate"]["primaryContainerName"] = "trainer"
    assert any("spec.trialTemplate.primaryContainerName: names no container" in e for e in errors_of(doc))
    doc["spec"]["trialTemplate"]["template"] = {"spec": {"containers": []}}
    assert any("must set exactly one of trainingJob and template" in e for e in errors_of(doc))


def test_long_names_are_refused():
    doc = experiment(name="x" * 51)
    assert any("metadata.name: must be at most 50 characters" in e for e in errors_of(doc))
