"""The insight views on a running manager read only the Workloads and jobs still in play."""

from __future__ import annotations

from pathlib import Path

from muster.controllers.insight.explain.gather import gather
from muster.server.routes.insight import queues_usage_of
from muster.server.views import CacheSource, StoreSource
from muster.store import Store
from tests.controllers.conftest import Harness, job


def test_why_on_the_cache_looks_at_the_workloads_and_jobs_in_play_only(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", gpus=2)
    try:
        _one_done_one_admitted_one_waiting(h)
        h.rt.run_all()
        h.settle(lambda: h.has("TrainingJob", "running", "Running"))
        waiting = h.job("waiting")
        live = gather(CacheSource(sqlite_store, h.manager), waiting)
        every = gather(StoreSource(sqlite_store), waiting)
        names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
        assert names(every.workloads) == ["done", "running", "waiting"]
        assert names(live.workloads) == ["running", "waiting"]  # the finished one plays no part
        assert names(live.jobs) == ["running", "waiting"]
        assert live.workload == every.workload and live.job == every.job
    finally:
        h.close()


def test_queue_usage_on_the_cache_counts_the_same_from_the_workloads_in_play(
    sqlite_store: Store, tmp_path: Path
):
    h = Harness(sqlite_store, tmp_path / "home", gpus=2)
    try:
        _one_done_one_admitted_one_waiting(h)
        live, every = CacheSource(sqlite_store, h.manager), StoreSource(sqlite_store)
        names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
        assert names(live.list_live("Workload")) == ["running", "waiting"]
        assert names(every.list_live("Workload")) == ["done", "running", "waiting"]
        usage = queues_usage_of(live)
        assert usage == queues_usage_of(every)
        assert sum(q.admitted for q in usage) == 1 and sum(q.pending for q in usage) == 1
    finally:
        h.close()


def _one_done_one_admitted_one_waiting(h: Harness) -> None:
    """Jobs done (finished), running (admitted, both GPUs) and waiting (pending)."""
    h.apply(job("done", workers=1))
    h.settle(lambda: bool(h.rt.pods_by_uid))
    h.rt.run_all()
    h.rt.exit("default/done-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", "done", "Succeeded"))
    h.apply(job("running", workers=2), job("waiting", workers=1))
    h.settle(lambda: h.has("Workload", "running", "Admitted"))
