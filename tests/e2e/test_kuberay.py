"""End to end: a KubeRay RayJob on ``muster up --fake-gpus`` (the local runtime): its RayCluster
is admitted as one gang and runs real ``ray start`` processes, the entrypoint runs as the job's
driver with the runtimeEnvYAML's env_vars (seen by a Ray task too), ``muster logs rayjob/NAME``
shows its output, and shutdownAfterJobFinishes tears the cluster down."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from muster.testing import skip_or_fail, wait_for
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ENTRYPOINT = (
    'python -c "import os, ray; ray.init(); print(ray.cluster_resources()); '
    "f = ray.remote(lambda: os.environ.get('GREETING')); print('task sees', ray.get(f.remote()))\""
)

RAYJOB = f"""
apiVersion: ray.io/v1
kind: RayJob
metadata:
  name: hello
spec:
  entrypoint: {json.dumps(ENTRYPOINT)}
  runtimeEnvYAML: |
    env_vars:
      GREETING: bonjour
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: 0
  rayClusterSpec:
    headGroupSpec:
      rayStartParams: {{num-cpus: "1"}}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.9.0
            resources: {{limits: {{cpu: "1", memory: 1Gi}}}}
    workerGroupSpecs:
    - groupName: small
      replicas: 1
      minReplicas: 1
      maxReplicas: 3
      rayStartParams: {{}}
      template:
        spec:
          containers:
          - name: ray-worker
            image: rayproject/ray:2.9.0
            resources: {{limits: {{cpu: "1", memory: 1Gi, nvidia.com/gpu: 1}}}}
"""


def test_a_rayjob_runs_on_its_own_cluster_and_tears_it_down(muster_home: Path, tmp_path: Path) -> None:
    if not (Path(sys.executable).parent / "ray").exists():
        skip_or_fail("the ray extra is not installed (pip install -e '.[ray]')")
    (tmp_path / "rayjob.yaml").write_text(RAYJOB)
    with cluster(muster_home, gpus=2) as (_up, client):
        applied = run_cli(muster_home, "apply", "-f", str(tmp_path / "rayjob.yaml"))
        assert applied.returncode == 0, applied.stderr
        assert "scaling between them on the Ray autoscaler's demand is not done" in applied.stderr

        def done() -> dict | None:
            status = client.get("RayJob", "hello", "default").get("status") or {}
            return status if status.get("jobDeploymentStatus") in ("Complete", "Failed") else None

        status = wait_for(done, timeout=180, what="the RayJob to finish")
        logs = run_cli(muster_home, "logs", "rayjob/hello").stdout
        assert status["jobStatus"] == "SUCCEEDED", (status, logs)
        assert status["rayClusterName"] == "hello-raycluster" and status["succeeded"] == 1
        # the head's and the worker's CPU (each ray start got num-cpus 1), the worker's GPU
        assert "'CPU': 2.0" in logs and "'GPU': 1.0" in logs
        assert "task sees bonjour" in logs
        # shutdownAfterJobFinishes: the cluster, its Workload and its ray start pods are gone
        wait_for(
            lambda: not client.list("Pod", "default", "ray.io/cluster=hello-raycluster")["items"],
            timeout=60,
            what="the cluster's pods to end",
        )
        assert client.list("RayCluster", "default")["items"] == []
        events = run_cli(muster_home, "get", "events").stdout
        assert "ClusterDeleted" in events and "Ready" in events
