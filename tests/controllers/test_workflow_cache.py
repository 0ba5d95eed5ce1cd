"""Step caching: keys, hits without a process, partial re-runs, maxAge, vanished artifacts,
entries that survive the controller."""

from __future__ import annotations

from muster.controllers.workflow.cache import cache_key, canonical_definition
from tests.controllers.conftest import Harness
from tests.controllers.workflows import Flow, outputs, pod, task, workflow

CACHE = {"version": "v1"}


def pipeline(name: str, lr: str = "0.1", **extra: object) -> dict:
    """prep -> train(lr) -> eval, each cached; prep writes a dataset, train a model."""
    return workflow(
        name,
        task("prep", template=pod("prep"), cache=CACHE, outputs=outputs(artifacts={"data": ""})),
        task(
            "train",
            "prep",
            template=pod("train", "--lr", "{{workflow.parameters.lr}}"),
            cache=CACHE,
            inputs={"artifacts": [{"name": "data", "from": "{{tasks.prep.outputs.artifacts.data}}"}]},
            outputs=outputs(artifacts={"model": ""}),
        ),
        task(
            "eval",
            "train",
            template=pod("eval"),
            cache=CACHE,
            inputs={"artifacts": [{"name": "model", "from": "{{tasks.train.outputs.artifacts.model}}"}]},
            outputs=outputs(params={"acc": ""}),
        ),
        arguments={"parameters": [{"name": "lr", "value": lr}]},
        **extra,
    )


def run_pipeline(h: Harness, name: str, lr: str = "0.1") -> Flow:
    f = Flow(h, name)
    f.finish("prep", files={"data": "rows"})
    f.finish("train", files={"model": f"weights for lr {lr}"})
    f.finish("eval", params={"acc": "0.9" if lr == "0.1" else "0.8"})
    f.settle()
    return f


def running_event(h: Harness, name: str) -> str:
    """The message of the workflow's (first) TaskRunning event: it says why the cache missed."""
    events = h.events(h.get("Workflow", name))
    return next(m for r, m in events if r == "TaskRunning")


def test_second_run_with_the_same_inputs_is_entirely_cached(harness: Harness):
    h = harness
    h.apply(pipeline("first"))
    first = run_pipeline(h, "first")
    assert {n: first.node(n)["cacheHit"] for n in ("prep", "train", "eval")} == dict.fromkeys(
        ("prep", "train", "eval"), False
    )
    entries = h.store.list("CacheEntry", "default").items
    assert sorted(e["metadata"]["name"] for e in entries) == sorted(
        first.node(n)["cacheKey"] for n in ("prep", "train", "eval")
    )
    started = list(h.rt.started)
    h.apply(pipeline("second"))
    second = Flow(h, "second")
    second.settle()
    assert h.rt.started == started  # no process started
    assert second.phases() == {"eval": "Cached", "prep": "Cached", "train": "Cached"}
    for n in ("prep", "train", "eval"):
        node = second.node(n)
        assert node["cacheHit"] is True and node["reason"] == "CacheHit"
        assert node["cacheKey"] == first.node(n)["cacheKey"]
        assert node["outputs"] == first.node(n)["outputs"]
    assert second.status["progress"] == "3/3"
    assert len(h.store.list("Workload", "default").items) == 3  # only the first run's


def test_changing_one_input_reruns_only_what_depends_on_it(harness: Harness):
    h = harness
    h.apply(pipeline("first", lr="0.1"))
    run_pipeline(h, "first", lr="0.1")
    h.apply(pipeline("second", lr="0.2"))
    second = Flow(h, "second")
    second.pod_of("train")
    assert second.phase("prep") == "Cached" and not second.started("prep")
    assert second.command("train") == ["train", "--lr", "0.2"]
    second.finish("train", files={"model": "weights for lr 0.2"})  # a different model ...
    second.finish("eval", params={"acc": "0.8"})  # ... so eval runs again too
    second.settle()
    assert second.node("eval")["cacheHit"] is False
    assert second.node("eval")["outputs"]["parameters"] == {"acc": "0.8"}


def test_an_unchanged_output_stops_the_rerun_downstream(harness: Harness):
    h = harness
    h.apply(pipeline("first", lr="0.1"))
    run_pipeline(h, "first", lr="0.1")
    h.apply(pipeline("second", lr="0.2"))
    second = Flow(h, "second")
    second.finish("train", files={"model": "weights for lr 0.1"})  # the same bytes as before
    second.settle()
    assert second.phases() == {"eval": "Cached", "prep": "Cached", "train": "Succeeded"}


def test_cache_version_and_max_age_and_vanished_artifacts_are_misses(harness: Harness):
    h = harness
    h.apply(
        workflow(
            "one", task("a", cache={"version": "v1", "maxAge": "1h"}, outputs=outputs(artifacts={"out": ""}))
        )
    )
    f = Flow(h, "one")
    f.finish("a", files={"out": "x"})
    f.settle()
    key = f.node("a")["cacheKey"]
    # another version: another key
    h.apply(
        workflow(
            "two", task("a", cache={"version": "v2", "maxAge": "1h"}, outputs=outputs(artifacts={"out": ""}))
        )
    )
    two = Flow(h, "two")
    two.pod_of("a")
    assert two.node("a")["cacheKey"] != key
    assert "cache miss: no earlier run with this key" in running_event(h, "two")
    # older than maxAge
    h.clock.advance(3601)
    h.apply(
        workflow(
            "three",
            task("a", cache={"version": "v1", "maxAge": "1h"}, outputs=outputs(artifacts={"out": ""})),
        )
    )
    three = Flow(h, "three")
    three.pod_of("a")
    assert three.node("a")["cacheKey"] == key
    assert "older than cache.maxAge" in running_event(h, "three")
    three.finish("a", files={"out": "x"})
    three.settle()  # recorded again, fresh
    # the stored artifact vanished
    digest = three.node("a")["outputs"]["artifacts"]["out"]
    stored = h.home / "artifacts" / "sha256" / digest.removeprefix("sha256:")
    stored.chmod(0o644)
    stored.unlink()
    h.apply(
        workflow(
            "four", task("a", cache={"version": "v1", "maxAge": "1h"}, outputs=outputs(artifacts={"out": ""}))
        )
    )
    four = Flow(h, "four")
    four.pod_of("a")
    assert "artifact out of the recorded run is no longer stored" in running_event(h, "four")


def test_failed_runs_are_not_recorded(harness: Harness):
    h = harness
    h.apply(workflow("bad", task("a", cache=CACHE)))
    f = Flow(h, "bad")
    f.finish("a", 1)
    f.settle("Failed")
    assert not h.store.list("CacheEntry", "default").items


def test_cache_entries_survive_a_new_manager(harness: Harness, sqlite_store, tmp_path):
    h = harness
    h.apply(pipeline("first"))
    run_pipeline(h, "first")
    h.close()
    again = Harness(sqlite_store, h.home)
    try:
        again.apply(pipeline("second"))
        second = Flow(again, "second")
        second.settle()
        assert set(second.phases().values()) == {"Cached"}
        assert not again.rt.started
    finally:
        again.close()


def test_fan_out_runs_are_cached_per_item(harness: Harness):
    h = harness
    sweep = task("sweep", withItems=[1, 2], template=pod("run", "{{item}}"), cache=CACHE)
    h.apply(workflow("a", sweep))
    f = Flow(h, "a")
    f.finish("sweep(0)")
    f.finish("sweep(1)")
    f.settle()
    h.apply(workflow("b", task("sweep", withItems=[2, 3], template=pod("run", "{{item}}"), cache=CACHE)))
    g = Flow(h, "b")
    g.pod_of("sweep(1)")
    assert g.phase("sweep(0)") == "Cached" and not g.started("sweep(0)")
    g.finish("sweep(1)")
    g.settle()


def test_key_covers_definition_inputs_artifacts_version_not_scheduling():
    task_ = {"name": "t", "outputs": {"parameters": [{"name": "p", "valueFrom": {"path": "p"}}]}}
    base = {"template": {"spec": {"containers": [{"name": "m", "image": "i", "command": ["a"], "env": []}]}}}
    key = cache_key(canonical_definition(task_, base), {"x": "1"}, {"d": "sha256:" + "0" * 64}, "v1")
    placed = {
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "m",
                        "image": "i",
                        "command": ["a"],
                        "env": [],
                        "resources": {"limits": {"cpu": "2"}},
                    }
                ],
                "nodeSelector": {"zone": "a"},
            }
        }
    }
    assert (
        cache_key(canonical_definition(task_, placed), {"x": "1"}, {"d": "sha256:" + "0" * 64}, "v1") == key
    )
    other = {"template": {"spec": {"containers": [{"name": "m", "image": "i", "command": ["b"], "env": []}]}}}
    for changed in (
        cache_key(canonical_definition(task_, other), {"x": "1"}, {"d": "sha256:" + "0" * 64}, "v1"),
        cache_key(canonical_definition(task_, base), {"x": "2"}, {"d": "sha256:" + "0" * 64}, "v1"),
        cache_key(canonical_definition(task_, base), {"x": "1"}, {"d": "sha256:" + "1" * 64}, "v1"),
        cache_key(canonical_definition(task_, base), {"x": "1"}, {"d": "sha256:" + "0" * 64}, "v2"),
        cache_key(canonical_definition({"name": "t"}, base), {"x": "1"}, {"d": "sha256:" + "0" * 64}, "v1"),
    ):
        assert changed != key
    assert len(key) == 64 and int(key, 16) >= 0
