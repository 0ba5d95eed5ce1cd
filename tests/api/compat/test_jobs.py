from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.registry import to_model, validate
from tests.api.helpers import errors_of

MANIFESTS = Path(__file__).parent.parent / "manifests"


def _load(name):
    return yaml.safe_load((MANIFESTS / name).read_text())


def test_full_pytorchjob_converts_field_for_field():
    doc = _load("pytorchjob-ddp.yaml")
    result = validate(doc)
    job = result.obj
    assert (job["apiVersion"], job["kind"]) == ("muster.dev/v1", "TrainingJob")
    assert job["metadata"]["namespace"] == "vision" and job["metadata"]["labels"]["app"] == "resnet"
    assert "status" not in job
    spec = job["spec"]
    assert spec["queueName"] == "team-vision"  # from the Kueue label
    assert spec["priorityClassName"] == "research-high"  # from the pod templates
    assert spec["nprocPerNode"] == "2"
    assert spec["runPolicy"] == {
        "backoffLimit": 3,
        "activeDeadlineSeconds": 86400,
        "ttlSecondsAfterFinished": 3600,
        "cleanPodPolicy": "Running",
        "suspend": False,
        "schedulingPolicy": {"minAvailable": 3},
    }
    master = spec["replicaSpecs"]["Master"]
    worker = spec["replicaSpecs"]["Worker"]
    assert (master["replicas"], worker["replicas"], worker["restartPolicy"]) == (1, 2, "OnFailure")
    pod = master["template"]["spec"]
    assert pod["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    assert pod["volumes"][1]["persistentVolumeClaim"] == {"claimName": "resnet-checkpoints"}
    assert pod["tolerations"][0] == {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "value": "",
        "effect": "NoSchedule",
    }
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    container = pod["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "8", "memory": "48Gi", "nvidia.com/gpu": "2"}
    assert container["env"][1]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
    kept = json.loads(job["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert kept == {"spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds": 600}
    assert result.warnings == [
        "spec.pytorchReplicaSpecs.Master.template.spec.imagePullSecrets: accepted but not honoured on every "
        "runtime: the local runtime runs commands on the host and pulls no images",
        "spec.pytorchReplicaSpecs.Master.template.spec.volumes[0].emptyDir.medium: accepted but not "
        "honoured on "
        "every runtime: the local runtime backs every emptyDir with a directory and shares the host's "
        "/dev/shm",
        "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0].emptyDir.medium: accepted but not "
        "honoured on "
        "every runtime: the local runtime backs every emptyDir with a directory and shares the host's "
        "/dev/shm",
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds: not supported by Muster; ignored (kept in "
        "metadata.annotations[muster.dev/ignored-fields])",
    ]
    # The converted object is a native one: validating it again changes nothing.
    again = validate(job)
    assert again.obj == job
    assert again.warnings == [w.replace("pytorchReplicaSpecs", "replicaSpecs") for w in result.warnings[:3]]
    assert to_model(job).to_dict() == job


def test_elastic_pytorchjob():
    result = validate(_load("pytorchjob-elastic.yaml"))
    spec = result.obj["spec"]
    assert list(spec["replicaSpecs"]) == ["Worker"]  # "worker" normalised as the operator does
    assert spec["nprocPerNode"] == "1"  # from the deprecated elasticPolicy.nProcPerNode
    assert spec["elasticPolicy"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "maxRestarts": 100,
        "rdzvBackend": "c10d",
        "rdzvId": "imagenet-run-1",
    }
    assert (spec["queueName"], spec["priorityClassName"]) == ("team-a", "batch-low")
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert sorted(kept) == ["spec.elasticPolicy.metrics", "spec.elasticPolicy.rdzvConf"]
    assert kept["spec.elasticPolicy.rdzvConf"] == [{"key": "timeout", "value": "900"}]
    paths = [w.split(": ")[0] for w in result.warnings]
    assert paths == [
        "spec.elasticPolicy.nProcPerNode",
        "spec.pytorchReplicaSpecs.worker.template.spec.containers[0].livenessProbe",
        "spec.pytorchReplicaSpecs.worker.template.spec.containers[0].securityContext",
        "spec.elasticPolicy.metrics",
        "spec.elasticPolicy.rdzvConf",
    ]


def test_pytorchjob_errors_name_the_paths_the_user_wrote():
    doc = _load("pytorchjob-ddp.yaml")
    bad = copy.deepcopy(doc)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 0
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "memory"
    ] = "64GG"
    assert [e.split(":")[0] for e in errors_of(bad)] == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory",
        "spec.pytorchReplicaSpecs.Worker.replicas",
    ]
    bad = copy.deepcopy(doc)
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert errors_of(bad) == ["spec.pytorchReplicaSpecs.Master.replicas: must be 1, got 2"]
    bad = copy.deepcopy(doc)
    bad["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "other"
    assert errors_of(bad) == [
        "spec.runPolicy.schedulingPolicy.queue: conflicts with metadata.labels[kueue.x-k8s.io/queue-name] "
        "('team-vision'), got 'other'"
    ]
    bad = copy.deepcopy(doc)
    bad["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    assert errors_of(bad) == [
        "spec.elasticPolicy.nProcPerNode: may not be set together with spec.nprocPerNode "
        "(nProcPerNode is deprecated: keep only spec.nprocPerNode)"
    ]
    assert errors_of({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}}) == [
        "spec: required field is missing"
    ]


def test_batch_job_becomes_a_worker_gang():
    doc = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "activeDeadlineSeconds": 600,
            "suspend": True,
            "completionMode": "Indexed",
            "podFailurePolicy": {"rules": []},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "priorityClassName": "low",
                    "containers": [
                        {
                            "name": "pi",
                            "image": "perl:5.34",
                            "command": ["perl", "-Mbignum=bpi", "-wle", "print bpi(20)"],
                        }
                    ],
                }
            },
        },
    }
    result = validate(doc)
    spec = result.obj["spec"]
    worker = spec["replicaSpecs"]["Worker"]
    assert (worker["replicas"], worker["restartPolicy"]) == (3, "OnFailure")
    assert "restartPolicy" not in worker["template"]["spec"]
    assert spec["runPolicy"] == {
        "backoffLimit": 6,
        "activeDeadlineSeconds": 600,
        "cleanPodPolicy": "Running",
        "suspend": True,
    }
    assert (spec["queueName"], spec["priorityClassName"]) == ("q", "low")
    kept = json.loads(result.obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert kept == {"spec.completionMode": "Indexed", "spec.podFailurePolicy": {"rules": []}}
    assert [w.split(":")[0] for w in result.warnings] == ["spec.completionMode", "spec.podFailurePolicy"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"completions": 10},
            "spec.completions: must be unset or equal parallelism (2), got 10 (Muster runs a Job as "
            "one gang of parallelism pods)",
        ),
        ({"parallelism": 0}, "spec.parallelism: must be >= 1, got 0"),
        ({"backoffLimit": -1}, "spec.backoffLimit: must be >= 0, got -1"),
        ({"template": None}, "spec.template: required field is missing"),
    ],
)
def test_batch_job_errors(change, expected):
    spec = {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "command": ["true"]}]}}}
    spec.update(change)
    if spec["template"] is None:
        del spec["template"]
    assert errors_of({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": spec}) == [
        expected
    ]


def _pod(**spec):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "labels": {"app": "x", "kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}], **spec},
    }


def test_pod_becomes_a_one_pod_job_that_runs_to_completion():
    result = validate(_pod(restartPolicy="Never", activeDeadlineSeconds=60, priorityClassName="low"))
    job = result.obj
    assert (job["kind"], job["metadata"]["namespace"]) == ("TrainingJob", "ml")
    spec = job["spec"]
    worker = spec["replicaSpecs"]["Worker"]
    assert (worker["replicas"], worker["restartPolicy"]) == (1, "OnFailure")
    assert worker["template"]["metadata"]["labels"]["app"] == "x"
    assert worker["template"]["spec"]["containers"][0]["command"] == ["true"]
    assert "restartPolicy" not in worker["template"]["spec"]
    assert spec["runPolicy"]["backoffLimit"] == 0 and spec["runPolicy"]["activeDeadlineSeconds"] == 60
    assert (spec["queueName"], spec["priorityClassName"]) == ("q", "low")
    assert result.warnings == []


@pytest.mark.parametrize(
    ("policy", "backoff", "warned"), [(None, 6, False), ("OnFailure", 6, False), ("Always", 6, True)]
)
def test_pod_restart_policy(policy, backoff, warned):
    result = validate(_pod(**({"restartPolicy": policy} if policy else {})))
    assert result.obj["spec"]["runPolicy"]["backoffLimit"] == backoff
    assert [w.split(":")[0] for w in result.warnings] == (["spec.restartPolicy"] if warned else [])


def test_pod_errors_name_the_pods_own_paths():
    doc = _pod(restartPolicy="Sometimes")
    assert errors_of(doc) == ["spec.restartPolicy: must be one of Never, OnFailure, Always, got 'Sometimes'"]
    doc = _pod()
    doc["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "half"}}
    [error] = errors_of(doc)
    assert error.startswith("spec.containers[0].resources.limits")
