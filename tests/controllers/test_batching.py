"""A manager pass writes in one transaction; the runtime acts only on what is committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from muster.api.lifecycle import EventSpec
from muster.controllers import cache as cache_module
from muster.store import Store
from muster.store.sql import SqlBatch
from muster.store.tx import Driver
from tests.controllers.conftest import Harness, job
from tests.store.test_batch import spy


def test_a_pass_commits_once_with_everything_it_decided(harness: Harness, monkeypatch: pytest.MonkeyPatch):
    h = harness
    commits: list[int] = []
    real = SqlBatch.commit

    def counting(self: SqlBatch) -> int:
        writes = self.writes
        revision = real(self)
        if writes:
            commits.append(writes)
        return revision

    h.apply(*(job(f"j{i}", workers=1) for i in range(4)))
    monkeypatch.setattr(SqlBatch, "commit", counting)
    before = h.store.revision()
    h.manager.ctx.cache.caught_up(before, timeout=10)
    h.manager.run_once(h.rt.poll())
    # One pass: every job Created/Queued/admitted, its Workload and pod created, the pods'
    # starts recorded, the Events: one commit (the runtime then started the pods).
    assert len(commits) == 1 and commits[0] >= 4 * 4
    assert sorted(h.rt.started) == [f"default/j{i}-worker-0" for i in range(4)]
    assert h.store.revision() - before >= commits[0]


def test_nothing_acts_on_a_pass_that_was_not_stored(sqlite_store: Store, tmp_path: Path, monkeypatch: Any):
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        h.apply(job("train", workers=1))
        _fail_the_next_commit(monkeypatch)
        h.manager.ctx.cache.caught_up(h.store.revision(), timeout=10)
        with pytest.raises(OSError, match="disk full"):
            h.manager.run_once(h.rt.poll())
        assert h.rt.started == []  # no process for a start that was never stored
        cache = h.manager.ctx.cache
        assert cache.get("Pod", "train-worker-0", "default") is None  # taken back out of the cache
        assert cache.get("Workload", "train", "default") is None
        assert h.store.list("Pod").items == []
        # The next pass decides again from what is stored, and this time it sticks.
        h.settle(lambda: h.rt.started == ["default/train-worker-0"])
        assert h.get("Pod", "train-worker-0")["status"]["handle"]["runtime"] == "local"
    finally:
        h.close()


def test_a_pass_whose_only_write_failed_still_ends_its_transaction(harness: Harness):
    from muster.store.base import NotFound

    ctx = harness.manager.ctx
    with ctx.batch(), pytest.raises(NotFound):
        ctx.writer().delete("TrainingJob", "never-was", "default")
    # The failed delete began the transaction; had the pass not ended it, the store's write
    # lock would still be held and this write would wait forever.
    harness.apply(job("after", workers=1))
    assert harness.store.get("TrainingJob", "after", "default")


def test_a_start_whose_mark_was_rolled_back_is_started_by_a_later_pass(
    sqlite_store: Store, tmp_path: Path, monkeypatch: Any
):
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        executor = h.manager.executor
        real_sync = executor.sync
        monkeypatch.setattr(executor, "sync", lambda pods: None)  # the pod is stored, not started
        h.apply(job("train", workers=1))
        h.settle(lambda: h.get("Pod", "train-worker-0") is not None)
        assert h.rt.started == []
        monkeypatch.setattr(executor, "sync", real_sync)
        _fail_the_next_commit(monkeypatch)
        h.manager.ctx.cache.caught_up(h.store.revision(), timeout=10)
        h.manager.ctx.cache.mark([("Pod", "default", "train-worker-0")])
        with pytest.raises(OSError, match="disk full"):
            h.manager.run_once(h.rt.poll())  # marks the start; the mark is rolled back
        assert h.rt.started == []
        # The executor must not wait forever on a start that will never come.
        h.settle(lambda: h.rt.started == ["default/train-worker-0"])
    finally:
        h.close()


def test_every_after_commit_action_runs_though_one_fails_and_undo_runs_on_rollback(harness: Harness):
    ctx = harness.manager.ctx
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"), ctx.batch():
        ctx.writer().create(job("one", workers=1))
        ctx.after_commit(boom)
        ctx.after_commit(lambda: ran.append("second"), undo=lambda: ran.append("undone"))
    assert ran == ["second"]
    ran.clear()
    with pytest.raises(ValueError), ctx.batch():
        ctx.writer().create(job("two", workers=1))
        ctx.after_commit(lambda: ran.append("acted"), undo=lambda: ran.append("undone"))
        raise ValueError("the pass failed")
    assert ran == ["undone"]


def _fail_the_next_commit(monkeypatch: Any) -> None:
    """The next commit that has writes rolls back and raises OSError("disk full"); later ones
    commit as usual."""
    real = SqlBatch.commit
    failures = [1]

    def failing(self: SqlBatch) -> int:
        if failures and self.writes:
            failures.pop()
            self.rollback()
            raise OSError("disk full")
        return real(self)

    monkeypatch.setattr(SqlBatch, "commit", failing)


def test_a_slow_full_resync_comes_less_often(sqlite_store, tmp_path, monkeypatch):
    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=10)
    fulls: list[float] = []
    real_resync = h.manager.executor.resync
    monkeypatch.setattr(h.manager.executor, "resync", lambda: (fulls.append(h.clock()), real_resync())[1])
    ticks = iter(range(0, 10_000, 2))  # every pass "takes" 2 s of the loop's time
    monkeypatch.setattr("muster.controllers.manager._elapsed", lambda: float(next(ticks)))
    for _ in range(9):  # a pass every 11 s, from 0 to 88
        h.manager.run_once()
        h.clock.advance(11)
    # A resync that took 2 s is not due again for 40 s (5% of the loop's time), not 10.
    assert [round(t - fulls[0]) for t in fulls] == [0, 44, 88]


def test_a_pass_reads_neither_what_the_cache_holds_nor_its_events_one_by_one(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
):
    h = harness
    h.apply(*(job(f"j{i}", workers=1) for i in range(4)))
    cache = h.manager.ctx.cache
    assert cache.caught_up(h.store.revision(), timeout=10)
    # However slow the follower is here, each transaction of the pass waits for it to catch up.
    monkeypatch.setattr(cache_module, "_REPLICA_WAIT", 10.0)
    loads = spy(monkeypatch, Driver, "load")
    h.manager.run_once(h.rt.poll())
    assert sorted(h.rt.started) == [f"default/j{i}-worker-0" for i in range(4)]
    assert len(h.store.list("Event").items) >= 4 * 3  # created, admitted, pod started, ...
    assert [kind for kind, *_ in loads if kind in cache.kinds or kind == "Event"] == []


def test_events_of_a_pass_that_was_rolled_back_are_not_written_by_the_next(harness: Harness):
    h = harness
    h.apply(job("a", workers=1))
    ctx = h.manager.ctx
    a = h.store.get("TrainingJob", "a", "default")
    with pytest.raises(RuntimeError, match="the pass failed"), ctx.batch():
        ctx.event(a, EventSpec("Normal", "Lost", "recorded by a pass that failed"))
        raise RuntimeError("the pass failed")
    with ctx.batch():
        ctx.event(a, EventSpec("Normal", "Kept", "recorded by a pass that committed"))
    reasons = {e["reason"] for e in h.store.list("Event").items}
    assert "Kept" in reasons and "Lost" not in reasons


def test_the_usage_records_of_pods_started_in_one_pass_are_read_in_one_query(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
):
    # A record's create must know whether it was written before; the cache holds no
    # UsageRecords, so each was a read of its own (on PostgreSQL, a round trip).
    h = harness
    h.apply(*(job(f"u{i}", workers=1) for i in range(4)))
    h.settle(lambda: len(h.rt.started) == 4)
    loads = spy(monkeypatch, Driver, "load")
    many = spy(monkeypatch, Driver, "load_many")
    h.rt.run_all()
    h.settle(lambda: len(_pod_records(h.store)) == 4)
    assert [args for args in loads if args[0] == "UsageRecord"] == []
    names = [n for kind, _ns, batch in many if kind == "UsageRecord" for n in batch]
    assert sorted(names) == sorted(_pod_records(h.store))


def _pod_records(store: Store) -> list[str]:
    names = [r["metadata"]["name"] for r in store.list("UsageRecord").items]
    return [n for n in names if n.startswith("pod-")]
