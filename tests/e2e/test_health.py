"""End to end: a fake GPU fails under a running job (fault injection through the CLI), the
job moves off it with reason GPUUnhealthy, and /metrics and /api/v1/gpus tell the story."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from muster.testing import wait_for
from muster.testing.up import run_cli
from tests.e2e.jobs import cluster, condition, live_pods, pod_log, python_job, wait_condition

pytestmark = pytest.mark.slow


def metric(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def test_a_gpu_fault_moves_the_job_and_metrics_follow(muster_home: Path, tmp_path: Path):
    script = (
        "import os, time\n"
        "print('gpus', os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n"
        "while True: time.sleep(0.1)\n"
    )
    doc = python_job("train", script, workers=1, gpus=1, run_policy={"backoffLimit": 0})
    # Tolerating the taint lets it stay on this (only) node, on the GPUs that are still healthy.
    doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    with cluster(muster_home, gpus=2) as (_up, client):
        client.apply([doc])
        wait_condition(client, "TrainingJob", "train", "Running")
        node = client.list("Node")["items"][0]["metadata"]["name"]
        first = client.get("Pod", "train-worker-0", "default")["spec"]["gpus"]
        assert len(first) == 1
        bad = first[0]

        readings = run_cli(
            muster_home, "node", "inject-fault", node, "--gpu", str(bad), "--utilization", "0.42"
        )
        assert readings.returncode == 0, readings.stderr
        text = client.metrics()
        gpu_labels = {"node": node, "gpu": str(bad)}
        assert metric(text, "muster_gpu_utilization_ratio", **gpu_labels) == 0.42
        assert metric(text, "muster_gpu_allocated_ratio", **gpu_labels) == 1.0
        assert metric(text, "muster_jobs", state="Running") == 1

        fault = run_cli(muster_home, "node", "inject-fault", node, "--gpu", str(bad), "--xid", "79")
        assert fault.returncode == 0, fault.stderr
        assert "Unhealthy" in fault.stdout and "XID 79" in fault.stdout

        def moved() -> bool:
            pod = next((p for p in live_pods(client) if p["metadata"]["name"] == "train-worker-0"), None)
            return (
                pod is not None and pod["spec"]["gpus"] != [bad] and pod["status"].get("phase") == "Running"
            )

        wait_for(moved, timeout=60, what="the job to run again on another GPU")
        job = wait_condition(client, "TrainingJob", "train", "Running")
        assert job["status"].get("restartCount", 0) == 0
        assert not condition(job, "Failed")
        reasons = [
            e["reason"]
            for e in client.list("Event", "default")["items"]
            if e["involvedObject"]["name"] == "train"
        ]
        assert "GPUUnhealthy" in reasons
        n = client.get("Node", node)
        assert {"key": "nvidia.com/gpu", "value": "unhealthy", "effect": "NoSchedule"} in n["spec"]["taints"]
        # Running is the process started; its first line may come a moment later.
        wait_for(
            lambda: f"gpus {1 - bad}" in pod_log(muster_home, "train-worker-0"),
            timeout=30,
            what="the moved pod to print its GPU",
        )

        text = client.metrics()
        assert metric(text, "muster_gpu_healthy", **gpu_labels) == 0.0
        assert metric(text, "muster_node_gpus_unhealthy", node=node) == 1.0
        assert metric(text, "muster_workload_evictions_total", reason="GPUUnhealthy") == 1.0
        assert metric(text, "muster_pod_failures_total", reason="GPUUnhealthy") == 1.0
        gpus = client.view("gpus", historySeconds=600)["gpus"]
        assert gpus[bad]["health"] == "Unhealthy" and not gpus[bad]["holders"]
        assert gpus[1 - bad]["holders"][0]["job"] == "train"
        assert [r["utilization"] for r in gpus[bad]["history"]][-1] == 0.42


def test_drain_evicts_the_job_and_uncordon_lets_it_back(muster_home: Path):
    script = "import time\nwhile True: time.sleep(0.1)\n"
    with cluster(muster_home, gpus=2) as (_up, client):
        client.apply([python_job("train", script, workers=1, gpus=1)])
        wait_condition(client, "TrainingJob", "train", "Running")
        node = client.list("Node")["items"][0]["metadata"]["name"]

        drained = run_cli(muster_home, "node", "drain", node, "--grace-period", "2", "--timeout", "60")
        assert drained.returncode == 0, drained.stderr
        assert f"node/{node} drained" in drained.stdout
        assert not live_pods(client)
        job = wait_condition(client, "TrainingJob", "train", "Queued")
        assert client.get("Node", node)["spec"]["unschedulable"] is True
        reasons = [
            e["reason"]
            for e in client.list("Event", "default")["items"]
            if e["involvedObject"]["name"] == "train"
        ]
        assert "NodeDrained" in reasons
        wl = client.get("Workload", "train", "default")
        assert "cordoned" in wl["status"]["pending"]["message"]
        assert job["status"].get("restartCount", 0) == 0

        back = run_cli(muster_home, "node", "uncordon", node)
        assert back.returncode == 0, back.stderr
        assert "muster.dev/drain" not in (client.get("Node", node)["metadata"].get("annotations") or {})
        wait_condition(client, "TrainingJob", "train", "Running")

        cordoned = run_cli(muster_home, "node", "cordon", node)
        assert cordoned.returncode == 0 and f"node/{node} cordoned" in cordoned.stdout
        assert client.get("Node", node)["spec"]["unschedulable"] is True
        missing = run_cli(muster_home, "node", "cordon", "no-such-node")
        assert missing.returncode == 1 and "not found" in missing.stderr.lower()
