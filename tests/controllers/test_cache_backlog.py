"""A list reports what is in play at once and settled objects (finished jobs) a slice per pass,
so that a restart over many finished jobs runs a new one after a small first pass."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from muster.controllers.cache import Cache
from muster.store import Store
from muster.testing.factories import training_job
from tests.controllers.conftest import Harness, job


def _cache(store: Store, freeze: bool = False) -> Cache:
    return Cache(
        store,
        kinds=("TrainingJob",),
        live={"TrainingJob": lambda o: "done" not in o.get("status", {})},
        freeze=freeze,
    )


def _store_jobs(store: Store, live: int, done: int) -> None:
    for i in range(live):
        store.create(training_job(f"live-{i}"))
    for i in range(done):
        created = store.create(training_job(f"done-{i}"))
        store.update_status({**created, "status": {"done": True}})


def _names(changes: dict) -> list[str]:
    return sorted(name for _kind, _ns, name in changes)


def test_a_list_reports_settled_objects_a_slice_at_a_time_after_those_in_play(sqlite_store: Store):
    _store_jobs(sqlite_store, live=2, done=5)
    cache = _cache(sqlite_store)
    cache.start()
    try:
        assert _names(cache.take_changes()) == ["live-0", "live-1"]
        assert len(cache.backlog()) == 5 and cache.dirty  # the loop must not wait on it
        slices = []
        while cache.backlog():
            left = cache.drip(2)
            assert left == len(cache.backlog())
            slices.append(_names(cache.take_changes()))
        assert [len(s) for s in slices] == [2, 2, 1]
        assert sorted(n for s in slices for n in s) == [f"done-{i}" for i in range(5)]
        assert not cache.dirty and cache.drip(2) == 0 and cache.take_changes() == {}
    finally:
        cache.stop()


def test_a_waiting_object_that_changes_is_reported_at_once_and_only_once(sqlite_store: Store):
    _store_jobs(sqlite_store, live=0, done=3)
    cache = _cache(sqlite_store)
    cache.start()
    try:
        cache.take_changes()
        stored = sqlite_store.get("TrainingJob", "done-1", "default")
        changed = sqlite_store.update_status({**stored, "status": {"done": True, "again": 1}})
        assert cache.caught_up(int(changed["metadata"]["resourceVersion"]), timeout=10)
        assert _names(cache.take_changes()) == ["done-1"]
        gone = sqlite_store.delete("TrainingJob", "done-2", "default")
        assert cache.caught_up(int(gone["metadata"]["resourceVersion"]), timeout=10)
        assert _names(cache.take_changes()) == ["done-2"]  # reported as deleted, at once
        assert cache.backlog() == {("TrainingJob", "default", "done-0")}
        cache.drip(10)
        assert _names(cache.take_changes()) == ["done-0"]
    finally:
        cache.stop()


def test_freeze_exempts_the_listed_objects_from_the_collector_until_stop(sqlite_store: Store):
    _store_jobs(sqlite_store, live=1, done=1)
    before = gc.get_freeze_count()  # a library may have frozen some at import
    cache = _cache(sqlite_store, freeze=True)
    cache.start()
    try:
        held = cache.get("TrainingJob", "done-0", "default")
        assert gc.get_freeze_count() > before and gc.is_tracked(held)
        assert gc.isenabled()  # paused only while listing
    finally:
        cache.stop()
    assert gc.get_freeze_count() == 0


def test_a_restart_runs_a_new_job_in_its_first_pass_and_the_finished_ones_after(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    first = Harness(sqlite_store, tmp_path / "home")
    for i in range(5):
        first.apply(job(f"old-{i}", workers=1))
        first.settle(
            lambda i=i: f"default/old-{i}-worker-0" in {str(p.ref) for p in first.rt.pods_by_uid.values()}
        )
        first.rt.run_all()
        first.rt.exit(f"default/old-{i}-worker-0", 0)
        first.settle(lambda i=i: first.has("TrainingJob", f"old-{i}", "Succeeded"))
    first.close()

    monkeypatch.setattr("muster.controllers.manager._BACKLOG_SLICE", 2)
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        looked: list[list[str]] = []
        real = h.manager.jobs.reconcile
        monkeypatch.setattr(
            h.manager.jobs, "reconcile", lambda j: (looked[-1].append(j["metadata"]["name"]), real(j))[1]
        )
        h.apply(job("fresh", workers=1))
        assert h.manager.ctx.cache.caught_up(sqlite_store.revision(), timeout=10)
        looked.append([])
        h.manager.run_once(h.rt.poll())
        # The first pass (a full resync) looks at the new job and admits it, and at one slice of
        # the finished ones (two), not at all of them; the others come two per pass after it.
        assert "fresh" in looked[0]
        assert h.has("Workload", "fresh", "Admitted")
        while h.manager.ctx.cache.backlog():
            looked.append([])
            h.manager.run_once(h.rt.poll())
        finished = [sorted({n for n in names if n.startswith("old-")}) for names in looked]
        # (the finished jobs, their Workloads and their pods: 15 keys, two per pass)
        assert len(finished) == 8 and all(len(names) <= 2 for names in finished)
        assert sorted({n for names in finished for n in names}) == [f"old-{i}" for i in range(5)]
    finally:
        h.close()
