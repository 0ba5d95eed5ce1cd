"""Batches: many writes in one transaction (capabilities.Batching), on SQLite and PostgreSQL;
and PostgreSQL's NOTIFY waking a watcher of another store at once."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from muster.store import Conflict, NotFound, Store, open_store, tx
from muster.store.capabilities import UNKNOWN, Batching
from muster.store.listen import notice, parse_notice
from muster.testing import wait_for
from tests.store.factories import consuming, flavor, job


def test_writes_are_answered_at_once_and_visible_at_commit(store: Store):
    assert isinstance(store, Batching)
    before = store.revision()
    batch = store.batch()
    a = batch.create(job("a"))
    b = batch.create(job("b"))
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    assert batch.get("TrainingJob", "a", "default") == a  # the batch sees its own writes
    assert store.revision() == before  # nobody else does yet
    with pytest.raises(NotFound):
        store.get("TrainingJob", "a", "default")
    assert batch.commit() == int(b["metadata"]["resourceVersion"])
    assert store.get("TrainingJob", "b", "default") == b
    assert store.revision() == before + 2


@pytest.mark.parametrize("at_once", [True, False], ids=["one-statement", "by-table"])
@pytest.mark.parametrize("count", [1, 4, 5, 30])
def test_every_row_of_a_batch_is_written_however_many(
    store: Store, count: int, at_once: bool, monkeypatch: pytest.MonkeyPatch
):
    """Any number of inserts, updates and deletes in one batch. On PostgreSQL a batch's writes
    go as one statement (Driver.write_at_once) or, when they are too many for one, a statement
    per table whose shape depends on the row count (one multi-row INSERT, row by row, or
    executemany)."""
    if not at_once:
        monkeypatch.setattr(tx, "_PG_PARAMS_AT_ONCE", 0)
    many = spy(monkeypatch, tx.Driver, "many")
    for i in range(count):
        store.create(job(f"old-{i}"))
    since = store.revision()
    many.clear()
    batch = store.batch()  # type: ignore[attr-defined]
    made = [batch.create(job(f"new-{i}")) for i in range(count)]
    changed = []
    for i in range(1, count):
        obj = copy.deepcopy(store.get("TrainingJob", f"old-{i}", "default"))
        obj["spec"]["note"] = f"changed {i}"
        changed.append(batch.update(obj))
    batch.delete("TrainingJob", "new-0", "default")
    batch.delete("TrainingJob", "old-0", "default")
    batch.commit()
    if store.engine.dialect.name == "postgresql":  # type: ignore[attr-defined]
        assert bool(many) is not at_once
    names = sorted(o["metadata"]["name"] for o in store.list("TrainingJob").items)
    assert names == sorted([f"old-{i}" for i in range(1, count)] + [f"new-{i}" for i in range(1, count)])
    assert [store.get("TrainingJob", o["metadata"]["name"], "default") for o in changed] == changed
    assert [store.get("TrainingJob", o["metadata"]["name"], "default") for o in made[1:]] == made[1:]
    events = list(store.watch(since=since, timeout=0.5))
    kinds = sorted((e.type, e.object["metadata"]["name"]) for e in events)
    assert kinds == sorted(
        [("ADDED", f"new-{i}") for i in range(count)]  # new-0 too: created, then deleted
        + [("MODIFIED", f"old-{i}") for i in range(1, count)]
        + [("DELETED", "new-0"), ("DELETED", "old-0")]
    )
    assert store.revision() == since + 2 * count + 1


def spy(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[tuple[Any, ...]]:
    """The positional arguments of each call of ``owner.name`` from now on (it still runs);
    ``owner`` a class (its instances' calls, without ``self``) or one object."""
    calls: list[tuple[Any, ...]] = []
    real = getattr(owner, name)
    unbound = isinstance(owner, type)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1:] if unbound else args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_an_object_read_in_a_batch_is_not_read_again_to_write_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    """A read then a write of one object (an Event counted or created) costs one read of the
    database, not two: on PostgreSQL each is a round trip."""
    store.create(job("a"))
    batch = store.batch()  # type: ignore[attr-defined]
    batch.create(job("first"))  # begins the transaction
    loads = _counting_loads(batch, monkeypatch)
    obj = batch.get("TrainingJob", "a", "default")
    obj["spec"]["note"] = "changed"
    changed = batch.update(obj)
    with pytest.raises(NotFound):
        batch.get("TrainingJob", "b", "default")
    made = batch.create(job("b"))
    again = batch.get("TrainingJob", "a", "default")
    again["spec"]["note"] = "edited by the caller"  # a copy: the batch's own is untouched
    batch.commit()
    assert loads == [("TrainingJob", "a", "default"), ("TrainingJob", "b", "default")]
    assert store.get("TrainingJob", "a", "default") == changed
    assert store.get("TrainingJob", "b", "default") == made


def test_rollback_forgets_everything(store: Store):
    store.create(job("kept"))
    revision = store.revision()
    batch = store.batch()  # type: ignore[attr-defined]
    batch.create(job("gone"))
    batch.delete("TrainingJob", "kept", "default")
    batch.rollback()
    assert store.revision() == revision
    assert store.get("TrainingJob", "kept", "default")
    with pytest.raises(NotFound):
        store.get("TrainingJob", "gone", "default")
    assert list(store.watch(since=revision, timeout=0.2)) == []


def test_a_conflict_leaves_the_rest_of_the_batch_intact(store: Store):
    first = store.create(job("a"))
    newer = copy.deepcopy(first)
    newer["spec"]["x"] = 2
    store.update(newer)
    batch = store.batch()  # type: ignore[attr-defined]
    batch.create(job("b"))
    stale = copy.deepcopy(first)
    stale["spec"]["x"] = 3
    with pytest.raises(Conflict):
        batch.update(stale)
    batch.commit()
    assert store.get("TrainingJob", "a", "default")["spec"]["x"] == 2
    assert store.get("TrainingJob", "b", "default")


def test_successive_writes_of_an_object_reach_watchers_as_its_last_state(store: Store):
    since = store.revision()
    batch = store.batch()  # type: ignore[attr-defined]
    created = batch.create(job("a"))
    status = copy.deepcopy(created)
    status["status"] = {"phase": "one"}
    middle = batch.update_status(status)
    status = copy.deepcopy(middle)
    status["status"] = {"phase": "two"}
    last = batch.update_status(status)
    other = batch.create(job("b"))
    batch.commit()
    events = list(store.watch(since=since, timeout=0.3))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]
    assert events[0].object == last and events[0].revision == int(last["metadata"]["resourceVersion"])
    assert events[1].object == other
    # A watch resuming from an intermediate version still gets what came after it.
    resumed = list(store.watch(since=middle["metadata"]["resourceVersion"], timeout=0.3))
    assert [e.object["metadata"]["name"] for e in resumed] == ["a", "b"]


def test_deleted_and_created_again_in_one_batch(store: Store):
    old = store.create(job("a"))
    since = store.revision()
    batch = store.batch()  # type: ignore[attr-defined]
    batch.delete("TrainingJob", "a", "default")
    new = batch.create(job("a", x=9))
    batch.commit()
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert store.get("TrainingJob", "a", "default") == new
    events = [(e.type, e.object["metadata"]["uid"]) for e in store.watch(since=since, timeout=0.3)]
    assert events == [("DELETED", old["metadata"]["uid"]), ("ADDED", new["metadata"]["uid"])]


@contextlib.contextmanager
def _listening(postgres_server, **watch: Any) -> Iterator[tuple[Any, Store, Store]]:
    """A watch (``watch``'s arguments) on a store whose watches poll every minute, so only a
    notification delivers a change within seconds, once it listens; the store; and a second
    store on the same database that writes."""
    url = postgres_server.create_database()
    watcher = open_store(url, poll_interval=60)
    writer = open_store(url)
    try:
        stream = watcher.watch(since=watcher.revision(), timeout=30, **watch)
        listener = watcher._listener  # type: ignore[attr-defined]
        assert listener is not None and listener.wait_listening(10)
        yield stream, watcher, writer
        stream.close()  # type: ignore[attr-defined]
    finally:
        writer.close()
        watcher.close()


@pytest.mark.postgres
def test_postgres_watch_is_woken_by_another_store_at_once(postgres_server):
    with _listening(postgres_server) as (watch, _, writer):
        started = time.monotonic()
        writer.create(job("far"))
        event = next(watch)
        assert event.object["metadata"]["name"] == "far"
        assert time.monotonic() - started < 5


@pytest.mark.postgres
def test_postgres_notifications_wake_only_watchers_of_the_kinds_changed(postgres_server):
    with (
        _listening(postgres_server, kinds=["ResourceFlavor"]) as (watch, watcher, writer),
        consuming(watcher, watch) as (seen, waiter),
    ):
        writer.create(job("a-job"))
        revision = writer.revision()
        notifier = watcher.notifier  # type: ignore[attr-defined]
        wait_for(lambda: notifier._latest >= revision, timeout=10, what="the job's notification")
        assert not waiter.event.is_set()
        writer.create(flavor("a-flavor"))
        wait_for(lambda: seen == ["a-flavor"], timeout=10, what="the flavor, at once")


def test_a_notice_names_its_revision_and_kinds():
    assert notice(42, {"Pod", "Event"}) == "42 Event Pod"
    assert parse_notice("42 Event Pod") == (42, frozenset({"Event", "Pod"}))
    assert parse_notice("42") == (42, None)  # an older server's: wakes every watcher
    with pytest.raises(ValueError):
        parse_notice("not a revision")


class _Replica:
    """A replica answering from a dict, at the revisions it is told it holds."""

    def __init__(self, objects: dict[tuple[str, str, str | None], object], holds: bool) -> None:
        self.objects = objects
        self.holds = holds
        self.asked: list[int] = []
        self.commits: list[tuple[int, int, list[tuple]]] = []

    def at(self, revision: int):
        self.asked.append(revision)
        if not self.holds:
            return None
        return lambda kind, name, ns: self.objects.get((kind, name, ns), UNKNOWN)

    def committed(self, since: int, revision: int, changes: list[tuple]) -> None:
        self.commits.append((since, revision, [(c[0], c[1], c[3], c[4]) for c in changes]))


def _counting_loads(batch: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The (kind, name, namespace) of each read of the database by the batch's transaction."""
    return spy(monkeypatch, batch.tx().driver, "load")


def test_a_batch_reads_what_it_writes_from_a_replica_at_its_revision(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    a = store.create(job("a"))
    replica = _Replica({("TrainingJob", "a", "default"): a, ("TrainingJob", "b", "default"): None}, True)
    batch = store.batch(replica=replica)  # type: ignore[attr-defined]
    loads = _counting_loads(batch, monkeypatch)
    assert replica.asked == [store.revision()]  # the revision the transaction began at
    changed = batch.update_status({**a, "status": {"phase": "Running"}})
    made = batch.create(job("b"))  # the replica says absent: no read
    with pytest.raises(NotFound):
        batch.get("Event", "e", "default")  # a kind the replica does not follow: read
    revision = batch.commit()
    assert loads == [("Event", "e", "default")]
    # The replica is handed the batch's changes: every one from its first revision on.
    since = replica.asked[0]
    assert replica.commits == [
        (
            since,
            revision,
            [("MODIFIED", "TrainingJob", "a", since + 1), ("ADDED", "TrainingJob", "b", since + 2)],
        )
    ]
    assert store.get("TrainingJob", "a", "default") == changed
    assert store.get("TrainingJob", "b", "default") == made
    assert "status" not in a  # the replica's object was not edited


def test_a_replica_behind_the_transaction_is_not_read(store: Store, monkeypatch: pytest.MonkeyPatch):
    stale = store.create(job("a"))
    store.update_status({**stale, "status": {"phase": "Running"}})  # the replica has not seen this
    batch = store.batch(replica=_Replica({("TrainingJob", "a", "default"): stale}, False))  # type: ignore[attr-defined]
    loads = _counting_loads(batch, monkeypatch)
    with pytest.raises(Conflict):
        batch.update_status({**stale, "status": {"phase": "Running"}})
    assert loads == [("TrainingJob", "a", "default")]
    batch.rollback()


def test_prefetch_reads_many_objects_in_one_query(store: Store, monkeypatch: pytest.MonkeyPatch):
    for i in range(5):
        store.create(job(f"j{i}"))
    batch = store.batch()  # type: ignore[attr-defined]
    batch.create(job("first"))
    loads = _counting_loads(batch, monkeypatch)
    keys = [("TrainingJob", f"j{i}", "default") for i in range(7)]  # j5, j6: absent
    batch.prefetch(keys)
    found = [batch.get(*k) for k in keys[:5]]
    for k in keys[5:]:
        with pytest.raises(NotFound):
            batch.get(*k)
    batch.rollback()
    assert loads == []
    assert [o["metadata"]["name"] for o in found] == [f"j{i}" for i in range(5)]
