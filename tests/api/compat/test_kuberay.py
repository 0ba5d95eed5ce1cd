"""KubeRay's RayCluster and RayJob (ray.io/v1 and v1alpha1): converted to Muster's own kinds,
with a warning per field not honoured and errors naming the paths the user wrote; and the
``ray start`` commands a cluster's pods run."""

from __future__ import annotations

import json

import pytest
import yaml

from muster.api.compat import IGNORED_FIELDS_ANNOTATION
from muster.api.errors import InvalidObject
from muster.api.registry import lookup, validate
from muster.controllers.ray.pods import ClusterPorts, cluster_workload, ray_start_command

# Written after KubeRay's documented samples (a head and one small worker group).
RAYCLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: raycluster-kuberay
  labels: {kueue.x-k8s.io/queue-name: team-a}
spec:
  rayVersion: "2.9.0"
  enableInTreeAutoscaling: true
  headGroupSpec:
    serviceType: ClusterIP
    rayStartParams:
      dashboard-host: "0.0.0.0"
      num-cpus: 1
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.9.0
          ports:
          - {containerPort: 6379, name: gcs-server}
          - {containerPort: 8265, name: dashboard}
          resources:
            limits: {cpu: "1", memory: 2G}
            requests: {cpu: "1", memory: 2G}
  workerGroupSpecs:
  - groupName: workergroup
    replicas: 2
    minReplicas: 1
    maxReplicas: 5
    scaleStrategy: {workersToDelete: []}
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.9.0
          resources:
            limits: {cpu: "1", memory: 1G, nvidia.com/gpu: 1}
"""

RAYJOB = """
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: rayjob-sample
spec:
  entrypoint: python /home/ray/samples/sample_code.py
  runtimeEnvYAML: |
    pip:
      - requests==2.26.0
    env_vars:
      counter_name: "test_counter"
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: 10
  submissionMode: K8sJobMode
  entrypointNumCpus: 1
  rayClusterSpec:
    rayVersion: "2.9.0"
    headGroupSpec:
      rayStartParams: {dashboard-host: "0.0.0.0"}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.9.0
            resources: {limits: {cpu: "1"}}
    workerGroupSpecs:
    - groupName: small-group
      replicas: 1
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-worker
            image: rayproject/ray:2.9.0
            resources: {limits: {cpu: "1"}}
"""


def _doc(text: str, **changes: object) -> dict:
    doc = yaml.safe_load(text)
    doc.update(changes)
    return doc


def _errors(doc: dict) -> dict[str, str]:
    with pytest.raises(InvalidObject) as info:
        validate(doc)
    return {e.path: e.rule for e in info.value.errors}


@pytest.mark.parametrize("version", ["ray.io/v1", "ray.io/v1alpha1"])
def test_a_raycluster_converts_with_a_warning_per_field_not_honoured(version: str) -> None:
    result = validate(_doc(RAYCLUSTER, apiVersion=version))
    obj = result.obj
    assert obj["apiVersion"] == "muster.dev/v1" and obj["kind"] == "RayCluster"
    spec = obj["spec"]
    assert spec["queueName"] == "team-a"
    assert spec["headGroupSpec"]["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-cpus": "1"}
    assert spec["workerGroupSpecs"][0]["replicas"] == 2
    warnings = "\n".join(result.warnings)
    assert "spec.enableInTreeAutoscaling: not honoured" in warnings
    assert "spec.workerGroupSpecs[0]: minReplicas/maxReplicas: 2 pod(s) are admitted" in warnings
    assert "spec.workerGroupSpecs[0].scaleStrategy" in warnings
    assert "spec.headGroupSpec.serviceType" not in warnings  # recorded, harmless
    # Muster sets the Ray container's command: no "command not set" warning for it.
    assert "containers[0].command" not in warnings
    kept = json.loads(obj["metadata"]["annotations"][IGNORED_FIELDS_ANNOTATION])
    assert kept == {"spec.workerGroupSpecs[0].scaleStrategy": {"workersToDelete": []}}


def test_the_kinds_are_served_under_their_names() -> None:
    assert lookup("rayclusters").kind == "RayCluster" and lookup("rayjob").kind == "RayJob"


def test_raycluster_errors_name_the_paths_the_user_wrote() -> None:
    doc = _doc(RAYCLUSTER)
    group = doc["spec"]["workerGroupSpecs"][0]
    group.update(replicas=7, minReplicas=6)
    doc["spec"]["workerGroupSpecs"].append(dict(group, groupName="workergroup"))
    errors = _errors(doc)
    assert errors["spec.workerGroupSpecs[0].replicas"].startswith("must be <= maxReplicas (5)")
    assert errors["spec.workerGroupSpecs[0].minReplicas"].startswith("must be <= maxReplicas (5)")
    assert errors["spec.workerGroupSpecs[1].groupName"] == "duplicate group"
    doc = _doc(RAYCLUSTER)
    doc["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 4
    assert "multi-host" in _errors(doc)["spec.workerGroupSpecs[0].numOfHosts"]


def test_a_rayjob_converts_and_warns_for_what_the_local_runtime_cannot_honour() -> None:
    result = validate(_doc(RAYJOB))
    spec = result.obj["spec"]
    assert result.obj["kind"] == "RayJob"
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] == 10
    assert spec["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] == "small-group"
    warnings = "\n".join(result.warnings)
    assert "spec.runtimeEnvYAML.pip: not honoured" in warnings
    assert "spec.runtimeEnvYAML.env_vars" not in warnings
    assert "spec.entrypointNumCpus: not honoured" in warnings
    assert "submissionMode" not in warnings


def test_rayjob_rules() -> None:
    both = _doc(RAYJOB)
    both["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert "exactly one of rayClusterSpec and clusterSelector" in _errors(both)["spec"]
    neither = _doc(RAYJOB)
    del neither["spec"]["rayClusterSpec"]
    assert "exactly one" in _errors(neither)["spec"]
    selector = _doc(RAYJOB)
    del selector["spec"]["rayClusterSpec"]
    selector["spec"]["clusterSelector"] = {"ray.io/cluster": "shared"}
    assert validate(selector).obj["spec"]["clusterSelector"] == {"ray.io/cluster": "shared"}
    bad_env = _doc(RAYJOB)
    bad_env["spec"]["runtimeEnvYAML"] = "- a list"
    assert "must be a YAML mapping" in _errors(bad_env)["spec.runtimeEnvYAML"]
    interactive = _doc(RAYJOB)
    interactive["spec"]["submissionMode"] = "InteractiveMode"
    assert "K8sJobMode, HTTPMode" in _errors(interactive)["spec.submissionMode"]


def test_ray_start_commands_come_from_ray_start_params_and_the_containers_resources() -> None:
    cluster = validate(_doc(RAYCLUSTER)).obj
    spec = cluster["spec"]
    ports = ClusterPorts(6380, 8266)
    head = ray_start_command(
        "ray",
        spec["headGroupSpec"]["rayStartParams"],
        head=True,
        head_address="10.0.0.1",
        ports=ports,
        container=spec["headGroupSpec"]["template"]["spec"]["containers"][0],
        temp_dir="/tmp/r",
    )
    assert head[:2] == ["ray", "start"] and head[-1] == "--block"
    assert {"--head", "--port=6380", "--dashboard-port=8266", "--dashboard-host=0.0.0.0"} <= set(head)
    assert "--num-cpus=1" in head and "--memory=2000000000" in head and "--temp-dir=/tmp/r" in head
    worker = ray_start_command(
        "ray",
        {"block": "true", "num-cpus": "3"},
        head=False,
        head_address="10.0.0.1",
        ports=ports,
        container=spec["workerGroupSpecs"][0]["template"]["spec"]["containers"][0],
        temp_dir="/tmp/r",
    )
    assert "--address=10.0.0.1:6380" in worker and "--num-gpus=1" in worker
    assert "--num-cpus=3" in worker and "--num-cpus=1" not in worker  # rayStartParams win
    assert worker.count("--block") == 1 and not any(a.startswith("--temp-dir") for a in worker)


def test_a_cluster_is_one_gang_of_the_head_and_every_groups_replicas() -> None:
    cluster = validate(_doc(RAYCLUSTER)).obj
    cluster["metadata"]["uid"] = "u1"
    wl = cluster_workload(
        cluster, queue="team-a", priority=0, priority_class=None, ports=ClusterPorts(1, 2), token="t"
    )
    sets = {s["name"]: s for s in wl["spec"]["podSets"]}
    assert sets["head"]["count"] == 1 and sets["workergroup"]["count"] == 2
    assert sets["workergroup"]["requests"]["nvidia.com/gpu"] == "1"
    assert wl["spec"]["queueName"] == "team-a" and "minCount" not in sets["workergroup"]
