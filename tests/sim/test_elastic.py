"""Elastic replays: the pools grow from zero for waiting jobs, shrink when idle, spot nodes are
interrupted with their jobs requeued ahead of newer ones; ``muster sim philly --pools``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from muster.cli.app import app
from muster.sim.elastic import ElasticReplay, ElasticSpec, SimPool, peak_demand
from muster.sim.philly import PhillyJobs
from muster.sim.philly_config import ClusterConfig, QueueConfig
from muster.sim.timed import ReplaySpec
from tests.sim.tiny_traces import write_philly


def jobs(rows: list[tuple[float, float, int]]) -> PhillyJobs:
    return PhillyJobs(
        origin=datetime(2017, 10, 1),
        submit=np.array([r[0] for r in rows], dtype=float),
        duration=np.array([r[1] for r in rows], dtype=float),
        gpus=np.array([r[2] for r in rows], dtype=np.int64),
        queue=np.zeros(len(rows), dtype=np.int32),
        queues=["a"],
    )


NONE = ClusterConfig(nodes=1, gpus_per_node=8).model_copy(update={"nodes": 0})


def replay(trace: PhillyJobs, *pools: SimPool, rate: float = 0.0, ckpt: float = 1800.0, seed: int = 0):
    total = sum(p.gpus * p.max_nodes for p in pools)
    spec = ReplaySpec(policy="fifo", checkpoint_interval=ckpt, requeue_delay=30.0)
    elastic = ElasticSpec(pools, spot_rate=rate, autoscale_interval=10.0, seed=seed)
    return ElasticReplay(
        trace, NONE, [QueueConfig(name="a", nominal_gpus=total)], spec, elastic
    ).run_elastic()


def test_jobs_wait_for_the_delay_and_idle_nodes_go_after_the_ttl():
    trace = jobs([(0.0, 3600.0, 8), (10.0, 3600.0, 4), (20.0, 3600.0, 4)])
    r = replay(trace, SimPool("od", 8, 10.0, 4, delay=120.0, ttl=300.0))
    res = r.replay
    assert r.launched == {"od": 2}, "one node for the 8-GPU job, one shared by the two 4-GPU jobs"
    assert res.start[0] == 120.0 and res.start[1] == res.start[2] == 130.0
    # each node is paid from the request to the end of the TTL after its jobs finished
    hours = r.node_hours["od"]
    assert 2 * (3600 + 120) / 3600 <= hours <= 2 * (3600 + 120 + 300 + 30) / 3600
    assert abs(r.cost - 10.0 * hours) < 1e-6
    assert r.interruptions == 0 and not res.dropped.any()


def test_spot_interruptions_requeue_the_work_with_what_it_checkpointed():
    trace = jobs([(0.0, 4 * 3600.0, 8)])
    r = replay(
        trace, SimPool("spot", 8, 3.0, 2, spot=True, delay=60.0, ttl=60.0), rate=2.0, ckpt=600.0, seed=3
    )
    res = r.replay
    assert 1 <= res.preemptions[0] <= r.interruptions, "a notice may hit a node its job has not reached"
    assert not np.isnan(res.finish[0])
    # it ran 4 h of work plus what it redid after each interruption, plus the waits for nodes
    assert res.finish[0] >= 4 * 3600.0 + 60.0
    assert 0 < r.interrupted_lost_gpu_seconds <= r.interruptions * 600.0 * 8


def test_the_fixed_cluster_and_a_pool_see_the_same_jobs_finish():
    trace = jobs([(0.0, 600.0, 8), (0.0, 600.0, 8), (700.0, 600.0, 8)])
    assert peak_demand(trace) == 16
    fixed = ElasticReplay(
        trace,
        ClusterConfig(nodes=2, gpus_per_node=8),
        [QueueConfig(name="a", nominal_gpus=16)],
        ReplaySpec(),
        ElasticSpec((), static_price=5.0),
    ).run_elastic()
    pooled = replay(trace, SimPool("od", 8, 5.0, 2, delay=30.0, ttl=30.0))
    assert (~np.isnan(fixed.replay.finish)).all() and (~np.isnan(pooled.replay.finish)).all()
    assert fixed.cost == 2 * 5.0 * fixed.replay.end_time / 3600
    assert pooled.cost < fixed.cost


POOLS = """apiVersion: muster.dev/v1
kind: NodePool
metadata: {name: spot}
spec:
  provider: local
  template: {gpus: 2, gpuModel: V100}
  capacityType: spot
  pricePerHour: 1.5
  maxNodes: 2
  provisioningDelaySeconds: 20
"""


def test_muster_sim_philly_with_pools(tmp_path: Path):
    rows = [("2017-10-01 00:00:00", 100.0, 2, "a"), ("2017-10-01 00:00:30", 10.0, 1, "b")]
    root = write_philly(tmp_path / "traces", rows, name="philly")
    pools = tmp_path / "pools.yaml"
    pools.write_text(POOLS)
    out = tmp_path / "out"
    args = ["sim", "philly", "--trace-dir", str(root), "--pools", str(pools), "--out", str(out), "-o", "json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    [fifo] = doc["replays"]
    assert fifo["finished"] == 2 and fifo["cost"] > 0 and fifo["nodesLaunched"] >= 1
    assert fifo["wait"]["p50"] >= 20, "nothing runs before the first node is up"
    assert "spot (max 2 x 2 GPUs, spot, 1.5/h)" in doc["described"]["cluster"]
    assert (out / "philly-capacity.md").read_text().count("| fifo |") == 1
    pools.write_text(POOLS.replace("maxNodes: 2", "maxNodes: 1\n  minNodes: 3"))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "pools.yaml[0] spec.maxNodes: must be >= minNodes (3)" in res.output
