"""End to end: examples/kuberay/rayjob.yaml, a KubeRay RayJob, on ``muster up --fake-gpus`` (the
local runtime): its RayCluster is admitted as one gang and runs real ``ray start`` processes,
the entrypoint runs as the job's driver with the runtimeEnvYAML's env_vars (seen by a Ray task
too), ``muster logs rayjob/NAME`` shows its output, and shutdownAfterJobFinishes tears the
cluster down."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from muster.testing import skip_or_fail, wait_for
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kuberay" / "rayjob.yaml"


def test_the_example_rayjob_runs_on_its_own_cluster_and_tears_it_down(muster_home: Path) -> None:
    if not (Path(sys.executable).parent / "ray").exists():
        skip_or_fail("the ray extra is not installed (pip install -e '.[ray]')")
    with cluster(muster_home, gpus=2) as (_up, client):
        applied = run_cli(muster_home, "apply", "-f", str(EXAMPLE))
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
