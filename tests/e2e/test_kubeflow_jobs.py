"""End to end: a Kubeflow TFJob applied as written runs as processes with TF_CONFIG, its
replicas' `python` the server's own virtual environment; a job whose container has no command
is warned at apply and explained by `muster why`, both naming the image."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.jobs import REPO, cluster, pod_log, wait_condition

pytestmark = pytest.mark.slow

PRINT = "import json, os, sys; print(json.dumps({'tf': os.environ['TF_CONFIG'], 'prefix': sys.prefix}))"


# The job succeeds when its chief does, and its workers' pods are then stopped (Kubeflow's
# rule): the chief waits, up to a minute, for both workers' marks, so that every
# replica has printed before the job ends (the marks go to the directory in $MARKS).
CHIEF_WAITS = (
    "import glob, os, time; deadline = time.time() + 60\n"
    "while len(glob.glob(os.path.join(os.environ['MARKS'], 'worker-*'))) < 2 and time.time() < deadline:"
    " time.sleep(0.05)"
)
WORKER_MARKS = (
    "import json, os; t = json.loads(os.environ['TF_CONFIG'])['task'];"
    " open(os.path.join(os.environ['MARKS'], f\"worker-{t['index']}\"), 'w').close()"
)


def _replica(count: int, then: str, marks: Path) -> dict:
    # `python` as a user writes it: the server's environment's (docs/runtime-local.md)
    container = {
        "name": "tensorflow",
        "image": "tensorflow/tensorflow:2.15.0",
        "command": ["python", "-c", f"{PRINT}\n{then}"],
        "env": [{"name": "MARKS", "value": str(marks)}],
    }
    return {"replicas": count, "template": {"spec": {"containers": [container]}}}


def _tfjob(marks: Path) -> dict:
    marks.mkdir(parents=True, exist_ok=True)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist"},
        "spec": {
            "tfReplicaSpecs": {
                "Chief": _replica(1, CHIEF_WAITS, marks),
                "Worker": _replica(2, WORKER_MARKS, marks),
            }
        },
    }


IMAGE = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
# Relies on its image's entrypoint, as manifests written for Kubernetes do.
NO_COMMAND = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "entry"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 1,
                "template": {
                    "spec": {"containers": [{"name": "pytorch", "image": IMAGE, "args": ["train.py"]}]}
                },
            }
        }
    },
}


def test_a_tfjob_runs_with_tf_config_and_a_job_without_command_is_explained(muster_home: Path) -> None:
    examples = [
        yaml.safe_load((REPO / "examples" / f"kubeflow-{k}.yaml").read_text()) for k in ("tfjob", "mpijob")
    ]
    with cluster(muster_home, gpus=1) as (up, client):
        tf_result, entry_result, *_ = client.apply(
            [_tfjob(muster_home.parent / "marks"), NO_COMMAND, *examples]
        )
        assert (tf_result["kind"], tf_result["name"]) == ("TrainingJob", "mnist")
        (warning,) = [w for w in entry_result["warnings"] if ".command" in w]
        assert warning.startswith(
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].command: not set: on Kubernetes the "
            f"entrypoint of image '{IMAGE}' runs"
        )
        wait_condition(client, "TrainingJob", "mnist", "Succeeded", timeout=60)
        printed = {
            pod: json.loads(pod_log(up.home, pod, "tensorflow"))
            for pod in ("mnist-chief-0", "mnist-worker-0", "mnist-worker-1")
        }
        configs = {pod: json.loads(p["tf"]) for pod, p in printed.items()}
        cluster_spec = configs["mnist-chief-0"]["cluster"]
        assert all(c["cluster"] == cluster_spec for c in configs.values())
        assert sorted(cluster_spec) == ["chief", "worker"] and len(cluster_spec["worker"]) == 2
        assert len({a for addrs in cluster_spec.values() for a in addrs}) == 3  # a port each
        assert configs["mnist-worker-1"]["task"] == {"type": "worker", "index": 1}
        assert configs["mnist-chief-0"]["environment"] == "cloud"
        # The replicas' `python` is this test's virtual environment (the server's), not the system's.
        assert {p["prefix"] for p in printed.values()} == {sys.prefix}

        # The examples run as written.
        wait_condition(client, "TrainingJob", "tf-hello", "Succeeded", timeout=60)
        # The chief's log: the job succeeds when the chief does, which may be before a worker
        # has printed anything (its log was read empty once).
        tf_config = json.loads(pod_log(up.home, "tf-hello-chief-0", "tensorflow").removeprefix("TF_CONFIG="))
        assert tf_config["task"] == {"type": "chief", "index": 0} and len(tf_config["cluster"]["worker"]) == 2
        wait_condition(client, "TrainingJob", "mpi-hello", "Succeeded", timeout=60)
        assert (
            pod_log(up.home, "mpi-hello-launcher-0", "mpi") == "np 4 hosts 127.0.0.1:4\n127.0.0.1 slots=4\n"
        )

        wait_condition(client, "TrainingJob", "entry", "Failed", timeout=60)
        why = client.view("why/TrainingJob/default/entry")
        assert IMAGE in why["failure"]["message"]
        assert why["unblock"][0].startswith(
            "worker-0 never started: spec.containers[0].command is not set and the entrypoint of image "
            f"'{IMAGE}' does not run on this runtime; set command to"
        )
