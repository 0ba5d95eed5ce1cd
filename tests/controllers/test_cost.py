"""The cost report: pods charged their share of their node's price, nodes their price, idle
per pool, windows, groupings and the chart's buckets; doctor's idle-pool finding."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api.conditions import iso
from muster.controllers.insight.checks import pool_idle_cost
from muster.controllers.insight.cost import cost_report, group_key
from muster.controllers.insight.findings import Inputs, Thresholds

Obj = dict[str, Any]
H = 3600.0


def pod(
    name: str,
    start: float,
    end: float | None,
    gpus: float,
    node_gpus: int = 8,
    price: float = 16.0,
    **spec: Any,
) -> Obj:
    body = {
        "type": "Pod",
        "namespace": spec.pop("namespace", "team-a"),
        "name": name,
        "node": "n1",
        "nodePool": spec.pop("pool", "a100"),
        "gpus": gpus,
        "nodeGpus": node_gpus,
        "pricePerHour": price,
        "start": iso(start),
        **spec,
    }
    if end is not None:
        body["end"] = iso(end)
    return {"kind": "UsageRecord", "metadata": {"name": f"pod-{name}"}, "spec": body}


def node(
    name: str, start: float, end: float | None, price: float = 16.0, pool: str = "a100", gpus: int = 8
) -> Obj:
    body = {
        "type": "Node",
        "name": name,
        "node": name,
        "nodePool": pool,
        "nodeGpus": gpus,
        "gpus": gpus,
        "pricePerHour": price,
        "start": iso(start),
    }
    if end is not None:
        body["end"] = iso(end)
    return {"kind": "UsageRecord", "metadata": {"name": f"node-{name}"}, "spec": body}


T0 = 1_700_000_000.0


def test_pods_pay_their_gpu_share_and_the_pool_the_rest_as_idle():
    records = [
        node("n1", T0, T0 + 2 * H),
        pod("a", T0, T0 + H, 4, job="train", queue="research", labels={"team": "vision"}),
        pod("b", T0, T0 + 2 * H, 2, namespace="team-b", job="eval", labels={}),
    ]
    r = cost_report(records, T0, T0 + 2 * H, by="namespace")
    rows = {x.key: x for x in r.rows}
    assert rows["team-a"].cost == pytest.approx(8.0) and rows["team-a"].gpu_hours == pytest.approx(4.0)
    assert rows["team-b"].cost == pytest.approx(8.0) and rows["team-b"].gpu_hours == pytest.approx(4.0)
    assert r.total_cost == pytest.approx(32.0) and r.idle_cost == pytest.approx(16.0)
    [pool] = r.pools
    assert (pool.pool, pool.idle_cost, pool.idle_pct) == ("a100", pytest.approx(16.0), pytest.approx(50.0))
    assert {x.key for x in cost_report(records, T0, T0 + 2 * H, by="label:team").rows} == {"vision", "(none)"}
    assert cost_report(records, T0, T0 + 2 * H, by="job").rows[0].key in ("team-a/train", "team-b/eval")


def test_a_window_cuts_records_and_open_ones_run_to_its_end():
    records = [node("n1", T0, None), pod("a", T0, None, 8)]
    r = cost_report(records, T0 + H, T0 + 3 * H)
    assert r.rows[0].cost == pytest.approx(32.0) and r.idle_cost == pytest.approx(0.0)


def test_chargeback_spreads_idle_pro_rata_and_buckets_give_the_chart():
    records = [
        node("n1", T0, T0 + 2 * H),
        pod("a", T0, T0 + 2 * H, 2),
        pod("b", T0, T0 + 2 * H, 2, namespace="x"),
    ]
    r = cost_report(records, T0, T0 + 2 * H, spread_idle=True, bucket=H)
    assert sum(x.cost + x.idle_share for x in r.rows) == pytest.approx(r.total_cost)
    assert len(r.series) == 2 and sum(r.series[0]["cost"].values()) == pytest.approx(8.0)


def test_shares_and_cpu_nodes():
    r = cost_report([pod("a", T0, T0 + H, 0.25, node_gpus=1, price=4.0)], T0, T0 + H)
    assert r.rows[0].cost == pytest.approx(1.0)
    cpu = pod("c", T0, T0 + H, 0, node_gpus=0, price=2.0, cpu=4.0, nodeCpu=16.0)
    assert cost_report([cpu], T0, T0 + H).rows[0].cost == pytest.approx(0.5)


def test_bad_windows_and_groupings_are_refused():
    with pytest.raises(ValueError, match="end after it starts"):
        cost_report([], T0, T0)
    with pytest.raises(ValueError, match="cannot group by 'colour'"):
        cost_report([], T0, T0 + 1, by="colour")
    assert group_key(pod("a", T0, None, 1, capacityType="spot"), "capacity-type") == "spot"


def test_doctor_names_a_pool_paying_for_idle_nodes():
    records = [
        node("n1", T0 - 2 * H, None, price=30.0),
        node("n2", T0 - 2 * H, None, price=30.0),
        pod("a", T0 - H, None, 8, price=30.0),
    ]
    found = pool_idle_cost(Inputs(usage_records=records, now=T0), Thresholds(idle_pool_cost=5.0))
    assert [f.code for f in found] == ["PoolIdleCost"]
    assert "NodePool a100 paid 30.00 per hour for idle capacity" in found[0].title
    assert pool_idle_cost(Inputs(usage_records=records, now=T0), Thresholds(idle_pool_cost=40.0)) == []
