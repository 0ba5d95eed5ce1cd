"""Katib's kubeflow.org/v1beta1 Experiment, accepted as written: converted to a Muster
Experiment, with a warning for each field Muster cannot honour."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from muster.api.registry import validate
from tests.api.helpers import errors_of

KATIB = yaml.safe_load((Path(__file__).parents[1] / "manifests" / "katib-experiment.yaml").read_text())


def test_the_reference_experiment_converts_with_a_warning_per_unhonoured_field():
    v = validate(KATIB)
    exp = v.obj
    assert (exp["apiVersion"], exp["kind"]) == ("muster.dev/v1", "Experiment")
    template = exp["spec"]["trialTemplate"]
    worker = template["trainingJob"]["replicaSpecs"]["Worker"]
    assert worker["replicas"] == 1 and template["trainingJob"]["runPolicy"]["backoffLimit"] == 6
    assert worker["template"]["spec"]["containers"][0]["command"][2] == "--lr=${trialParameters.learningRate}"
    assert v.warnings == [
        "spec.trialTemplate.successCondition: not supported by Muster; ignored "
        "(kept in metadata.annotations[muster.dev/ignored-fields])"
    ]


def test_hyperband_medianstop_and_kueue_labels():
    doc = copy.deepcopy(KATIB)
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    doc["spec"]["algorithm"] = {
        "algorithmName": "hyperband",
        "algorithmSettings": [{"name": "r_l", "value": "9"}, {"name": "resource_name", "value": "epochs"}],
    }
    doc["spec"]["parameters"].append(
        {"name": "epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "9"}}
    )
    doc["spec"]["earlyStopping"] = {"algorithmName": "medianstop"}
    v = validate(doc)
    assert v.obj["spec"]["queueName"] == "team-a"
    joined = " | ".join(v.warnings)
    assert "spec.algorithm.algorithmName: hyperband runs asynchronously (ASHA brackets)" in joined
    assert "spec.earlyStopping.algorithmName: medianstop compares" in joined


def test_what_cannot_run_is_refused_naming_the_path():
    doc = copy.deepcopy(KATIB)
    doc["spec"]["trialTemplate"].pop("trialSpec")
    doc["spec"]["trialTemplate"]["configMap"] = {"configMapName": "t", "templatePath": "x"}
    assert errors_of(doc) == [
        "spec.trialTemplate.configMap: not supported: Muster does not read ConfigMaps "
        "(inline the template as trialTemplate.trialSpec)"
    ]
    doc = copy.deepcopy(KATIB)
    doc["spec"]["trialTemplate"]["trialSpec"]["kind"] = "TFJob"
    doc["spec"]["trialTemplate"]["trialSpec"]["apiVersion"] = "kubeflow.org/v1"
    assert errors_of(doc)[0].startswith(
        "spec.trialTemplate.trialSpec.kind: kubeflow.org/v1 TFJob is not supported"
    )
    doc = copy.deepcopy(KATIB)
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["completions"] = 3
    assert errors_of(doc)[0].startswith(
        "spec.trialTemplate.trialSpec.spec.completions: must be unset or equal"
    )
    doc = copy.deepcopy(KATIB)
    doc["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "TensorFlowEvent"}}
    assert errors_of(doc)[0].startswith("spec.metricsCollectorSpec.collector.kind")


def test_a_bad_field_in_the_trial_spec_is_named_as_written():
    doc = copy.deepcopy(KATIB)
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "x"}
    }
    errors = errors_of(doc)
    assert errors[0].startswith(
        "spec.trialTemplate.trialSpec.spec.template.spec.containers[0].resources.limits"
    ), errors
