"""The cache's mutation check (MUSTER_CACHE_MUTATION_DETECTOR): cached objects are shared, and
an object handed to a write becomes the cached one, so an edit in place is a bug it reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.controllers.cache import Cache
from muster.controllers.context import Context
from muster.store import Store
from muster.testing.factories import training_job
from tests.controllers.conftest import Harness, job


def _context(store: Store, tmp_path: Path) -> Context:
    cache = Cache(store, kinds=("TrainingJob",), check_mutations=True)
    return Context(store=store, cache=cache, home=tmp_path, clock=lambda: 0.0)


@pytest.fixture(autouse=True)
def _expected_errors(caplog: pytest.LogCaptureFixture) -> None:
    """These tests make the errors on purpose: the suite's own check must not see them."""
    caplog.set_level("CRITICAL", logger="muster.controllers.cache")


def test_a_cached_object_edited_in_place_is_reported_when_replaced(sqlite_store: Store, tmp_path: Path):
    ctx = _context(sqlite_store, tmp_path)
    ctx.cache.observe(sqlite_store.create(training_job("j")))
    cached = ctx.cache.get("TrainingJob", "j", "default")
    assert cached is not None
    cached["spec"]["suspend"] = True  # the bug: an edit of the shared object
    ctx.update_status({**cached, "status": {"phase": "Running"}})
    assert len(ctx.cache.mutations) == 1
    assert "TrainingJob default/j was changed in place" in ctx.cache.mutations[0]
    assert "copy one before editing it" in ctx.cache.mutations[0]


def test_an_object_edited_after_its_write_is_reported_at_stop(sqlite_store: Store, tmp_path: Path):
    ctx = _context(sqlite_store, tmp_path)
    written = ctx.create(training_job("j"))
    assert written is not None
    assert ctx.cache.verify() == []
    written["metadata"].setdefault("labels", {})["late"] = "edit"  # after the write: the bug
    ctx.cache.stop()
    assert [m for m in ctx.cache.mutations if "TrainingJob default/j was changed in place" in m]


def test_a_deleted_object_edited_in_place_is_reported(sqlite_store: Store, tmp_path: Path):
    ctx = _context(sqlite_store, tmp_path)
    written = ctx.create(training_job("j"))
    assert written is not None
    written["status"] = {"phase": "Edited"}
    assert ctx.delete(written)
    assert len(ctx.cache.mutations) == 1


def test_an_object_that_is_not_plain_json_is_reported(sqlite_store: Store, tmp_path: Path):
    ctx = _context(sqlite_store, tmp_path)
    obj = training_job("j")
    obj["metadata"]["labels"] = {"a": "b"}
    ctx.cache.observe({**sqlite_store.create(obj), "extra": ("a", "tuple")})
    assert ctx.cache.mutations == [
        "cache mutation detected: TrainingJob default/j is not plain JSON (the store holds it as it "
        "decodes, not as cached); cached objects are shared: copy one before editing it, and do not "
        "edit an object once written"
    ]


def test_untouched_objects_pass_and_the_check_is_off_by_default(sqlite_store: Store, tmp_path: Path):
    ctx = _context(sqlite_store, tmp_path)
    first = ctx.create(training_job("j"))
    assert first is not None
    ctx.update_status({**first, "status": {"phase": "Running"}})
    assert ctx.cache.verify() == []
    plain = Cache(sqlite_store, kinds=("TrainingJob",))
    plain.observe(sqlite_store.create(training_job("k")))
    held = plain.get("TrainingJob", "k", "default")
    assert held is not None
    held["spec"]["suspend"] = True
    assert plain.verify() == [] and plain.mutations == []


def test_the_suites_managers_check_and_a_whole_run_edits_nothing(sqlite_store: Store, tmp_path: Path):
    # tests/conftest.py turns the check on for every manager of the suite.
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        assert h.manager.ctx.cache._shadow is not None
        h.apply(job("a", workers=2), job("b", workers=1))
        h.settle(lambda: len(h.rt.pods_by_uid) == 3)
        h.rt.run_all()
        h.settle(lambda: h.has("TrainingJob", "a", "Running") and h.has("TrainingJob", "b", "Running"))
        for key in list(h.rt.running()):
            h.rt.exit(key, 0)
        h.settle(lambda: h.has("TrainingJob", "a", "Succeeded") and h.has("TrainingJob", "b", "Succeeded"))
        assert h.manager.ctx.cache.verify() == []
    finally:
        h.close()
    assert h.manager.ctx.cache.mutations == []
