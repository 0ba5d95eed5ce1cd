"""Placement: filters, explanations, devices, scores of every policy, topology, gangs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from muster.scheduler import (
    GPU,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeTable,
    PodSet,
    Policy,
    Snapshot,
    Taint,
    TypicalPod,
    schedule,
)
from muster.scheduler.placement.filters import PodSpec
from muster.scheduler.placement.fragmentation import FragModel, cluster_fragmentation, typical_pods
from muster.scheduler.placement.scores import SCORERS, ScoreContext
from tests.scheduler.builders import cq, node, wl

BIG = cq("q", {"cpu": 10**9, GPU: 10**9, "memory": 10**15})
UNHEALTHY = Taint("nvidia.com/gpu", "unhealthy", "NoSchedule")


def place(nodes, *pending, policy: str = "binpack", **kw):
    return schedule(Snapshot([BIG], pending=list(pending), nodes=nodes), Policy(placement=policy, **kw))


def where(d, name: str) -> list[tuple[str, list]]:
    a = next(a for a in d.admitted if a.name == name)
    return [(pl.node, pl.gpus) for ps in a.pod_sets for pl in ps.placements]


def test_unready_cordoned_and_unhealthy_devices_are_skipped() -> None:
    nodes = [
        node("down", gpus=2, ready=False),
        node("cordoned", gpus=2, unschedulable=True),
        node("sick", gpus=2, gpu_healthy=(False, True)),
    ]
    d = place(nodes, wl("one", gpus=1), wl("two", gpus=2))
    assert where(d, "one") == [("sick", [(1,)])]
    (p,) = d.pending
    assert p.name == "two" and p.reason == "InsufficientResources"
    assert (
        "1 are not ready or are cordoned" not in p.message and "2 are not ready or are cordoned" in p.message
    )
    assert "1 have fewer than 2 GPUs in all" in p.message


def test_insufficient_resources_message_has_the_numbers() -> None:
    free = [3, 2, 2, 2, 2, 2, 2, 1, 1]
    nodes = [
        node(f"n{i:02d}", gpus=4, gpu_free=tuple(1000 if d < f else 0 for d in range(4)))
        for i, f in enumerate(free)
    ]
    nodes += [node(f"t{i}", gpus=4, taints=(UNHEALTHY,)) for i in range(3)]
    worker = PodSet("worker", 1, {"cpu": 8000}, gpus=4, gpu_models=("A100",))
    d = place(nodes, replace(wl("job"), pod_sets=[worker]))
    (p,) = d.pending
    assert p.message == (
        "0/12 nodes can host pod worker-0 (4 nvidia.com/gpu, A100, 8 cpu): "
        "3 have the untolerated taint nvidia.com/gpu=unhealthy:NoSchedule, "
        "9 have too few free GPUs (largest free block 3; 17 free GPUs spread over 9 nodes)"
    )
    assert p.details["largestFreeGpuBlock"] == 3 and p.details["freeGpus"] == 17
    assert p.details["failures"] == {
        "have the untolerated taint nvidia.com/gpu=unhealthy:NoSchedule": 3,
        "have too few free GPUs (largest free block 3; 17 free GPUs spread over 9 nodes)": 9,
    }


def test_required_node_affinity_operators() -> None:
    nodes = [
        replace(node("a"), labels={"gen": "3", "zone": "x"}),
        replace(node("b"), labels={"gen": "5", "zone": "y"}),
        replace(node("c"), labels={"gen": "7"}),
    ]
    newer = NodeSelectorTerm(
        (NodeSelectorRequirement("gen", "Gt", ("4",)), NodeSelectorRequirement("zone", "Exists"))
    )
    only_c = NodeSelectorTerm((NodeSelectorRequirement("zone", "DoesNotExist"),))
    d = place(nodes, wl("p", node_affinity=(newer,)), wl("q", node_affinity=(only_c,), t=1))
    assert where(d, "p")[0][0] == "b" and where(d, "q")[0][0] == "c"


def test_anti_affinity_spreads_a_gang_or_says_it_cannot() -> None:
    nodes = [node("n1", cpu=8000), node("n2", cpu=8000), node("n3", cpu=8000)]
    d = place(nodes, wl("spread", count=3, anti_affinity=True))
    assert sorted(n for n, _ in where(d, "spread")) == ["n1", "n2", "n3"]
    d2 = place(nodes[:2], wl("spread", count=3, anti_affinity=True))
    (p,) = d2.pending
    assert p.reason == "GangIncomplete" and "needs a node of its own" in p.message


def test_memory_sized_share_takes_milli_by_node_memory() -> None:
    gib = 2**30
    nodes = [node("small", gpus=1, gpu_memory=40 * gib), node("large", gpus=1, gpu_memory=80 * gib)]
    share = wl("m", gpus=1, milli=250, gpu_memory=20 * gib)
    d = place(nodes, share, replace(share, name="m2", creation_time=1), policy="spread")
    placed = {a.name: a.pod_sets[0].placements[0] for a in d.admitted}
    by_node = {pl.node: pl.gpu_milli for pl in placed.values()}
    assert by_node == {"large": 250, "small": 500}


@pytest.mark.parametrize("policy", ["binpack", "spread", "gpu-packing", "fgd"])
def test_time_sliced_node_takes_one_replica_per_one_gpu_pod(policy: str) -> None:
    nodes = [node("sliced", gpus=1, gpu_replicas=4), node("whole", gpus=1)]
    pods = [wl(f"p{i}", gpus=1, t=float(i)) for i in range(6)]
    d = place(nodes, *pods, policy=policy)
    placed = [pl for a in d.admitted for pl in a.pod_sets[0].placements]
    by_node = sorted((pl.node, pl.gpu_milli) for pl in placed)
    # four replicas of the sliced GPU, one whole GPU elsewhere; the sixth pod waits
    assert by_node == [("sliced", 250)] * 4 + [("whole", 1000)]
    assert len(d.pending) == 1


def test_pods_asking_several_gpus_never_land_on_a_time_sliced_node() -> None:
    nodes = [node("sliced", gpus=4, gpu_replicas=2)]
    (p,) = place(nodes, wl("two", gpus=2)).pending
    assert "1 time-slice their GPUs (one replica per pod)" in p.message
    assert where(place(nodes, wl("share", gpus=1, milli=300)), "share") == [("sliced", [(0,)])]


def test_gpu_share_device_rules() -> None:
    nodes = [node("n", gpus=3, gpu_free=(600, 300, 1000))]
    share = wl("s", gpus=1, milli=250)
    assert where(place(nodes, share, policy="binpack"), "s") == [("n", [(1,)])]  # best fit
    assert where(place(nodes, share, policy="spread"), "s") == [("n", [(2,)])]  # worst fit
    picks = {where(place(nodes, share, policy="random", seed=s), "s")[0][1][0] for s in range(20)}
    assert picks == {(0,), (1,), (2,)}


def test_whole_gpu_pods_take_the_lowest_fully_free_devices() -> None:
    nodes = [node("n", gpus=6, gpu_free=(1000, 400, 1000, 0, 1000, 1000))]
    assert where(place(nodes, wl("w", gpus=3)), "w") == [("n", [(0, 2, 4)])]


def test_required_topology_never_relaxes() -> None:
    nodes = [replace(node(f"n{i}", cpu=1000), labels={"rack": f"r{i % 2}"}) for i in range(4)]
    d = place(nodes, wl("r", count=3, topology_required="rack"))
    (p,) = d.pending
    assert p.reason == "TopologyUnsatisfiable"
    assert "allows to fit only 2 out of 3 pods" in p.message and p.details["fit"] == 2
    d2 = place(nodes, wl("r", count=3, topology_preferred="rack"))
    assert len(where(d2, "r")) == 3


# -- scores of the FGD paper's policies, against hand-computed values --------------------


def table_and_spec(nodes, pod_set: PodSet) -> tuple[NodeTable, PodSpec, np.ndarray]:
    t = NodeTable.from_nodes(nodes)
    return t, PodSpec.build(t, pod_set, []), np.arange(len(nodes))


def score(policy: str, nodes, pod_set: PodSet, typical=()) -> list[float]:
    t, spec, idx = table_and_spec(nodes, pod_set)
    ctx = ScoreContext(Policy(placement=policy), FragModel(t, typical) if policy == "fgd" else None)
    return SCORERS[policy](t, idx, spec, ctx).tolist()


def test_bestfit_and_dotprod_scores() -> None:
    nodes = [node("a", cpu=64_000, gpus=8, gpu_free=(1000,) * 4 + (0,) * 4), node("b", cpu=128_000, gpus=8)]
    pod = PodSet("p", 1, {"cpu": 8000}, gpus=1)
    # bestfit: 100·(1 − 0.5·(64000−8000)/128000 − 0.5·(4000−1000)/8000) = 59.375 → 59
    assert score("bestfit", nodes, pod) == [59, 9]  # b: 100·(1 − 0.46875 − 0.4375) = 9.375
    # dotprod: 100·(1 − (0.5·0.0625 + 0.5·0.125)/2) = 95.3 → 95 ; b: 100·(1 − (0.0625+0.125)/2) = 90.6 → 90
    assert score("dotprod", nodes, pod) == [95, 90]


def test_gpu_packing_scores() -> None:
    nodes = [
        node("idle8", gpus=8),
        node("idle2", gpus=2),
        node("shared", gpus=2, gpu_free=(300, 1000)),
        node("used", gpus=2, gpu_free=(0, 1000)),
    ]
    share = PodSet("s", 1, {"cpu": 1000}, gpus=1, gpu_milli=250)
    # idle: max(33 − free, free); a fitting shared device with 300 left: 100 − (30 // 10)
    assert score("gpu-packing", nodes, share) == [25, 31, 97, 49]
    whole = PodSet("w", 1, {"cpu": 1000}, gpus=1)
    assert score("gpu-packing", nodes, whole) == [25, 31, 49, 49]
    assert score("gpu-packing", nodes, PodSet("c", 1, {"cpu": 1000})) == [0, 0, 0, 0]


def test_gpu_clustering_scores_use_the_classes_on_the_node() -> None:
    from muster.scheduler.nodes import gpu_tag

    t = NodeTable.from_nodes(
        [node("none", gpus=8), node("same", gpus=8), node("mixed", gpus=8), node("other", gpus=8)]
    )
    cols = np.zeros(0, dtype=np.intp)
    vals = np.zeros(0, dtype=np.int64)
    t.bind(1, cols, vals, (0,), 1000, gpu_tag(1, 1000))
    t.bind(2, cols, vals, (0,), 1000, gpu_tag(1, 1000))
    t.bind(2, cols, vals, (1,), 500, gpu_tag(1, 500))
    t.bind(3, cols, vals, (0, 1), 1000, gpu_tag(2, 1000))
    spec = PodSpec.build(t, PodSet("p", 1, {}, gpus=1), [])
    got = SCORERS["gpu-clustering"](t, np.arange(4), spec, ScoreContext(Policy(), None)).tolist()
    # 25·(8000 − free)/8000 + 25 (no GPU pod) / 75 (only its class) / 50 (its class and others) / 0
    assert got == [25, 3 + 75, 4 + 50, 6 + 0]


def test_fgd_scores_the_fragmentation_gradient() -> None:
    typical = (TypicalPod(1000, 1000, 1, 0.5), TypicalPod(1000, 500, 1, 0.5))
    nodes = [node("half", cpu=16_000, gpus=2, gpu_free=(500, 1000)), node("idle", cpu=16_000, gpus=2)]
    share = PodSet("s", 1, {"cpu": 1000}, gpus=1, gpu_milli=500)
    # half: F = 0.5·500 (the 500 left is a fragment for whole-GPU pods); putting the share on
    # GPU 0 makes F = 0 → ⌊100·σ(0.25)⌋ = 56; idle: F 0 → 0.5·500 + 0 = 250 → ⌊100·σ(−0.25)⌋ = 43
    assert score("fgd", nodes, share, typical) == [56, 43]
    d = schedule(
        Snapshot([BIG], pending=[wl("s", gpus=1, milli=500)], nodes=nodes),
        Policy(placement="fgd", typical_pods=typical),
    )
    assert where(d, "s") == [("half", [(0,)])]


def test_binpack_and_spread_scores() -> None:
    nodes = [
        node("busy", cpu=10_000, gpus=4, gpu_free=(0, 0, 1000, 1000), used={"cpu": 5000}),
        node("idle", cpu=10_000, gpus=4),
    ]
    pod = PodSet("p", 1, {"cpu": 1000}, gpus=1)
    # binpack: mean of allocated fractions after placing: busy (0.6 + 0.75)/2, idle (0.1 + 0.25)/2
    assert score("binpack", nodes, pod) == pytest.approx([0.675, 0.175])
    assert score("spread", nodes, pod) == pytest.approx([0.325, 0.825])


def test_typical_pods_cover_95_percent_and_renormalise() -> None:
    shapes = (
        [(1000, 1000, 1, ())] * 50
        + [(2000, 500, 1, ())] * 30
        + [(4000, 0, 0, ())] * 16
        + [(8000, 1000, 8, ("A100",))] * 4
    )
    typ = typical_pods(shapes)
    assert [(t.cpu_milli, t.gpu_milli, t.gpus) for t in typ] == [
        (1000, 1000, 1),
        (2000, 500, 1),
        (4000, 0, 0),
    ]
    assert sum(t.frequency for t in typ) == pytest.approx(1.0)
    assert typ[0].frequency == pytest.approx(50 / 96)


def test_cluster_fragmentation_counts_unusable_idle_gpu() -> None:
    t = NodeTable.from_nodes([node("a", gpus=2, gpu_free=(300, 1000)), node("b", gpus=1, gpu_free=(0,))])
    frag, idle = cluster_fragmentation(t, (TypicalPod(1000, 1000, 1, 1.0),))
    assert (frag, idle) == (300.0, 1300.0)


def test_bind_unbind_roundtrip() -> None:
    t = NodeTable.from_nodes([node("n", gpus=2)])
    before = (t.free.copy(), t.gpu_free.copy(), t.full_free.copy(), t.max_free.copy(), t.free_milli.copy())
    cols, vals, _ = t.request_columns({"cpu": 1500})
    t.bind(0, cols, vals, (1,), 400, 0)
    assert t.full_free[0] == 1 and t.max_free[0] == 1000 and t.free_milli[0] == 1600 and t.gpu_tags[0, 0] == 1
    t.unbind(0, cols, vals, (1,), 400, 0)
    after = (t.free, t.gpu_free, t.full_free, t.max_free, t.free_milli)
    assert all((x == y).all() for x, y in zip(before, after, strict=True)) and t.gpu_tags.sum() == 0
