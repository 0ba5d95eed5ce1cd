"""Events aggregate by involved object, type, reason and message."""

from __future__ import annotations

import threading

from muster.api import registry
from muster.store import Store
from muster.store.events import events_for, record_event
from tests.store.factories import flavor, job


def test_first_event_is_a_valid_event_object(store: Store):
    involved = store.create(job("train"))
    ev = record_event(store, involved, "Normal", "Created", "created 2 pods")
    assert registry.validate(ev).obj is not None  # the shape muster.api defines
    assert ev["metadata"]["namespace"] == "default"
    assert ev["involvedObject"] == {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "name": "train",
        "namespace": "default",
        "uid": involved["metadata"]["uid"],
    }
    assert ev["count"] == 1 and ev["firstTimestamp"] == ev["lastTimestamp"]


def test_repeats_are_counted_not_duplicated(store: Store):
    involved = store.create(job("train"))
    for _ in range(3):
        last = record_event(store, involved, "Warning", "BackOff", "restarting")
    record_event(store, involved, "Warning", "BackOff", "a different message")
    assert last["count"] == 3 and last["lastTimestamp"] >= last["firstTimestamp"]
    found = events_for(store, involved)
    assert sorted(e["count"] for e in found) == [1, 3]


def test_concurrent_recorders_lose_no_count(store: Store):
    involved = store.create(job("train"))

    def record() -> None:
        for _ in range(10):
            record_event(store, involved, "Normal", "Tick", "tick")

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    [ev] = events_for(store, involved)
    assert ev["count"] == 40


def test_cluster_objects_and_a_recreated_object(store: Store):
    f = store.create(flavor("gpu"))
    record_event(store, f, "Normal", "Created", "flavor created")
    assert [e["metadata"]["namespace"] for e in events_for(store, f)] == ["default"]

    old = store.create(job("again"))
    record_event(store, old, "Normal", "Created", "hello")
    store.delete("TrainingJob", "again", "default")
    new = store.create(job("again"))
    assert events_for(store, new) == []  # a new uid: the old object's events are not its own
