"""Timed replay on tiny traces computed by hand: queue order, policies, preemption with
checkpoint loss, and the metrics.

Cluster: one node with 2 GPUs; queues ``a`` and ``b`` with 1 GPU of nominal quota each.
"""

from __future__ import annotations

import numpy as np
import pytest

from muster.sim.philly import PhillyJobs
from muster.sim.philly_config import ClusterConfig, QueueConfig
from muster.sim.philly_metrics import compute_metrics, utilization_series
from muster.sim.timed import ReplaySpec, TimedReplay, pod_shape

CLUSTER = ClusterConfig(nodes=1, gpus_per_node=2)
QUEUES = [QueueConfig(name="a", nominal_gpus=1), QueueConfig(name="b", nominal_gpus=1)]


def jobs(rows: list[tuple[float, float, int, str]]) -> PhillyJobs:
    from datetime import datetime

    return PhillyJobs(
        origin=datetime(2017, 10, 1),
        submit=np.array([r[0] for r in rows], dtype=float),
        duration=np.array([r[1] for r in rows], dtype=float),
        gpus=np.array([r[2] for r in rows], dtype=np.int64),
        queue=np.array([["a", "b"].index(r[3]) for r in rows], dtype=np.int32),
        queues=["a", "b"],
    )


def replay(rows: list[tuple[float, float, int, str]], **spec: object) -> object:
    return TimedReplay(jobs(rows), CLUSTER, QUEUES, ReplaySpec(**spec)).run()  # type: ignore[arg-type]


# j0 holds one GPU until 100; j1 (2 GPUs) must wait for it; j2 (1 GPU) arrives behind j1.
ORDER = [(0, 100, 1, "a"), (10, 50, 2, "b"), (20, 30, 1, "b")]


def test_fifo_head_blocks_its_queue() -> None:
    """StrictFIFO: j2 may not pass j1, which starts at 100 when j0 ends; j2 follows at 150."""
    r = replay(ORDER, policy="fifo")
    assert r.start.tolist() == [0, 100, 150]
    assert r.finish.tolist() == [100, 150, 180]
    m = compute_metrics(r)
    assert m.jct.mean == pytest.approx((100 + 140 + 160) / 3)
    assert m.wait.mean == pytest.approx((0 + 90 + 130) / 3)
    assert m.wait.p50 == 90


def test_priority_lets_the_small_job_pass() -> None:
    """priority = -GPUs under BestEffortFIFO: j2 (1 GPU) runs at once from 20 to 50."""
    r = replay(ORDER, policy="priority")
    assert r.start.tolist() == [0, 100, 20]
    assert r.finish.tolist() == [100, 150, 50]


@pytest.mark.parametrize(("interval", "kept"), [(40.0, 0.0), (20.0, 20.0), (0.0, 0.0)])
def test_reclaim_preempts_and_loses_work_since_the_checkpoint(interval: float, kept: float) -> None:
    """j0 (a, 2 GPUs) borrows b's GPU; j1 (b, 1 GPU) arrives at 30 and reclaims it. j0 ran
    30 s: with checkpoints every 40 s nothing is kept, every 20 s the first 20 s are. j1 runs
    30..40; j0 is back in its queue at 35 (5 s to stop), starts at 40 once j1 is done, and
    runs its remaining 100 - kept seconds."""
    r = replay(
        [(0, 100, 2, "a"), (30, 10, 1, "b")],
        policy="fifo",
        preemption=True,
        checkpoint_interval=interval,
        requeue_delay=5.0,
    )
    assert r.preemptions.tolist() == [1, 0]
    assert r.preemption_reasons == {"InCohortReclamation": 1}
    assert r.start.tolist() == [0, 30]  # first admissions
    assert r.finish.tolist() == [40 + 100 - kept, 40]
    assert r.lost_gpu_seconds.tolist() == [(30 - kept) * 2, 0]
    m = compute_metrics(r)
    assert m.preempted_jobs == 1 and m.lost_gpu_hours == pytest.approx((30 - kept) * 2 / 3600)


def test_without_preemption_the_borrower_keeps_its_gpus() -> None:
    r = replay([(0, 100, 2, "a"), (30, 10, 1, "b")], policy="fifo")
    assert r.start.tolist() == [0, 100] and r.preemptions.sum() == 0


def test_usage_borrowing_and_utilization() -> None:
    """j0 (a) uses 2 GPUs for 100 s: 200 GPU-s, 100 of them above a's nominal 1."""
    r = replay([(0, 100, 2, "a"), (150, 50, 1, "b")], policy="fair")
    assert r.queue_gpu_seconds.tolist() == [200, 50]
    assert r.queue_borrowed_seconds.tolist() == [100, 0]
    m = compute_metrics(r)
    assert m.utilization_pct == pytest.approx(100 * 250 / (2 * 200))
    starts, pct = utilization_series(r, bucket=100.0)
    assert starts.tolist() == [0, 100] and pct.tolist() == [100.0, 25.0]
    a, b = m.queues
    assert (a.demand_pct, a.used_pct, a.vs_quota) == pytest.approx((80.0, 80.0, 1.0))
    assert (b.borrowed_gpu_hours, b.avg_gpus) == pytest.approx((0.0, 50 / 200))


def test_jobs_larger_than_the_cluster_are_dropped_and_gangs_split() -> None:
    r = replay([(0, 10, 4, "a"), (0, 10, 1, "b")], policy="fifo")
    assert r.dropped.tolist() == [True, False]
    assert np.isnan(r.start[0]) and r.finish[1] == 10
    assert pod_shape(12, 8) == (2, 6) and pod_shape(16, 8) == (2, 8) and pod_shape(3, 8) == (1, 3)
    assert pod_shape(6, 4) == (2, 3) and pod_shape(7, 4) == (7, 1)


def test_same_spec_same_result() -> None:
    rows = [(i * 7.0, 50 + (i * 13) % 40, 1 + i % 2, "ab"[i % 3 == 0]) for i in range(40)]
    one = replay(rows, policy="fair", preemption=True)
    two = replay(rows, policy="fair", preemption=True)
    np.testing.assert_array_equal(one.finish, two.finish)
    np.testing.assert_array_equal(one.start, two.start)
