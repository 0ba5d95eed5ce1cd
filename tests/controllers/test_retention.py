"""Retention: Events expire and are capped per object; finished pods of finished jobs beyond a
threshold go, oldest first."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from muster.api.conditions import iso
from muster.api.lifecycle import EventSpec
from muster.store import Store
from tests.controllers.conftest import START, Harness, job


def _run_to_success(h: Harness, name: str) -> None:
    h.apply(job(name, workers=1))
    h.settle(lambda: f"default/{name}-worker-0" in h.rt.started)
    h.rt.run_all()
    h.rt.exit(f"default/{name}-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", name, "Succeeded"))


def _events(h: Harness) -> list[dict]:
    return h.store.list("Event", "default").items


def test_events_expire_after_their_time_to_live(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=3600, event_ttl_seconds=600)
    try:
        _run_to_success(h, "old")
        assert any(e["involvedObject"]["name"] == "old" for e in _events(h))
        h.clock.advance(300)
        _run_to_success(h, "new")
        h.clock.advance(400)  # "old"'s events are 700 s old, "new"'s 400 s
        h.settle()
        names = {e["involvedObject"]["name"] for e in _events(h)}
        assert "new" in names and "old" not in names
        h.clock.advance(601)
        h.settle()
        assert _events(h) == []
    finally:
        h.close()


def test_many_expired_events_go_a_slice_per_pass_oldest_first(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("muster.controllers.retention.events._SWEEP_SLICE", 3)
    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=3600, event_ttl_seconds=600)
    try:
        for i in range(3):
            _run_to_success(h, f"j{i}")
            h.clock.advance(10)
        h.clock.advance(700)  # every Event expired
        about = {e["metadata"]["name"]: e["involvedObject"]["name"] for e in _events(h)}
        counts = [len(about)]
        while counts[-1]:
            h.manager.run_once(h.rt.poll())
            left = {e["metadata"]["name"] for e in _events(h)}
            if len(counts) == 1:  # the oldest (j0's, recorded first) went first
                assert all(about[n].startswith("j0") for n in set(about) - left)
            counts.append(len(left))
            # While more are due, the sweep asks for the next pass at once.
            assert (h.manager.events.next_time() == h.clock()) == (counts[-1] > 0)
        assert [a - b for a, b in itertools.pairwise(counts)][:-1] == [3] * (len(counts) - 2)
        assert counts[-2] <= 3
    finally:
        h.close()


def test_an_object_keeps_its_most_recent_events_only(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", events_per_object=3)
    try:
        _run_to_success(h, "train")
        job_obj = h.job("train")
        ctx = h.manager.ctx
        for i in range(5):
            h.clock.advance(1)
            with ctx.batch():
                ctx.event(job_obj, EventSpec("Normal", "Note", f"note {i}"))
        mine = [e for e in _events(h) if e["involvedObject"]["uid"] == job_obj["metadata"]["uid"]]
        assert sorted(e["message"] for e in mine) == ["note 2", "note 3", "note 4"]
        # The index survives a restart: a new manager lists the Events it finds.
        h.close()
        h = Harness(sqlite_store, tmp_path / "home", events_per_object=3)
        assert h.manager.events.known == len(_events(h))
    finally:
        h.close()


def test_finished_pods_beyond_the_limit_go_oldest_first(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", finished_pod_limit=2)
    try:
        for name in ("a", "b", "c"):
            h.clock.advance(10)
            _run_to_success(h, name)
        # A job still running keeps its finished pod whatever the count.
        h.apply(job("running", workers=2))
        h.settle(lambda: len([k for k in h.rt.started if k.startswith("default/running")]) == 2)
        h.rt.run_all()
        h.rt.exit("default/running-worker-0", 0)
        h.clock.advance(10)
        # Four finished pods, two allowed: a's and b's go; the running job's stays (not removable).
        h.settle(lambda: set(h.pods()) == {"c-worker-0", "running-worker-0", "running-worker-1"})
        assert h.pods()["running-worker-0"]["status"]["phase"] == "Succeeded"
        assert h.has("TrainingJob", "a", "Succeeded")  # the job stays; only its pod went
    finally:
        h.close()


def test_usage_records_expire_from_the_ledgers_index_without_listing_every_record_again(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def record(name: str, end: float | None) -> dict:
        spec = {
            "type": "Pod",
            "name": name,
            "uid": f"uid-{name}",
            "node": "n1",
            "start": iso(START - 4 * 3600),
        }
        return {
            "apiVersion": "muster.dev/v1",
            "kind": "UsageRecord",
            "metadata": {"name": name},
            "spec": {**spec, **({"end": iso(end)} if end is not None else {})},
        }

    # Closed 3 h and 1.5 h ago, and one still open whose pod is gone (closed at the first pass).
    sqlite_store.apply([record("a", START - 3 * 3600), record("b", START - 1.5 * 3600), record("c", None)])
    listed: list[str] = []
    store_list = sqlite_store.list
    monkeypatch.setattr(
        sqlite_store, "list", lambda kind, *a, **kw: listed.append(kind) or store_list(kind, *a, **kw)
    )

    def records() -> list[str]:
        return sorted(r["metadata"]["name"] for r in store_list("UsageRecord").items)

    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=3600)
    try:
        h.manager.capacity.ledger.retention = 7200.0  # closed over 2 h ago: gone at the hourly check
        h.settle()
        assert records() == ["b", "c"]
        h.clock.advance(3601)
        h.settle()
        assert records() == ["c"]
        h.clock.advance(3601)  # "c" was closed at the first pass, 7,202 s before
        h.settle()
        assert records() == []
        assert listed.count("UsageRecord") == 1  # loaded once; what expires comes from its index
    finally:
        h.close()


def test_a_full_resync_does_not_write_the_usage_records_of_finished_pods_again(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A finished pod kept for a while has its record closed: every full resync (each pass here)
    once tried to create it again, a read of the store per finished pod (AlreadyExists)."""
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        _run_to_success(h, "done")
        assert [r["spec"]["name"] for r in sqlite_store.list("UsageRecord").items] == ["done-worker-0"]
        assert "done-worker-0" in h.pods()  # kept (finished)
        ledger = h.manager.capacity.ledger
        creates: list[str] = []
        create = ledger._create
        monkeypatch.setattr(ledger, "_create", lambda name, spec: creates.append(name) or create(name, spec))
        for _ in range(3):
            h.clock.advance(1)
            h.manager.run_once()
        assert creates == []
    finally:
        h.close()
