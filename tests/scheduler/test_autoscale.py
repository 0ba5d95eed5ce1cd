"""The autoscaler's pure decision: fewest, cheapest nodes for the whole gang, spot first where
tolerated, topology kept, in-flight nodes reused, idle nodes removed after the TTL."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from muster.scheduler import (
    Flavor,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSet,
    Taint,
    Toleration,
)
from muster.scheduler.autoscale import Bin, Gang, Pool, plan

SPOT_TAINT = Taint("muster.dev/capacity-type", "spot", "NoSchedule")
TOLERATE_SPOT = (Toleration("muster.dev/capacity-type", "Exists"),)


def template(gpus: int = 8, model: str = "A100", labels: dict | None = None, taints: tuple = ()) -> Node:
    return Node(
        "template",
        allocatable={"cpu": 64_000, "memory": 512 << 30},
        labels={"nvidia.com/gpu.product": model, **(labels or {})},
        taints=taints,
        gpus=gpus,
        gpu_model=model,
        gpu_memory=80 << 30,
    )


def pool(name: str, price: float, gpus: int = 8, max_nodes: int = 10, **kw) -> Pool:
    spot = kw.pop("spot", False)
    labels = kw.pop("labels", None)
    tmpl = template(gpus, kw.pop("model", "A100"), labels, (SPOT_TAINT,) if spot else ())
    return Pool(name, tmpl, price=price, max_nodes=max_nodes, spot=spot, **kw)


def gang(name: str, pods: int, gpus: int, **ps) -> Gang:
    return Gang("default", name, [PodSet("worker", pods, requests={"cpu": 1000}, gpus=gpus, **ps)])


def test_the_cheapest_nodes_for_the_whole_gang_then_the_fewest():
    pools = [pool("big", 30.0, gpus=8), pool("small", 16.0, gpus=4)]
    out = plan([gang("a", 2, 4)], pools, [])
    assert [n.pool for n in out.launch] == ["big"], "one 8-GPU node at 30 beats two 4-GPU nodes at 32"
    out = plan([gang("a", 2, 4)], [pool("big", 34.0), pool("small", 16.0, gpus=4)], [])
    assert [n.pool for n in out.launch] == ["small", "small"], "two small nodes at 32 beat one at 34"
    assert out.waits["default/a"] == ["small#0", "small#1"]


def test_weight_first_then_spot_where_tolerated():
    pools = [pool("od", 10.0), pool("spot", 12.0, spot=True), pool("heavy", 50.0, weight=1)]
    assert plan([gang("a", 1, 8)], pools, []).launch[0].pool == "heavy"
    pools = pools[:2]
    tolerant = gang("t", 1, 8, tolerations=TOLERATE_SPOT)
    out = plan([tolerant, gang("s", 1, 8)], pools, [])
    assert {n.gangs[0]: n.pool for n in out.launch} == {"default/t": "spot", "default/s": "od"}


def test_gangs_share_the_room_left_on_new_nodes():
    out = plan([gang("a", 1, 4), gang("b", 1, 4), gang("c", 1, 2)], [pool("p", 10.0)], [])
    assert [(n.pool, n.gangs) for n in out.launch] == [
        ("p", ["default/a", "default/b"]),
        ("p", ["default/c"]),
    ]


def test_a_node_coming_up_is_used_before_asking_for_another():
    coming = Bin(template(), {"cpu": 64_000, "memory": 512 << 30}, [1000] * 8, pool="p", ready=False, eta=40)
    coming.node.name = "p-abc"
    out = plan([gang("a", 1, 8)], [pool("p", 10.0, nodes=1)], [coming])
    assert out.launch == [] and out.waits == {"default/a": ["p-abc"]}


def test_the_scheduler_verdict_wins_over_free_room_on_ready_nodes():
    ready = Bin(template(), {"cpu": 64_000, "memory": 512 << 30}, [1000] * 8, pool=None, ready=True)
    ready.node.name = "n1"
    out = plan([gang("a", 1, 8)], [pool("p", 10.0)], [ready])
    assert [n.pool for n in out.launch] == ["p"], "pending although it 'fits' n1: the scheduler knows better"
    out = plan([gang("a", 2, 8)], [pool("p", 10.0)], [ready])
    assert len(out.launch) == 1 and set(out.waits["default/a"]) == {"p#0"}, "half on n1, half on a new node"


def test_limits_and_max_nodes_leave_work_unplaceable_with_the_reason():
    out = plan([gang("a", 3, 8)], [pool("p", 10.0, max_nodes=2)], [])
    assert out.launch == []
    assert "pool p would need 3 more node(s) and may make 2" in out.unplaceable["default/a"]
    out = plan([gang("a", 3, 8)], [pool("p", 10.0, limits={"nvidia.com/gpu": 16_000})], [])
    assert "or its resource limits" in out.unplaceable["default/a"]
    out = plan([gang("a", 1, 8, gpu_models=("H100",))], [pool("p", 10.0)], [])
    assert out.unplaceable["default/a"] == "pool p: its GPU model A100 is not one of H100"
    out = plan([gang("a", 1, 8)], [pool("p", 10.0, spot=True)], [])
    assert (
        "do not tolerate its taint muster.dev/capacity-type=spot:NoSchedule" in out.unplaceable["default/a"]
    )
    assert plan([gang("a", 1, 8)], [], []).unplaceable["default/a"] == "no NodePool exists"


def test_flavor_node_labels_and_affinity_pick_the_pool():
    zone_b = Flavor("zone-b", node_labels={"topology.kubernetes.io/zone": "b"})
    pools = [
        pool("a", 5.0, labels={"topology.kubernetes.io/zone": "a"}),
        pool("b", 9.0, labels={"topology.kubernetes.io/zone": "b"}),
    ]
    g = gang("x", 1, 8)
    g.options = [[(zone_b,)]]
    assert plan([g], pools, []).launch[0].pool == "b"
    term = NodeSelectorTerm((NodeSelectorRequirement("topology.kubernetes.io/zone", "In", ("b",)),))
    assert plan([gang("y", 1, 8, node_affinity=(term,))], pools, []).launch[0].pool == "b"


def test_a_required_topology_level_keeps_the_gang_on_one_pool_or_one_node():
    pools = [pool("a", 5.0, labels={"rack": "r1"}), pool("b", 5.0, labels={"rack": "r2"})]
    out = plan([gang("x", 3, 8, topology_required="rack")], pools, [])
    assert len({n.pool for n in out.launch}) == 1 and len(out.launch) == 3
    out = plan([gang("y", 2, 8, topology_required="kubernetes.io/hostname")], pools, [])
    assert out.launch == [] and "cannot hold the whole gang" in out.unplaceable["default/y"]
    out = plan([gang("z", 2, 4, topology_required="kubernetes.io/hostname")], pools, [])
    assert len(out.launch) == 1


def test_min_nodes_are_topped_up_and_idle_nodes_go_after_the_ttl():
    out = plan([], [pool("p", 1.0, min_nodes=2)], [])
    assert [(n.pool, n.gangs) for n in out.launch] == [("p", []), ("p", [])]

    def idle(name: str, since: float) -> Bin:
        b = Bin(template(), {"cpu": 64_000}, [1000] * 8, pool="p", ready=True, empty_since=since)
        b.node = template()
        b.node.name = name
        return b

    bins = [idle("old", 0.0), idle("new", 250.0), idle("older", -10.0)]
    out = plan([], [pool("p", 1.0, nodes=3, min_nodes=1, ttl=300.0)], bins, now=320.0)
    assert [n for n, _ in out.remove] == ["older", "old"], "oldest first, one kept for minNodes"
    assert "empty for 330s" in out.remove[0][1]
    # a node some pending gang is planned onto stays (here half a gang: the verdict rule
    # keeps the gang off Ready nodes alone, so it also asks for a node)
    out = plan([gang("a", 2, 8)], [pool("p", 1.0, nodes=1, ttl=300.0)], [idle("old", 0.0)], now=320.0)
    assert out.remove == [] and out.waits["default/a"] == ["p#0"]


def test_plan_does_not_change_its_inputs():
    bins = [Bin(template(), {"cpu": 64_000}, [1000] * 8, pool=None, ready=False)]
    pools = [pool("p", 3.0)]
    before = (list(bins[0].gpu_free), dict(bins[0].free), pools[0].nodes)
    plan([gang("a", 1, 8), gang("b", 2, 8)], pools, bins)
    assert (bins[0].gpu_free, bins[0].free, pools[0].nodes) == before


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from([1, 2, 4, 8])), min_size=1, max_size=12),
    st.lists(st.tuples(st.sampled_from([4, 8]), st.floats(1, 40), st.integers(0, 6)), min_size=1, max_size=4),
)
def test_every_plan_fits_its_pools_and_holds_every_planned_gang(gangs_in, pools_in):
    gangs = [gang(f"g{i}", n, g) for i, (n, g) in enumerate(gangs_in)]
    pools = [
        pool(f"p{i}", price, gpus=gpus, max_nodes=most) for i, (gpus, price, most) in enumerate(pools_in)
    ]
    out = plan(gangs, pools, [])
    per_pool = {p.name: 0 for p in pools}
    for n in out.launch:
        per_pool[n.pool] += 1
    assert all(per_pool[p.name] <= p.max_nodes for p in pools)
    gpus = {p.name: p.template.gpus for p in pools}
    assert sum(gpus[n.pool] for n in out.launch) >= sum(
        n * g for (n, g), gg in zip(gangs_in, gangs, strict=True) if gg.key in out.waits
    )
    for g in gangs:
        assert (g.key in out.waits) != (g.key in out.unplaceable)


def test_a_topology_gang_goes_to_the_cheapest_pool_of_equal_rank():
    pools = [pool("dear", 9.0, labels={"rack": "r1"}), pool("cheap", 5.0, labels={"rack": "r2"})]
    out = plan([gang("x", 2, 8, topology_required="rack")], pools, [])
    assert [n.pool for n in out.launch] == ["cheap", "cheap"]


def test_anti_affinity_counts_one_node_per_pod_even_after_a_gang_like_it_without():
    # Two 4-GPU pods fit one 8-GPU node ("big", 1.0 a node) unless they must not share one:
    # then two 4-GPU nodes ("small", 0.6 a node) are cheaper than two big ones.
    pools = [pool("big", 1.0, gpus=8), pool("small", 0.6, gpus=4)]
    shared, apart = gang("shared", 2, 4), gang("apart", 2, 4, anti_affinity=True)
    apart.queue_time = 1.0
    out = plan([shared, apart], pools, [])
    assert [(n.pool, n.gangs) for n in out.launch] == [
        ("big", ["default/shared"]),
        ("small", ["default/apart"]),
        ("small", ["default/apart"]),
    ]
