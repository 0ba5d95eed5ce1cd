"""Allocation per node and GPU, and quota usage per ClusterQueue, from constructed objects."""

from __future__ import annotations

from fractions import Fraction

import pytest

from muster.api.quantity import fmt_amount
from muster.api.registry import validate
from muster.controllers.insight.usage import gpu_usage, node_usage, queue_usage
from muster.testing.cluster import admitted, cluster_queue, gpu_node, pod, workload
from muster.testing.factories import local_queue


def _valid(*objs):
    for obj in objs:
        validate(obj, keep_status=True)  # the builders make what the API stores
    return list(objs)


class TestNodes:
    def test_bound_pods_that_still_hold_resources_count(self):
        nodes = _valid(gpu_node("node-a", gpus=4), gpu_node("node-b", gpus=2))
        pods = _valid(
            pod("a", node="node-a", gpus=[0, 1], requests={"cpu": "4", "memory": "16Gi"}),
            pod("b", node="node-a", gpus=[2], gpu_milli=500, phase="Pending", requests={"cpu": "500m"}),
            pod("done", node="node-a", gpus=[3], phase="Succeeded", requests={"cpu": "8"}),
            pod("failed", node="node-b", gpus=[0], phase="Failed", reason="Error"),
            pod("unbound", node=None, phase="Pending"),
        )
        usage = {n.name: n for n in node_usage(nodes, pods)}
        a = usage["node-a"]
        assert a.pods == 2
        assert a.resources["cpu"].used == Fraction(9, 2) and a.resources["cpu"].total == 32
        assert a.resources["memory"].used == 16 * 2**30
        assert a.resources["nvidia.com/gpu"].used == Fraction(5, 2)  # two whole GPUs and a half share
        assert a.resources["nvidia.com/gpu"].percent == 62
        assert usage["node-b"].pods == 0 and usage["node-b"].resources["nvidia.com/gpu"].used == 0

    def test_unhealthy_gpus_are_not_allocatable(self):
        [n] = node_usage([gpu_node("n", gpus=4, unhealthy=[3])], [])
        assert n.resources["nvidia.com/gpu"].total == 3
        assert n.ready == "True"


class TestGpus:
    def test_each_gpu_lists_its_holders_and_shares(self):
        nodes = [gpu_node("node-a", gpus=3, unhealthy=[2])]
        pods = [
            pod("whole", node="node-a", gpus=[0]),
            pod("half", node="node-a", gpus=[1], gpu_milli=500),
            pod("quarter", node="node-a", gpus=[1], gpu_milli=250, namespace="team"),
            pod("gone", node="node-a", gpus=[0], phase="Succeeded"),
        ]
        gpus = gpu_usage(nodes, pods)
        assert [(g.index, g.used_milli, g.health) for g in gpus] == [
            (0, 1000, "Healthy"),
            (1, 750, "Healthy"),
            (2, 0, "Unhealthy"),
        ]
        assert [(h.pod, h.milli) for h in gpus[1].holders] == [("default/half", 500), ("team/quarter", 250)]
        assert gpus[0].to_dict()["holders"] == [{"pod": "default/whole", "milli": 1000}]

    def test_a_memory_sized_share_is_its_fraction_of_the_device(self):
        p = pod("mem", node="node-a", gpus=[0])
        p["spec"]["gpuMemory"] = "20Gi"
        [g] = gpu_usage([gpu_node("node-a", gpus=1, gpu_memory="80Gi")], [p])
        assert g.used_milli == 250


class TestQueues:
    def test_usage_against_quota_per_flavor_and_counts(self):
        cqs = _valid(
            cluster_queue(
                "team-a", {"default": {"nvidia.com/gpu": ("4", "2"), "cpu": "32"}}, cohort="research"
            ),
            cluster_queue("team-b", {"default": {"nvidia.com/gpu": "4", "cpu": "32"}}, cohort="research"),
        )
        lqs = _valid(local_queue("a", "team-a"), local_queue("b", "team-b", namespace="nlp"))
        wls = _valid(
            admitted(workload("one", queue="a", pods=2), "team-a", "node-a", [[0], [1]]),
            admitted(workload("two", queue="a", pods=4), "team-a", "node-a", [[2], [3], [4], [5]]),
            workload("waiting", queue="a"),
            workload("nlp-waiting", namespace="nlp", queue="b"),
            workload("off", queue="a", active=False),
            workload("unknown-queue", queue="nope"),
        )
        a, b = queue_usage(cqs, lqs, wls)
        assert (a.name, a.pending, a.admitted, a.cohort) == ("team-a", 1, 2, "research")
        gpu = next(r for r in a.rows if r.resource == "nvidia.com/gpu")
        assert (gpu.used, gpu.nominal, gpu.borrowed, gpu.borrowing_limit) == (6, 4, 2, 2)
        assert gpu.to_dict()["borrowed"] == "2"
        assert (b.pending, b.admitted) == (1, 0)
        assert all(r.used == 0 for r in b.rows)

    def test_finished_workloads_release_quota(self):
        wl = admitted(workload("done", pods=2), "default", "node-a", [[0], [1]])
        wl["status"]["conditions"].append({"type": "Finished", "status": "True"})
        [q] = queue_usage([cluster_queue("default", {"default": {"nvidia.com/gpu": "8"}})], [], [wl])
        assert q.admitted == 0 and q.rows[0].used == 0


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("nvidia.com/gpu", Fraction(1, 2), "0.5"),
        ("nvidia.com/gpu", 4, "4"),
        ("cpu", Fraction(9, 4), "2.25"),
        ("memory", 16 * 2**30, "16Gi"),
        ("memory", 3 * 2**29, "1.5Gi"),
        ("memory", 512 * 2**20, "512Mi"),
        ("memory", 100, "100"),
    ],
)
def test_amounts_read_well(resource, amount, text):
    assert fmt_amount(resource, amount) == text
