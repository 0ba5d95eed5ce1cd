"""The control plane's Prometheus metrics (docs/metrics.md lists every one).

Two kinds:

* **state**, computed when scraped from the manager's cache and GPU monitor (queues,
  quota and usage, jobs, pods, Workloads, nodes, per-GPU readings), so no code path has to
  keep a gauge in step with the objects;
* **events**, counted by the code that does them (scheduler cycles and decisions,
  preemptions, evictions, admission waits, pod failures and restarts).

:class:`ControlPlaneMetrics` is one ``prometheus_client`` collector holding both; the
manager owns one (``ctx.metrics``) and the server registers it on its registry while the
manager runs. Amounts are in base units: GPUs and CPUs as (fractional) counts, memory in
bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from muster.api.conditions import condition
from muster.api.lifecycle import JobPhase, WorkloadState, job_phase, phase, workload_state
from muster.controllers.insight.gpuview import gpu_rows
from muster.controllers.insight.usage import queue_usage
from muster.controllers.nodes.gpumonitor import GpuReading

__all__ = ["ClusterState", "ControlPlaneMetrics"]

Obj = dict[str, Any]
_PHASES = ("Pending", "Running", "Succeeded", "Failed")
_GPU_LABELS = ["node", "gpu", "uuid", "model"]
# Scheduling cycles take milliseconds; a slow one (a large backlog) seconds.
_CYCLE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Waiting for admission takes from an instant (an idle cluster) to days (a full one).
_WAIT_BUCKETS = (0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200)


@dataclass
class ClusterState:
    """Where the state metrics come from: ``list(kind)`` of the cache, the GPUs' newest readings."""

    list: Callable[[str], list[Obj]]
    latest: Callable[[], dict[str, GpuReading]]


class ControlPlaneMetrics(Collector):
    """Every control-plane metric; attach a :class:`ClusterState` for the state ones."""

    def __init__(self) -> None:
        self.cycle_duration = Histogram(
            "muster_scheduler_cycle_duration_seconds",
            "Time one scheduling cycle took: snapshot, schedule() and writing the decisions.",
            buckets=_CYCLE_BUCKETS,
            registry=None,
        )
        self.decisions = Counter(
            "muster_scheduler_decisions",
            "Decisions of scheduling cycles as written: admitted, preempted (victims newly "
            "evicted) and pending (per pending Workload per cycle).",
            ["decision"],
            registry=None,
        )
        self.preemptions = Counter(
            "muster_preemptions",
            "Workloads preempted, by reason (InClusterQueue, InCohortReclamation, "
            "InCohortFairSharing, InCohortReclaimWhileBorrowing).",
            ["reason"],
            registry=None,
        )
        self.evictions = Counter(
            "muster_workload_evictions",
            "Admitted Workloads evicted, by reason (Preempted, Deactivated, GPUUnhealthy, NodeLost, "
            "NodeDrained).",
            ["reason"],
            registry=None,
        )
        self.admission_wait = Histogram(
            "muster_admission_wait_seconds",
            "Time from entering the queue (creation, or the last requeue) to admission.",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=None,
        )
        self.pod_failures = Counter(
            "muster_pod_failures",
            "Pods that ended Failed, by classified reason (Error, OOMKilled, Preempted, NodeLost, ...).",
            ["reason"],
            registry=None,
        )
        self.pod_restarts = Counter(
            "muster_pod_restarts",
            "Pods restarted by a gang restart of their TrainingJob (every replica of the gang counts).",
            ["namespace"],
            registry=None,
        )
        self.cluster: ClusterState | None = None
        for name in ("admitted", "preempted", "pending"):
            self.decisions.labels(name)  # every decision shows, at 0 until the first

    def attach(self, cluster: ClusterState) -> None:
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        for metric in (
            self.cycle_duration,
            self.decisions,
            self.preemptions,
            self.evictions,
            self.admission_wait,
            self.pod_failures,
            self.pod_restarts,
        ):
            yield from metric.collect()
        if self.cluster is not None:
            yield from _state(self.cluster)


def _state(cluster: ClusterState) -> Iterator[Metric]:
    workloads = cluster.list("Workload")
    yield from _queues(cluster.list("ClusterQueue"), cluster.list("LocalQueue"), workloads)
    yield _counts(
        "muster_workloads",
        "Workloads by state (Pending, Admitted, Evicting, Finished).",
        "state",
        [s.value for s in WorkloadState],
        (workload_state(w).value for w in workloads),
    )
    yield _counts(
        "muster_jobs",
        "TrainingJobs by phase (Created, Queued, Running, Restarting, Preempted, Suspended, "
        "Succeeded, Failed).",
        "state",
        [p.value for p in JobPhase],
        ((job_phase(j) or JobPhase.CREATED).value for j in cluster.list("TrainingJob")),
    )
    pods = cluster.list("Pod")
    yield _counts("muster_pods", "Pods by phase.", "phase", list(_PHASES), (phase(p) for p in pods))
    yield from _nodes_and_gpus(cluster.list("Node"), pods, cluster.latest())
    yield from _serving(cluster.list("InferenceService"))


def _queues(cluster_queues: list[Obj], local_queues: list[Obj], workloads: list[Obj]) -> Iterator[Metric]:
    pending = GaugeMetricFamily(
        "muster_queue_pending_workloads", "Workloads waiting for admission.", labels=["cluster_queue"]
    )
    admitted = GaugeMetricFamily(
        "muster_queue_admitted_workloads",
        "Workloads holding quota (admitted, or evicted with pods still stopping).",
        labels=["cluster_queue"],
    )
    quota = GaugeMetricFamily(
        "muster_queue_quota",
        "Nominal quota per flavor and resource (GPUs and CPUs as counts, memory in bytes).",
        labels=["cluster_queue", "flavor", "resource"],
    )
    usage = GaugeMetricFamily(
        "muster_queue_usage",
        "Quota charged to admitted Workloads per flavor and resource (same units as muster_queue_quota).",
        labels=["cluster_queue", "flavor", "resource"],
    )
    for q in queue_usage(cluster_queues, local_queues, workloads):
        pending.add_metric([q.name], q.pending)
        admitted.add_metric([q.name], q.admitted)
        for row in q.rows:
            quota.add_metric([q.name, row.flavor, row.resource], float(row.nominal))
            usage.add_metric([q.name, row.flavor, row.resource], float(row.used))
    yield from (pending, admitted, quota, usage)


def _nodes_and_gpus(nodes: list[Obj], pods: list[Obj], latest: dict[str, GpuReading]) -> Iterator[Metric]:
    ready = GaugeMetricFamily("muster_node_ready", "1 when the node is Ready, else 0.", labels=["node"])
    for node in nodes:
        cond = condition(node, "Ready") or {}
        ready.add_metric([node["metadata"]["name"]], 1.0 if cond.get("status") == "True" else 0.0)
    total = GaugeMetricFamily("muster_node_gpus_total", "GPUs of the node.", labels=["node"])
    allocated = GaugeMetricFamily(
        "muster_node_gpus_allocated", "GPUs held by pods (shares count as fractions).", labels=["node"]
    )
    unhealthy = GaugeMetricFamily(
        "muster_node_gpus_unhealthy", "Unhealthy GPUs of the node.", labels=["node"]
    )
    families = {
        "utilization": GaugeMetricFamily(
            "muster_gpu_utilization_ratio",
            "Fraction of the last sample period the GPU was busy (NVML utilization.gpu / 100).",
            labels=_GPU_LABELS,
        ),
        "memory_used": GaugeMetricFamily(
            "muster_gpu_memory_used_bytes", "GPU memory in use.", labels=_GPU_LABELS
        ),
        "memory_total": GaugeMetricFamily(
            "muster_gpu_memory_total_bytes", "GPU memory in all.", labels=_GPU_LABELS
        ),
        "temperature": GaugeMetricFamily(
            "muster_gpu_temperature_celsius", "GPU core temperature.", labels=_GPU_LABELS
        ),
        "power": GaugeMetricFamily("muster_gpu_power_watts", "GPU power draw.", labels=_GPU_LABELS),
    }
    gpu_allocated = GaugeMetricFamily(
        "muster_gpu_allocated_ratio", "Share of the GPU held by pods (1 = whole).", labels=_GPU_LABELS
    )
    gpu_healthy = GaugeMetricFamily(
        "muster_gpu_healthy", "1 when the GPU is healthy, else 0.", labels=_GPU_LABELS
    )
    per_node: dict[str, list[Fraction]] = {}
    for row in gpu_rows(nodes, pods, {u: [r] for u, r in latest.items()}):
        labels = [row.node, str(row.index), row.uuid, row.model]
        counts = per_node.setdefault(row.node, [Fraction(0), Fraction(0), Fraction(0)])
        counts[0] += 1
        counts[1] += Fraction(row.allocated_milli, 1000)
        counts[2] += row.health != "Healthy"
        gpu_allocated.add_metric(labels, row.allocated_milli / 1000)
        gpu_healthy.add_metric(labels, 1.0 if row.health == "Healthy" else 0.0)
        r = row.latest
        if r is None:
            continue
        for key, value in (
            ("utilization", r.utilization),
            ("memory_used", r.memory_used_bytes),
            ("memory_total", r.memory_total_bytes),
            ("temperature", r.temperature_c),
            ("power", r.power_w),
        ):
            if value is not None:
                families[key].add_metric(labels, float(value))
    for node in nodes:
        name = node["metadata"]["name"]
        counts = per_node.get(name, [Fraction(0)] * 3)
        total.add_metric([name], float(counts[0]))
        allocated.add_metric([name], float(counts[1]))
        unhealthy.add_metric([name], float(counts[2]))
    yield from (ready, total, allocated, unhealthy, gpu_allocated, gpu_healthy, *families.values())


def _serving(services: list[Obj]) -> Iterator[Metric]:
    labels = ["namespace", "service", "revision"]
    desired = GaugeMetricFamily(
        "muster_serving_desired_replicas", "Replicas the autoscaler wants, per revision.", labels=labels
    )
    ready = GaugeMetricFamily(
        "muster_serving_ready_replicas",
        "Replicas in routing (readiness probe passed), per revision.",
        labels=labels,
    )
    traffic = GaugeMetricFamily(
        "muster_serving_traffic_percent", "Share of a service's requests each revision takes.", labels=labels
    )
    for isvc in services:
        ns, name = isvc["metadata"].get("namespace") or "default", isvc["metadata"]["name"]
        status = isvc.get("status") or {}
        for rev in status.get("revisions") or []:
            desired.add_metric([ns, name, rev["name"]], float(rev.get("desiredReplicas") or 0))
            ready.add_metric([ns, name, rev["name"]], float(rev.get("readyReplicas") or 0))
        for t in status.get("traffic") or []:
            traffic.add_metric([ns, name, t["revisionName"]], float(t.get("percent") or 0))
    yield from (desired, ready, traffic)


def _counts(name: str, help_text: str, label: str, values: list[str], seen: Iterator[str] | Any) -> Metric:
    counts = dict.fromkeys(values, 0)
    for value in seen:
        counts[value] = counts.get(value, 0) + 1
    family = GaugeMetricFamily(name, help_text, labels=[label])
    for value, count in counts.items():
        family.add_metric([value], count)
    return family
