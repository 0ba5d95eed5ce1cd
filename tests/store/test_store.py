"""The Store contract, on SQLite and on PostgreSQL (the ``store`` fixture runs each test on both)."""

from __future__ import annotations

import copy
import threading

import pytest

from muster.store import AlreadyExists, Conflict, NotFound, Store, open_store, parse_selector
from tests.store.factories import flavor, job


class TestCreateGet:
    def test_create_assigns_server_fields_and_ignores_callers(self, store: Store):
        sent = job("a")
        sent["metadata"].update(uid="mine", resourceVersion="99", generation=7, creationTimestamp="x")
        out = store.create(sent)
        meta = out["metadata"]
        assert meta["uid"] != "mine" and len(meta["uid"]) == 36
        assert meta["generation"] == 1
        assert meta["resourceVersion"] == str(store.revision())
        assert meta["creationTimestamp"].endswith("Z")
        assert store.get("TrainingJob", "a", "default") == out

    def test_create_twice_is_already_exists(self, store: Store):
        store.create(job("a"))
        with pytest.raises(AlreadyExists, match="TrainingJob default/a already exists"):
            store.create(job("a"))

    def test_same_name_in_other_namespace_or_kind_is_separate(self, store: Store):
        store.create(job("a"))
        store.create(job("a", ns="team"))
        store.create(flavor("a"))
        assert store.get("TrainingJob", "a", "team")["metadata"]["namespace"] == "team"
        assert "namespace" not in store.get("ResourceFlavor", "a")["metadata"]

    def test_get_missing(self, store: Store):
        with pytest.raises(NotFound, match="TrainingJob default/nope not found"):
            store.get("TrainingJob", "nope", "default")

    def test_what_is_stored_is_the_input_as_written(self, store: Store):
        # The answer is built from the input without a copy (the Writer contract: what is
        # written is not edited afterwards); the store keeps the input as it was at the write.
        sent = job("a")
        out = store.create(sent)
        assert out["spec"] is sent["spec"]
        sent["spec"]["x"] = 42
        assert store.get("TrainingJob", "a", "default")["spec"]["x"] == 1
        fetched = store.get("TrainingJob", "a", "default")
        fetched["spec"]["x"] = 7  # a get is a copy of its own
        assert store.get("TrainingJob", "a", "default")["spec"]["x"] == 1


class TestUpdate:
    def test_spec_change_bumps_generation_and_revision(self, store: Store):
        first = store.create(job("a"))
        changed = copy.deepcopy(first)
        changed["spec"]["x"] = 2
        second = store.update(changed)
        assert second["metadata"]["generation"] == 2
        assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
        assert second["metadata"]["uid"] == first["metadata"]["uid"]
        assert second["metadata"]["creationTimestamp"] == first["metadata"]["creationTimestamp"]

    def test_label_change_keeps_generation(self, store: Store):
        first = store.create(job("a"))
        changed = copy.deepcopy(first)
        changed["metadata"]["labels"] = {"team": "x"}
        second = store.update(changed)
        assert second["metadata"]["generation"] == 1
        assert second["metadata"]["labels"] == {"team": "x"}

    def test_stale_resource_version_conflicts(self, store: Store):
        first = store.create(job("a"))
        winner = copy.deepcopy(first)
        winner["spec"]["x"] = 2
        store.update(winner)
        loser = copy.deepcopy(first)
        loser["spec"]["x"] = 3
        with pytest.raises(Conflict, match=r"resourceVersion .* is stale"):
            store.update(loser)
        assert store.get("TrainingJob", "a", "default")["spec"]["x"] == 2

    def test_without_resource_version_last_write_wins(self, store: Store):
        store.create(job("a"))
        store.update(job("a", x=5))
        assert store.get("TrainingJob", "a", "default")["spec"] == {"x": 5}

    def test_update_keeps_status_and_status_update_keeps_spec(self, store: Store):
        first = store.create(job("a"))
        with_status = store.update_status({**first, "status": {"state": "Running"}, "spec": {"x": 999}})
        assert with_status["spec"] == {"x": 1}
        assert with_status["metadata"]["generation"] == 1
        updated = store.update({**with_status, "spec": {"x": 2}, "status": {"state": "Ignored"}})
        assert updated["status"] == {"state": "Running"}
        assert updated["spec"] == {"x": 2}

    def test_status_update_checks_resource_version(self, store: Store):
        first = store.create(job("a"))
        store.update_status({**first, "status": {"state": "A"}})
        with pytest.raises(Conflict):
            store.update_status({**first, "status": {"state": "B"}})

    def test_noop_writes_keep_the_revision(self, store: Store):
        first = store.create(job("a"))
        before = store.revision()
        assert store.update(copy.deepcopy(first)) == first
        assert store.update_status({**first, "status": None}) == first
        assert store.revision() == before

    def test_update_sets_deletion_timestamp_once(self, store: Store):
        first = store.create(job("a"))
        asked = copy.deepcopy(first)
        asked["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00.000000Z"
        asked["metadata"]["annotations"] = {"muster.dev/stop-reason": "Preempted"}
        second = store.update(asked)
        assert second["metadata"]["deletionTimestamp"] == "2030-01-01T00:00:00.000000Z"
        assert second["metadata"]["generation"] == 1
        # Later updates neither move nor clear it.
        later = copy.deepcopy(second)
        later["metadata"]["deletionTimestamp"] = "2031-01-01T00:00:00.000000Z"
        later["spec"]["x"] = 2
        third = store.update(later)
        assert third["metadata"]["deletionTimestamp"] == "2030-01-01T00:00:00.000000Z"
        cleared = copy.deepcopy(third)
        del cleared["metadata"]["deletionTimestamp"]
        assert store.update(cleared)["metadata"]["deletionTimestamp"] == "2030-01-01T00:00:00.000000Z"

    def test_update_missing_is_not_found(self, store: Store):
        with pytest.raises(NotFound):
            store.update(job("ghost"))


class TestDelete:
    def test_delete_returns_last_state_at_a_new_revision(self, store: Store):
        first = store.create(job("a"))
        gone = store.delete("TrainingJob", "a", "default")
        assert gone["spec"] == first["spec"]
        assert int(gone["metadata"]["resourceVersion"]) == store.revision()
        with pytest.raises(NotFound):
            store.get("TrainingJob", "a", "default")
        with pytest.raises(NotFound):
            store.delete("TrainingJob", "a", "default")

    def test_delete_with_stale_version_conflicts(self, store: Store):
        first = store.create(job("a"))
        store.update(job("a", x=2))
        with pytest.raises(Conflict):
            store.delete("TrainingJob", "a", "default", resource_version=first["metadata"]["resourceVersion"])
        store.get("TrainingJob", "a", "default")

    def test_name_can_be_reused_with_a_new_uid(self, store: Store):
        first = store.create(job("a"))
        store.delete("TrainingJob", "a", "default")
        again = store.create(job("a"))
        assert again["metadata"]["uid"] != first["metadata"]["uid"]


class TestList:
    def test_namespace_filter_and_order(self, store: Store):
        for ns, name in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "b")]:
            store.create(job(name, ns=ns))
        everything = store.list("TrainingJob")
        keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in everything.items]
        assert keys == [("a", "b"), ("a", "y"), ("b", "a"), ("b", "z")]
        assert [o["metadata"]["name"] for o in store.list("TrainingJob", namespace="b").items] == ["a", "z"]
        assert store.list("ResourceFlavor").items == []

    def test_label_selector(self, store: Store):
        store.create(job("a", labels={"team": "x", "tier": "gold"}))
        store.create(job("b", labels={"team": "y", "muster.dev/queue": "7"}))
        store.create(job("c", labels={"muster.dev/queue": "70"}))

        def names(text):
            return [
                o["metadata"]["name"] for o in store.list("TrainingJob", selector=parse_selector(text)).items
            ]

        assert names("team=x") == ["a"]
        assert names("muster.dev/queue=7") == ["b"]  # prefixed keys and numeric-looking values
        assert names("muster.dev/queue in (7,8),team=y") == ["b"]
        assert names("team!=x") == ["b", "c"]
        assert names("team in (x,y),!tier") == ["b"]
        assert names("tier") == ["a"]

    def test_resource_version_is_the_revision_read(self, store: Store):
        store.create(job("a"))
        assert store.list("TrainingJob").resource_version == str(store.revision())

    def test_counts_per_kind(self, store: Store):
        store.create(job("a"))
        store.create(job("b"))
        store.create(flavor("f"))
        assert store.counts() == {"TrainingJob": 2, "ResourceFlavor": 1}


class TestApply:
    def test_create_configure_unchanged(self, store: Store):
        [r1] = store.apply([job("a")])
        assert r1.action == "created"
        before = store.revision()
        [r2] = store.apply([job("a")])
        assert r2.action == "unchanged" and store.revision() == before
        [r3] = store.apply([job("a", x=2)])
        assert r3.action == "configured" and r3.object["metadata"]["generation"] == 2

    def test_all_or_nothing(self, store: Store):
        first = store.create(job("exists"))
        store.update(job("exists", x=2))  # makes `first`'s resourceVersion stale
        with pytest.raises(Conflict):
            store.apply([job("new-1"), first, job("new-2")])
        assert [o["metadata"]["name"] for o in store.list("TrainingJob").items] == ["exists"]

    def test_apply_keeps_controller_owned_metadata(self, store: Store):
        store.create(job("a"))
        owned = job("a")
        owned["metadata"]["finalizers"] = ["muster.dev/cleanup"]
        store.update(owned)
        [result] = store.apply([job("a", x=2)])
        assert result.object["metadata"]["finalizers"] == ["muster.dev/cleanup"]

    def test_each_object_gets_its_own_revision(self, store: Store):
        results = store.apply([job("a"), job("b"), flavor("f")])
        revisions = [int(r.object["metadata"]["resourceVersion"]) for r in results]
        assert revisions == sorted(set(revisions)) and revisions[-1] == store.revision()


class TestConcurrentWriters:
    def test_threads_and_two_store_instances_never_lose_an_update(self, store: Store, store_url: str):
        """Eight writers (half through a second Store on the same database, as a second process
        would) each add 1 to a counter 15 times with conflict-retry: the result is exact."""
        other = open_store(store_url)
        store.create(job("counter", n=0))
        errors: list[BaseException] = []

        def bump(s: Store) -> None:
            try:
                for _ in range(15):
                    while True:
                        cur = s.get("TrainingJob", "counter", "default")
                        cur["spec"]["n"] += 1
                        try:
                            s.update(cur)
                            break
                        except Conflict:
                            continue
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=bump, args=(store if i % 2 else other,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        other.close()
        assert not errors
        final = store.get("TrainingJob", "counter", "default")
        assert final["spec"]["n"] == 8 * 15
        assert final["metadata"]["generation"] == 1 + 8 * 15

    def test_concurrent_creates_get_distinct_revisions(self, store: Store):
        def create_many(prefix: str) -> None:
            for i in range(20):
                store.create(job(f"{prefix}-{i}"))

        threads = [threading.Thread(target=create_many, args=(f"t{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        items = store.list("TrainingJob").items
        revisions = {o["metadata"]["resourceVersion"] for o in items}
        assert len(items) == 80 and len(revisions) == 80
        assert store.revision() == 80


def test_apply_the_same_object_twice_in_one_call(store: Store):
    first, second = store.apply([job("a", x=1), job("a", x=2)])
    assert (first.action, second.action) == ("created", "configured")
    stored = store.get("TrainingJob", "a", "default")
    assert stored["spec"] == {"x": 2} and stored["metadata"]["generation"] == 2
    assert stored["metadata"]["resourceVersion"] == str(store.revision())


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_apply_creates_the_new_and_configures_the_existing_however_many(store: Store, count: int):
    """Few documents are read one by one, more with one query: the same answers either way."""
    for i in range(0, count, 2):
        store.create(job(f"j{i}", x=0))
    results = store.apply([job(f"j{i}", x=1) for i in range(count)])
    assert [r.action for r in results] == ["configured" if i % 2 == 0 else "created" for i in range(count)]
    assert [store.get("TrainingJob", f"j{i}", "default")["spec"] for i in range(count)] == [{"x": 1}] * count
    again = store.apply([job(f"j{i}", x=1) for i in range(count)])
    assert [r.action for r in again] == ["unchanged"] * count
