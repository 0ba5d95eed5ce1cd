"""The cache's index of objects still in play, and deletes preconditioned on the cached version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from muster.controllers.cache import Cache
from muster.controllers.context import Context
from muster.store import Store
from muster.store import watch as watch_module
from muster.store.capabilities import UNKNOWN
from muster.testing import wait_for
from muster.testing.factories import training_job


def _cache(store: Store) -> Cache:
    return Cache(
        store, kinds=("TrainingJob",), live={"TrainingJob": lambda o: "done" not in o.get("status", {})}
    )


def test_list_live_follows_each_objects_latest_state(sqlite_store: Store):
    cache = _cache(sqlite_store)
    a = sqlite_store.create(training_job("a"))
    b = sqlite_store.create(training_job("b"))
    cache.observe(a)
    cache.observe(b)
    assert sorted(o["metadata"]["name"] for o in cache.list_live("TrainingJob")) == ["a", "b"]
    finished = sqlite_store.update_status({**a, "status": {"done": True}})
    cache.observe(finished)
    assert [o["metadata"]["name"] for o in cache.list_live("TrainingJob")] == ["b"]
    assert len(cache.list("TrainingJob")) == 2  # still cached, only out of play
    cache.forget(sqlite_store.delete("TrainingJob", "b", "default"))
    assert cache.list_live("TrainingJob") == []


def test_a_requeued_deletion_keeps_the_last_state(sqlite_store: Store):
    """A change taken early and requeued for the steps that ran before it: a deletion comes
    back with the object's last state, so those steps can tell whose it was."""
    cache = _cache(sqlite_store)
    a = sqlite_store.create(training_job("a"))
    b = sqlite_store.create(training_job("b"))
    cache.observe(a)
    cache.observe(b)
    cache.take_changes()
    cache.forget(sqlite_store.delete("TrainingJob", "a", "default"))
    taken = cache.take_changes()
    assert taken[("TrainingJob", "default", "a")]["metadata"]["uid"] == a["metadata"]["uid"]
    # b, requeued with an older state than the cache holds, comes back as the cache holds it
    cache.observe(sqlite_store.update_status({**b, "status": {"done": True}}))
    cache.requeue({**taken, ("TrainingJob", "default", "b"): b})
    again = cache.take_changes()
    assert again[("TrainingJob", "default", "a")]["metadata"]["uid"] == a["metadata"]["uid"]
    assert again[("TrainingJob", "default", "b")]["status"] == {"done": True}
    # a key re-created since it was taken is the new object, not the deleted one's last state
    cache.requeue(again)
    fresh = sqlite_store.create(training_job("a"))
    cache.observe(fresh)
    latest = cache.take_changes()[("TrainingJob", "default", "a")]
    assert latest["metadata"]["uid"] == fresh["metadata"]["uid"]


def test_a_relist_rebuilds_the_live_index(sqlite_store: Store):
    sqlite_store.create(training_job("a"))
    done = sqlite_store.create(training_job("b"))
    sqlite_store.update_status({**done, "status": {"done": True}})
    cache = _cache(sqlite_store)
    cache.start()
    try:
        assert [o["metadata"]["name"] for o in cache.list_live("TrainingJob")] == ["a"]
    finally:
        cache.stop()


def test_delete_of_a_changed_or_replaced_object(sqlite_store: Store, tmp_path: Path):
    cache = Cache(sqlite_store, kinds=("TrainingJob",))
    ctx = Context(store=sqlite_store, cache=cache, home=tmp_path, clock=lambda: 0.0)
    old = sqlite_store.create(training_job("j"))
    newer = sqlite_store.update_status({**old, "status": {"phase": "Running"}})
    # Changed since the caller looked: not deleted, and the cache now holds the current version.
    assert ctx.delete(old) is False
    assert (
        cache.get("TrainingJob", "j", "default")["metadata"]["resourceVersion"]
        == newer["metadata"]["resourceVersion"]
    )
    # A new incarnation under the same name: the old one is gone, the new one stays.
    sqlite_store.delete("TrainingJob", "j", "default")
    again = sqlite_store.create(training_job("j"))
    assert ctx.delete(newer) is True
    assert sqlite_store.get("TrainingJob", "j", "default")["metadata"]["uid"] == again["metadata"]["uid"]
    # The current version: deleted.
    assert ctx.delete(again) is True
    assert sqlite_store.list("TrainingJob").items == []


def test_it_decodes_only_its_kinds_and_still_catches_up_past_the_others(sqlite_store: Store):
    cache = Cache(sqlite_store, kinds=("TrainingJob",))
    cache.start()
    try:
        sqlite_store.create(training_job("a"))
        other = sqlite_store.create(
            {"apiVersion": "muster.dev/v1", "kind": "ResourceFlavor", "metadata": {"name": "f"}, "spec": {}}
        )
        # The last change is of a kind the cache skips: its bookmark still says "seen".
        assert cache.caught_up(int(other["metadata"]["resourceVersion"]), timeout=10)
        assert [o["metadata"]["name"] for o in cache.list("TrainingJob")] == ["a"]
    finally:
        cache.stop()


def test_the_follower_does_not_decode_what_the_cache_holds_already(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
):
    decoded: list[str] = []
    real = json.loads

    def loads(text: str) -> object:
        decoded.append(text)
        return real(text)

    monkeypatch.setattr(watch_module, "loads", loads)
    cache = Cache(sqlite_store, kinds=("TrainingJob",))
    cache.start()
    try:
        own = sqlite_store.create(training_job("own"))
        cache.observe(own)  # as a pass observes its own writes at commit
        other = sqlite_store.create(training_job("other"))  # another writer's: only the watch has it
        assert cache.caught_up(int(other["metadata"]["resourceVersion"]), timeout=10)
        assert [real(t)["metadata"]["name"] for t in decoded] == ["other"]
        assert (
            cache.get("TrainingJob", "other", "default")["metadata"]["resourceVersion"]
            == (other["metadata"]["resourceVersion"])
        )
        revision = int(own["metadata"]["resourceVersion"])
        assert cache._holds("TrainingJob", "default", "own", revision)
        assert not cache._holds("TrainingJob", "default", "own", revision + 100)  # a newer change
        assert not cache._holds("TrainingJob", "default", "absent", 1)
        # A change made elsewhere after the one observed still arrives.
        newer = sqlite_store.update_status({**own, "status": {"phase": "Running"}})
        wait_for(
            lambda: (
                cache.get("TrainingJob", "own", "default")["metadata"]["resourceVersion"]
                == newer["metadata"]["resourceVersion"]
            ),
            timeout=10,
        )
    finally:
        cache.stop()


def test_as_a_replica_the_cache_answers_as_the_store_at_a_revision_it_has_applied(
    sqlite_store: Store,
):
    a = sqlite_store.create(training_job("a"))
    never_started = Cache(sqlite_store, kinds=("TrainingJob",))
    assert never_started.at(sqlite_store.revision()) is None  # nothing follows the log for it
    cache = Cache(sqlite_store, kinds=("TrainingJob",))
    cache.start()
    try:
        b = sqlite_store.create(training_job("b"))
        sqlite_store.delete("TrainingJob", "b", "default")
        a = sqlite_store.update_status({**a, "status": {"phase": "Running"}})
        head = sqlite_store.revision()
        lookup = cache.at(head)
        if lookup is None:  # the follower was slower than the batch's short wait: it says so
            assert cache.caught_up(head, timeout=10)
            lookup = cache.at(head)
        assert lookup is not None
        assert lookup("TrainingJob", "a", "default") == sqlite_store.get("TrainingJob", "a", "default")
        assert lookup("TrainingJob", "b", "default") is None and b is not None  # deleted
        assert lookup("TrainingJob", "never", "default") is None
        assert lookup("Event", "x", "default") is UNKNOWN  # not followed: the batch reads it
        assert cache.at(head + 1) is None  # a change it has not applied (none exists yet)
    finally:
        cache.stop()
    assert cache.at(head) is None  # stopped: it follows nothing any more


def test_a_batch_commit_moves_the_cache_on_without_the_follower(sqlite_store: Store):
    cache = Cache(sqlite_store, kinds=("TrainingJob",))  # not started: nothing follows the log
    batch = sqlite_store.batch(replica=cache)  # type: ignore[attr-defined]
    a = batch.create(training_job("a"))  # never observed: the commit hands it over
    first = batch.commit()
    assert cache.get("TrainingJob", "a", "default") == a
    assert cache.at(first) is not None  # every change up to the commit is in the cache
    sqlite_store.create(training_job("b"))  # another writer's change, which nothing follows
    c = batch.create(training_job("c"))
    second = batch.commit()
    assert cache.get("TrainingJob", "c", "default") == c
    assert cache.at(second) is None  # it missed b: it does not claim the store's state
    assert cache.get("TrainingJob", "b", "default") is None
    gone = batch.delete("TrainingJob", "a", "default")
    batch.commit()
    assert cache.get("TrainingJob", "a", "default") is None and gone["metadata"]["name"] == "a"
