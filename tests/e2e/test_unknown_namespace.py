"""End to end: on a single-user `muster up` (no authentication), a Kubeflow PyTorchJob applied
into a namespace nobody made creates it, gets its default LocalQueue and runs to the end
instead of waiting as Inadmissible."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.jobs import PYTHON, cluster, wait_condition

pytestmark = pytest.mark.slow

JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "hello", "namespace": "kubeflow"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch",
                                "image": "pytorch/pytorch",
                                "command": [PYTHON, "-c", "print(1)"],
                            }
                        ]
                    }
                },
            }
        }
    },
}


def test_a_job_in_a_namespace_nobody_made_runs(muster_home: Path) -> None:
    with cluster(muster_home, gpus=1) as (_up, client):
        (result,) = client.apply([JOB])
        assert any("namespace 'kubeflow' did not exist: created it" in w for w in result["warnings"])
        wait_condition(client, "TrainingJob", "hello", "Succeeded", timeout=60, namespace="kubeflow")
        queue = client.get("LocalQueue", "default", "kubeflow")
        assert queue["spec"]["clusterQueue"] == "default"
        events = client.list("Event", "kubeflow")["items"]
        assert not any(e.get("reason") == "Inadmissible" for e in events)
