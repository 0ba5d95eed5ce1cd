"""Control-plane metrics after real activity: jobs admitted, preempted, failed and restarted,
GPUs read, parsed back with prometheus_client's parser."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from muster.runtime.base import PodReason
from muster.testing.cluster import cluster_queue
from muster.testing.factories import local_queue
from tests.controllers.conftest import Harness, job


def scrape(h: Harness) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(h.manager.ctx.metrics)
    text = generate_latest(registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_metrics_follow_jobs_queues_pods_and_gpus(harness: Harness):
    h = harness
    h.clock.now = time.time()  # objects are created at the store's (real) time: queue waits add up
    team = cluster_queue("team", {"default": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}})
    h.apply(
        team,
        local_queue("team", "team"),
        {"apiVersion": "muster.dev/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
        job("low", workers=2, gpus=2, queueName="team"),
    )
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.clock.advance(30)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "low", "Running"))
    h.rt.gpu("node-0", 0).utilization_pct = 87.0
    h.rt.gpu("node-0", 0).temperature_c = 71.0
    h.manager.gpus.sample(h.clock())

    s = scrape(h)
    assert value(s, "muster_queue_admitted_workloads", cluster_queue="team") == 1
    assert value(s, "muster_queue_pending_workloads", cluster_queue="team") == 0
    assert (
        value(s, "muster_queue_quota", cluster_queue="team", flavor="default", resource="nvidia.com/gpu") == 4
    )
    assert (
        value(s, "muster_queue_usage", cluster_queue="team", flavor="default", resource="nvidia.com/gpu") == 4
    )
    assert value(s, "muster_queue_usage", cluster_queue="team", flavor="default", resource="cpu") == 0
    assert value(s, "muster_jobs", state="Running") == 1
    assert value(s, "muster_jobs", state="Failed") == 0
    assert value(s, "muster_pods", phase="Running") == 2
    assert value(s, "muster_workloads", state="Admitted") == 1
    assert value(s, "muster_node_gpus_total", node="node-0") == 4
    assert value(s, "muster_node_gpus_allocated", node="node-0") == 4
    assert value(s, "muster_node_ready", node="node-0") == 1
    gpu0 = {"node": "node-0", "gpu": "0", "uuid": "GPU-node-0-0", "model": "FAKE-GPU"}
    assert value(s, "muster_gpu_utilization_ratio", **gpu0) == 0.87
    assert value(s, "muster_gpu_temperature_celsius", **gpu0) == 71.0
    assert value(s, "muster_gpu_memory_total_bytes", **gpu0) == 16 << 30
    assert value(s, "muster_gpu_allocated_ratio", **gpu0) == 1.0
    assert value(s, "muster_gpu_healthy", **gpu0) == 1.0
    # Admitted at once (it started 30 s later, which is not admission wait).
    assert value(s, "muster_admission_wait_seconds_count", cluster_queue="team") == 1
    assert value(s, "muster_admission_wait_seconds_bucket", cluster_queue="team", le="0.1") == 1
    assert value(s, "muster_scheduler_decisions_total", decision="admitted") == 1
    assert value(s, "muster_scheduler_cycle_duration_seconds_count") >= 1

    # A higher-priority job preempts it and waits for its victims.
    h.apply(job("high", workers=1, gpus=4, queueName="team", priorityClassName="high"))
    h.settle(lambda: h.has("TrainingJob", "low", "Preempted") or h.has("TrainingJob", "low", "Queued"))
    h.clock.advance(60)
    h.settle(lambda: "default/high-worker-0" in h.rt.started)
    s = scrape(h)
    assert value(s, "muster_preemptions_total", reason="InClusterQueue") == 1
    assert value(s, "muster_workload_evictions_total", reason="Preempted") == 1
    assert value(s, "muster_pod_failures_total", reason="Preempted") == 2
    assert value(s, "muster_scheduler_decisions_total", decision="preempted") == 1
    assert value(s, "muster_admission_wait_seconds_count", cluster_queue="team") == 2
    # The preemptor was created at the store's real time and admitted 90 clock seconds later.
    assert value(s, "muster_admission_wait_seconds_bucket", cluster_queue="team", le="30.0") == 1
    assert value(s, "muster_admission_wait_seconds_bucket", cluster_queue="team", le="300.0") == 2
    assert 60 < value(s, "muster_admission_wait_seconds_sum", cluster_queue="team") < 120
    assert value(s, "muster_queue_pending_workloads", cluster_queue="team") == 1

    # The preemptor OOMs and restarts its gang once.
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "high", "Running"))
    h.rt.exit("default/high-worker-0", 137, reason=PodReason.OOM_KILLED)
    h.settle(lambda: h.job("high")["status"].get("restartCount") == 1)
    s = scrape(h)
    assert value(s, "muster_pod_failures_total", reason="OOMKilled") == 1
    assert value(s, "muster_pod_restarts_total", namespace="default") == 1
    assert value(s, "muster_jobs", state="Restarting") == 1
