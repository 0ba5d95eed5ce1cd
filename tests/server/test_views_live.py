"""The insight views on a running manager read only the Workloads and jobs still in play."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from muster.controllers.insight.explain.gather import gather
from muster.server import create_app
from muster.server.routes.insight import queues_usage_of
from muster.server.views import CacheSource, StoreSource, consistent_source, use_manager
from muster.store import Store
from tests.controllers.conftest import Harness, job


def test_why_on_the_cache_looks_at_the_workloads_and_jobs_in_play_only(
    three_jobs: Harness, sqlite_store: Store
):
    h = three_jobs
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


def test_queue_usage_on_the_cache_counts_the_same_from_the_workloads_in_play(
    three_jobs: Harness, sqlite_store: Store
):
    h = three_jobs
    live, every = CacheSource(sqlite_store, h.manager), StoreSource(sqlite_store)
    names = lambda objs: sorted(o["metadata"]["name"] for o in objs)  # noqa: E731
    assert names(live.list_live("Workload")) == ["running", "waiting"]
    assert names(every.list_live("Workload")) == ["done", "running", "waiting"]
    usage = queues_usage_of(live)
    assert usage == queues_usage_of(every)
    assert sum(q.admitted for q in usage) == 1 and sum(q.pending for q in usage) == 1


def test_a_view_reads_the_cache_once_it_has_every_change_the_store_had(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    h = Harness(sqlite_store, tmp_path / "home", gpus=2)
    try:
        app = create_app(sqlite_store, ["token"])
        use_manager(app, h.manager)
        h.apply(job("late", workers=1))  # written, and at once read back
        source, revision = consistent_source(app)
        assert isinstance(source, CacheSource) and revision == sqlite_store.revision()
        assert [j["metadata"]["name"] for j in source.list("TrainingJob")] == ["late"]
        # A cache that does not catch up in time: the view reads the store itself.
        monkeypatch.setattr(h.manager.ctx.cache, "caught_up", lambda revision, timeout: False)
        source, _ = consistent_source(app)
        assert type(source) is StoreSource
    finally:
        h.close()


def test_the_dashboards_views_answer_the_same_from_the_cache(three_jobs: Harness, sqlite_store: Store):
    h = three_jobs
    app = create_app(sqlite_store, ["token"])
    pages = ("/ui/api/overview", "/ui/api/queues", "/ui/api/jobs")
    with TestClient(app, headers={"Authorization": "Bearer token"}) as client:
        from_store = {p: client.get(p).json() for p in pages}
        use_manager(app, h.manager)
        from_cache = {p: client.get(p).json() for p in pages}
    for page in pages:
        assert from_cache[page] == from_store[page], page
    assert [q["admitted"] for q in from_cache["/ui/api/queues"]["clusterQueues"]] == [1]


def test_the_newest_events_come_from_the_managers_index(three_jobs: Harness, sqlite_store: Store):
    h = three_jobs
    live, every = CacheSource(sqlite_store, h.manager), StoreSource(sqlite_store)
    anyone = lambda ns, name: True  # noqa: E731
    stored = every.newest_events(1000, anyone)
    assert len(stored) > 5
    cached = live.newest_events(1000, anyone)
    assert sorted(e["metadata"]["name"] for e in cached) == sorted(e["metadata"]["name"] for e in stored)
    times = [e["lastTimestamp"] for e in cached]
    assert times == sorted(times, reverse=True)
    few = live.newest_events(3, anyone)
    assert len(few) == 3 and all(e in stored for e in few)
    assert live.newest_events(1000, lambda ns, name: ns != "default") == []


@pytest.fixture
def three_jobs(sqlite_store: Store, tmp_path: Path) -> Iterator[Harness]:
    """A manager with jobs done (finished), running (admitted, both GPUs) and waiting (pending)."""
    h = Harness(sqlite_store, tmp_path / "home", gpus=2)
    try:
        h.apply(job("done", workers=1))
        h.settle(lambda: bool(h.rt.pods_by_uid))
        h.rt.run_all()
        h.rt.exit("default/done-worker-0", 0)
        h.settle(lambda: h.has("TrainingJob", "done", "Succeeded"))
        h.apply(job("running", workers=2), job("waiting", workers=1))
        h.settle(lambda: h.has("Workload", "running", "Admitted"))
        yield h
    finally:
        h.close()
