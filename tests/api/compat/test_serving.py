"""InferenceService: native validation (replica bounds, traffic percent, strategy, port, model
names) and the KServe and KubeAI manifests converted with a warning per field not honoured."""

from __future__ import annotations

import json

import pytest

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.errors import InvalidObject
from muster.api.registry import lookup, validate

CONTAINER = {
    "name": "server",
    "command": ["python3", "-m", "muster.serving.model_server"],
    "args": ["--port", "$(PORT)"],
}


def native(**spec) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": "llm"},
        "spec": {"predictor": {"containers": [dict(CONTAINER)]}, **spec},
    }


def errors(doc: dict) -> dict[str, str]:
    with pytest.raises(InvalidObject) as info:
        validate(doc)
    return {e.path: e.rule for e in info.value.errors}


def test_the_kind_is_served_under_its_names():
    assert lookup("isvc").kind == lookup("inferenceservices").kind == "InferenceService"
    obj = validate(native()).obj
    assert obj["metadata"]["namespace"] == "default"
    assert obj["spec"]["minReplicas"] == 1 and obj["spec"]["loadBalancing"]["strategy"] == "PrefixLoad"


@pytest.mark.parametrize(
    ("spec", "path", "rule"),
    [
        ({"minReplicas": 3, "maxReplicas": 2}, "spec.maxReplicas", "must be >= minReplicas (3)"),
        ({"minReplicas": -1}, "spec.minReplicas", "must be >= 0"),
        ({"maxReplicas": 0}, "spec.maxReplicas", "must be >= 1"),
        ({"canaryTrafficPercent": 101}, "spec.canaryTrafficPercent", "must be <= 100"),
        ({"loadBalancing": {"strategy": "Random"}}, "spec.loadBalancing.strategy", "must be one of"),
        ({"scaleMetric": "cpu"}, "spec.scaleMetric", "must be one of"),
        ({"modelNames": ["a", "a"]}, "spec.modelNames[1]", "duplicate model name"),
        ({"modelNames": ["has space"]}, "spec.modelNames[0]", "must be 1-256"),
    ],
)
def test_bad_specs_name_the_field_and_the_rule(spec, path, rule):
    found = errors(native(**spec))
    assert path in found and found[path].startswith(rule), found


def test_bad_predictors_name_the_field():
    doc = native()
    doc["spec"]["predictor"]["port"] = 70000
    assert "spec.predictor.port" in errors(doc)
    doc = native()
    doc["spec"]["predictor"]["readinessPath"] = "health"
    assert errors(doc)["spec.predictor.readinessPath"] == "must start with '/'"
    doc = native()
    doc["spec"]["predictor"]["nodeName"] = "n1"
    assert "spec.predictor.nodeName" in errors(doc)


def test_a_fixed_port_is_warned_about():
    doc = native()
    doc["spec"]["predictor"]["containers"][0]["args"] = ["--port", "8080"]
    warnings = validate(doc).warnings
    assert any("spec.predictor.containers[0]" in w and "$(PORT)" in w for w in warnings)


KSERVE = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {
        "name": "sk",
        "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        "annotations": {"autoscaling.knative.dev/window": "2m", "autoscaling.knative.dev/target": "5"},
    },
    "spec": {
        "predictor": {
            "minReplicas": 0,
            "maxReplicas": 4,
            "scaleMetric": "rps",
            "containerConcurrency": 8,
            "canaryTrafficPercent": 10,
            "timeout": 30,
            "priorityClassName": "serving",
            "logger": {"mode": "all"},
            "containers": [
                {
                    **CONTAINER,
                    "ports": [{"containerPort": 9000}],
                    "readinessProbe": {
                        "httpGet": {"path": "/v2/health/ready", "port": 9000},
                        "periodSeconds": 5,
                    },
                }
            ],
        },
        "transformer": {"containers": [{"name": "t", "image": "x"}]},
    },
}


def test_a_kserve_inferenceservice_converts_field_for_field():
    result = validate(KSERVE)
    spec = result.obj["spec"]
    assert spec["minReplicas"] == 0 and spec["maxReplicas"] == 4
    assert spec["scaleMetric"] == "rps" and spec["scaleTarget"] == 5.0
    assert spec["containerConcurrency"] == 8 and spec["canaryTrafficPercent"] == 10
    assert spec["timeoutSeconds"] == 30 and spec["stableWindowSeconds"] == 120
    assert spec["priorityClassName"] == "serving" and spec["queueName"] == "team-a"
    assert spec["predictor"]["port"] == 9000 and spec["predictor"]["readinessPath"] == "/v2/health/ready"
    assert "readinessProbe" not in spec["predictor"]["containers"][0]
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert set(kept) == {
        "spec.transformer",
        "spec.predictor.logger",
        "spec.predictor.containers[0].readinessProbe",
    }
    assert sum(1 for w in result.warnings if "not supported by Muster" in w) == 3


def test_kserve_model_specs_and_unlimited_replicas_convert_with_warnings():
    doc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "hf"},
        "spec": {
            "predictor": {
                "maxReplicas": 0,
                "model": {
                    "modelFormat": {"name": "huggingface"},
                    "storageUri": "hf://org/model",
                    "args": ["--x"],
                },
            }
        },
    }
    result = validate(doc)
    container = result.obj["spec"]["predictor"]["containers"][0]
    assert container["command"][-1] == "vllm.entrypoints.openai.api_server"
    assert "--model=org/model" in container["args"] and "--port=$(PORT)" in container["args"]
    assert "maxReplicas" not in result.obj["spec"]
    assert any(
        w.startswith("spec.predictor.maxReplicas: 0 (unlimited) is not honoured") for w in result.warnings
    )
    bad = json.loads(json.dumps(doc))
    bad["metadata"]["annotations"] = {"autoscaling.knative.dev/window": "soon"}
    with pytest.raises(InvalidObject) as info:
        validate(bad)
    assert info.value.errors[0].path == "metadata.annotations[autoscaling.knative.dev/window]"


KUBEAI = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "metadata": {"name": "qwen"},
    "spec": {
        "features": ["TextGeneration"],
        "url": "hf://Qwen/Qwen2-0.5B",
        "engine": "VLLM",
        "resourceProfile": "nvidia-gpu-l4:2",
        "maxReplicas": 3,
        "targetRequests": 32,
        "args": ["--max-model-len=2048"],
        "env": {"HF_HOME": "/cache"},
        "cacheProfile": "fast",
        "loadBalancing": {"strategy": "PrefixHash", "prefixHash": {"meanLoadFactor": 150}},
    },
}


def test_a_kubeai_model_converts_with_kubeai_defaults():
    result = validate(KUBEAI)
    spec = result.obj["spec"]
    assert spec["minReplicas"] == 0 and spec["maxReplicas"] == 3  # KubeAI's minReplicas default is 0
    assert spec["scaleTarget"] == 32 and spec["targetUtilizationPercentage"] == 100
    assert spec["scaleDownDelaySeconds"] == 30
    assert spec["loadBalancing"]["strategy"] == "PrefixHash"
    assert spec["loadBalancing"]["prefixHash"]["meanLoadFactor"] == 150
    container = spec["predictor"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "--model=Qwen/Qwen2-0.5B" in container["args"] and container["args"][-1] == "--max-model-len=2048"
    assert {"name": "HF_HOME", "value": "/cache"} in container["env"]
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert set(kept) == {"spec.features", "spec.cacheProfile"}


def test_kubeai_pvc_urls_mount_the_claim_and_bad_models_are_rejected():
    doc = json.loads(json.dumps(KUBEAI))
    doc["spec"]["url"] = "pvc://models/qwen"
    doc["spec"]["engine"] = "Infinity"
    pred = validate(doc).obj["spec"]["predictor"]
    assert pred["volumes"][0]["persistentVolumeClaim"]["claimName"] == "models"
    assert "--model-id=/model/qwen" in pred["containers"][0]["args"]
    doc["spec"]["engine"] = "Triton"
    assert errors(doc)["spec.engine"].startswith("must be one of")
    doc["spec"]["engine"] = "VLLM"
    doc["spec"]["resourceProfile"] = "gpu:many"
    assert errors(doc)["spec.resourceProfile"] == "must be <profile>:<count>"
    del doc["spec"]["url"]
    assert errors(doc)["spec.url"] == "required field is missing"
    no_max = json.loads(json.dumps(KUBEAI))
    del no_max["spec"]["maxReplicas"]
    assert any(w.startswith("spec.maxReplicas: unset") for w in validate(no_max).warnings)
