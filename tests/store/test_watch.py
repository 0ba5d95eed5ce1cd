"""Watch: revision order, filters, resume (also across a restart), TooOld, wake-ups, close."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from muster.store import Store, TooOld, WatchEvent, open_store
from muster.testing import wait_for
from tests.store.factories import consuming, flavor, job


def collect(store: Store, **kwargs) -> list[WatchEvent]:
    """Everything a watch delivers until it has been quiet for a moment."""
    with store.watch(timeout=0.3, **kwargs) as w:  # type: ignore[attr-defined]
        return list(w)


def summary(events: list[WatchEvent]) -> list[tuple[str, str, str]]:
    return [(e.type, e.object["kind"], e.object["metadata"]["name"]) for e in events]


class TestReplay:
    def test_changes_in_revision_order_with_each_objects_state(self, store: Store):
        start = store.revision()
        a = store.create(job("a"))
        store.create(flavor("f"))
        store.update({**a, "spec": {"x": 2}})
        store.update_status({**store.get("TrainingJob", "a", "default"), "status": {"phase": "Running"}})
        store.delete("TrainingJob", "a", "default")
        events = collect(store, since=start)
        assert summary(events) == [
            ("ADDED", "TrainingJob", "a"),
            ("ADDED", "ResourceFlavor", "f"),
            ("MODIFIED", "TrainingJob", "a"),
            ("MODIFIED", "TrainingJob", "a"),
            ("DELETED", "TrainingJob", "a"),
        ]
        assert [e.revision for e in events] == list(range(start + 1, start + 6))
        assert all(e.object["metadata"]["resourceVersion"] == str(e.revision) for e in events)
        assert events[2].object["spec"] == {"x": 2}
        assert events[3].object["status"] == {"phase": "Running"}

    def test_kind_and_namespace_filters(self, store: Store):
        store.create(job("a", ns="team-a"))
        store.create(job("b", ns="team-b"))
        store.create(flavor("f"))
        assert summary(collect(store, since=0, kind="TrainingJob", namespace="team-b")) == [
            ("ADDED", "TrainingJob", "b")
        ]
        assert summary(collect(store, since=0, kind="ResourceFlavor")) == [("ADDED", "ResourceFlavor", "f")]

    def test_a_set_of_kinds_and_bookmarks_past_what_it_skips(self, store: Store):
        start = store.revision()
        store.create(job("a"))
        store.create(flavor("f"))
        store.create(job("b", ns="team-b"))
        store.create(flavor("g"))
        end = store.revision()
        plain = collect(store, since=start, kinds=["TrainingJob", "Node"])
        assert summary(plain) == [("ADDED", "TrainingJob", "a"), ("ADDED", "TrainingJob", "b")]
        marked = collect(store, since=start, kinds=["TrainingJob"], bookmarks=True)
        assert [(e.type, e.revision) for e in marked] == [
            ("ADDED", start + 1),
            ("ADDED", start + 3),
            ("BOOKMARK", end),  # the skipped flavor "g": the watch has seen everything up to it
        ]
        assert marked[-1].object == {"metadata": {"resourceVersion": str(end)}}
        # Nothing skipped after the last change it yields: no bookmark.
        assert [e.type for e in collect(store, since=start, kinds=["ResourceFlavor"], bookmarks=True)] == [
            "ADDED",
            "ADDED",
        ]

    def test_known_changes_are_passed_over_but_deletions_are_not(self, store: Store):
        start = store.revision()
        a = store.create(job("a"))
        store.create(flavor("f"))
        store.update_status({**a, "status": {"phase": "Running"}})
        store.delete("ResourceFlavor", "f", None)
        end = store.revision()
        asked: list[tuple[str, str, str, int]] = []

        def known(kind: str, namespace: str, name: str, revision: int) -> bool:
            asked.append((kind, namespace, name, revision))
            return kind == "ResourceFlavor" or revision == start + 3

        marked = collect(store, since=start, bookmarks=True, known=known)
        assert [(e.type, e.object.get("kind"), e.revision) for e in marked] == [
            ("ADDED", "TrainingJob", start + 1),
            ("DELETED", "ResourceFlavor", end),  # a deletion is always delivered
        ]
        # asked about additions and modifications only, with the row's own key
        assert asked == [
            ("TrainingJob", "default", "a", start + 1),
            ("ResourceFlavor", "", "f", start + 2),
            ("TrainingJob", "default", "a", start + 3),
        ]
        # The last change delivered is the last one: no bookmark; passing the tail over leaves one.
        tail = collect(store, since=start, bookmarks=True, known=lambda *_: True)
        assert [(e.type, e.revision) for e in tail] == [("DELETED", end)]
        store.create(job("b"))
        quiet = collect(store, since=end, bookmarks=True, known=lambda *_: True)
        assert [(e.type, e.revision) for e in quiet] == [("BOOKMARK", end + 1)]

    def test_changes_up_to_the_floor_are_not_read(self, store: Store):
        # A cache's own commits are handed to it: the watch skips them without reading their
        # rows, and delivers what came after (another writer's) as usual.
        start = store.revision()
        store.create(job("mine"))
        store.create(job("mine-too"))
        floor = store.revision()
        store.create(job("theirs"))
        read: list[str] = []

        def known(kind: str, namespace: str, name: str, revision: int) -> bool:
            read.append(name)
            return False

        events = collect(store, since=start, known=known, floor=lambda: floor)
        assert summary(events) == [("ADDED", "TrainingJob", "theirs")]
        assert read == ["theirs"]  # the rows below the floor were never read
        # Without a floor, every row after `since` is read.
        read.clear()
        assert len(collect(store, since=start, known=known)) == 3
        assert read == ["mine", "mine-too", "theirs"]

    def test_since_a_list_sees_only_later_changes(self, store: Store):
        store.create(job("before"))
        listed = store.list("TrainingJob")
        store.create(job("after"))
        assert summary(collect(store, since=listed.resource_version)) == [("ADDED", "TrainingJob", "after")]

    def test_unchanged_apply_records_nothing(self, store: Store):
        store.apply([job("a")])
        rev = store.revision()
        store.apply([job("a")])
        assert collect(store, since=rev) == []

    def test_more_changes_than_one_batch(self, store: Store):
        store.apply([job(f"j{i:04d}") for i in range(1200)])
        events = collect(store, since=0)
        assert [e.revision for e in events] == list(range(1, 1201))


class TestLive:
    def test_sees_writes_of_this_process_promptly(self, store: Store):
        seen: list[WatchEvent] = []
        w = store.watch(since=store.revision())

        def consume() -> None:
            for ev in w:
                seen.append(ev)

        t = threading.Thread(target=consume)
        t.start()
        for i in range(5):
            store.create(job(f"j{i}"))
        wait_for(lambda: len(seen) == 5, timeout=10, what="five live events")
        w.close()  # type: ignore[attr-defined]
        t.join(timeout=10)
        assert not t.is_alive(), "close() from another thread must end a blocked next()"
        assert [e.object["metadata"]["name"] for e in seen] == [f"j{i}" for i in range(5)]

    def test_commits_up_to_the_floor_do_not_wake_the_watch(self, store: Store):
        # A cache's follower holds the manager's commits once they are handed to it: a commit
        # its floor covers wakes it for nothing, one past its floor wakes it.
        floor = [store.revision()]
        with consuming(store, store.watch(since=floor[0], floor=lambda: floor[0])) as (seen, waiter):
            floor[0] += 1  # handed over as it commits (notify() runs within create())
            store.create(job("mine"))
            assert not waiter.event.is_set()
            store.create(job("theirs"))
            wait_for(lambda: seen == ["theirs"], timeout=10, what="the change past the floor")
        assert seen == ["theirs"]

    def test_commits_of_other_kinds_do_not_wake_the_watch(self, store: Store):
        with consuming(store, store.watch(since=store.revision(), kinds=["ResourceFlavor"])) as (
            seen,
            waiter,
        ):
            store.create(job("a-job"))
            assert not waiter.event.is_set()
            store.create(flavor("a-flavor"))
            wait_for(lambda: seen == ["a-flavor"], timeout=10, what="the flavor")

    def test_sees_writes_of_another_process(self, store: Store, store_url: str):
        w = store.watch(since=store.revision(), timeout=20)
        code = (
            "import sys; from muster.store import open_store\n"
            "s = open_store(sys.argv[1])\n"
            "for i in range(3):\n"
            "    meta = {'name': f'p{i}', 'namespace': 'default'}\n"
            "    s.create({'kind': 'TrainingJob', 'metadata': meta, 'spec': {}})\n"
            "s.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, store_url], check=True, timeout=60)
        names = [next(w).object["metadata"]["name"] for _ in range(3)]
        assert names == ["p0", "p1", "p2"]
        w.close()  # type: ignore[attr-defined]

    def test_timeout_ends_a_quiet_watch(self, store: Store):
        started = time.monotonic()
        assert list(store.watch(timeout=0.2)) == []
        assert time.monotonic() - started < 5

    def test_closing_the_store_ends_watches(self, store_url: str):
        s = open_store(store_url, poll_interval=10)
        w = s.watch()
        done = threading.Event()
        t = threading.Thread(target=lambda: (list(w), done.set()))
        t.start()
        s.close()
        assert done.wait(10)


class TestResume:
    def test_resume_after_restart_from_a_given_revision(self, store_url: str):
        first = open_store(store_url)
        first.create(job("a"))
        resume_from = first.revision()
        first.create(job("b"))
        first.delete("TrainingJob", "a", "default")
        first.close()

        restarted = open_store(store_url)
        try:
            assert summary(collect(restarted, since=resume_from)) == [
                ("ADDED", "TrainingJob", "b"),
                ("DELETED", "TrainingJob", "a"),
            ]
            assert restarted.revision() == resume_from + 2
            assert [o["metadata"]["name"] for o in restarted.list("TrainingJob").items] == ["b"]
        finally:
            restarted.close()

    def test_compacted_revision_is_too_old(self, store_url: str):
        s = open_store(store_url, retention=10)
        try:
            for i in range(40):
                s.create(job(f"j{i}"))
            w = s.watch(since=1)
            with pytest.raises(TooOld, match=r"resourceVersion 1 is too old.*list again"):
                next(w)
            # The retained tail is still there: the last `retention` revisions replay.
            recent = collect(s, since=30)
            assert [e.revision for e in recent] == list(range(31, 41))
        finally:
            s.close()

    def test_invalid_since(self, store: Store):
        with pytest.raises(ValueError, match="resourceVersion must be a decimal revision number"):
            store.watch(since="abc")
