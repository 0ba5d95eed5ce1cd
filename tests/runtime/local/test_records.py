"""Where the local runtime keeps its pods' records: in memory (a private directory under
/dev/shm, linked from the home) for root and system users, on disk for the others or when
asked; records in use stay where they are; nothing is left in memory once unused."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from muster.runtime.base import Container, DeviceBinding, PodPhase
from muster.runtime.local import records as records_module
from muster.runtime.local.records import place_records, private_dir, release_records, shm_root
from muster.runtime.local.runtime import LocalRuntime
from tests.runtime.local.conftest import launch, run_pod


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for /dev/shm (world-writable and sticky, as it is)."""
    fake = tmp_path / "shm"
    fake.mkdir()
    fake.chmod(0o1777)
    monkeypatch.setattr(records_module, "SHM", fake)
    return fake


def _link(home: Path) -> Path:
    return home / "run" / "local" / "pods"


def test_auto_keeps_a_root_or_system_users_records_in_a_private_directory_in_memory(shm, tmp_path):
    home = tmp_path / "home"
    where = place_records(_link(home), home, "auto")
    assert _link(home).is_symlink() and _link(home).resolve() == where
    assert where.parent.parent == shm_root() and shm_root().parent == shm
    assert (where / ".home").read_text() == str(home.resolve())
    assert os.stat(shm_root()).st_mode & 0o777 == 0o700


def test_auto_keeps_a_regular_users_records_on_disk(shm, tmp_path, monkeypatch):
    # logind removes a regular user's /dev/shm files when their last session ends.
    monkeypatch.setattr(records_module, "_SYSTEM_UID_MAX", -1)
    home = tmp_path / "home"
    assert place_records(_link(home), home, "auto") == _link(home)
    assert _link(home).is_dir() and not _link(home).is_symlink()
    assert place_records(_link(home), home, "memory").parent.parent == shm_root()  # when asked


def test_records_in_use_stay_where_they_are_and_empty_ones_move(shm, tmp_path):
    home = tmp_path / "home"
    where = place_records(_link(home), home, "memory")
    (where / "default" / "p" / "uid-1").mkdir(parents=True)  # a pod's records
    assert place_records(_link(home), home, "disk") == where  # its pod may still run
    for empty in (where / "default" / "p" / "uid-1", where / "default" / "p", where / "default"):
        empty.rmdir()
    assert place_records(_link(home), home, "disk") == _link(home) and not where.exists()
    assert place_records(_link(home), home, "memory") == where  # and back, once empty


def test_a_reboot_that_emptied_memory_places_the_records_again(shm, tmp_path):
    home = tmp_path / "home"
    where = place_records(_link(home), home, "memory")
    (where / "default" / "p" / "uid-1").mkdir(parents=True)
    for path in sorted(shm.rglob("*"), reverse=True):  # the machine restarted
        path.rmdir() if path.is_dir() else path.unlink()
    assert place_records(_link(home), home, "memory") == where and where.is_dir()
    assert not (where / "default").exists()


def test_close_leaves_nothing_in_memory_when_no_pod_is_recorded(shm, tmp_path):
    home = tmp_path / "home"
    where = place_records(_link(home), home, "memory")
    (where / "default").mkdir()
    release_records(_link(home))
    assert _link(home).is_symlink()  # a pod's records are still there
    (where / "default").rmdir()
    release_records(_link(home))
    assert not _link(home).exists() and not _link(home).is_symlink() and not where.exists()


def test_a_shared_directory_in_memory_is_not_used(shm, tmp_path, caplog):
    # Another user could make /dev/shm/muster-<uid> first and rewrite the specs a root
    # runtime runs: a directory others can write is refused, and the records go on disk.
    shm_root().mkdir()
    shm_root().chmod(0o777)
    assert private_dir(shm_root()) is None
    home = tmp_path / "home"
    with caplog.at_level(logging.WARNING, logger="muster.runtime.local.records"):
        assert place_records(_link(home), home, "memory") == _link(home)
    assert "kept on disk" in caplog.text and "MUSTER_POD_RECORDS=disk" in caplog.text
    (shm / "elsewhere").mkdir()
    shm_root().rmdir()
    shm_root().symlink_to(shm / "elsewhere")
    assert private_dir(shm_root()) is None  # nor a link to one


def test_the_records_of_homes_that_are_gone_are_collected(shm, tmp_path, monkeypatch):
    kept, gone, moved = tmp_path / "kept", tmp_path / "gone", tmp_path / "moved"
    dirs = {home: place_records(_link(home), home, "memory") for home in (kept, gone, moved)}
    for home in (gone, moved):
        (dirs[home] / "default").mkdir()
    (tmp_path / "gone").rename(tmp_path / "deleted")  # its home is no more
    _link(moved).unlink()
    _link(moved).mkdir()  # its home keeps its records on disk now
    placing = shm_root() / "pods" / "0123456789abcdef"
    placing.mkdir()  # another runtime's, naming no home yet
    place_records(_link(tmp_path / "new"), tmp_path / "new", "memory")
    assert dirs[kept].is_dir() and placing.is_dir()
    assert not dirs[gone].exists() and not dirs[moved].exists()
    monkeypatch.setattr(records_module, "_PLACING_SECONDS", 0.0)
    old = time.time() - 10
    os.utime(placing, (old, old))
    place_records(_link(tmp_path / "new"), tmp_path / "new", "memory")
    assert not placing.exists()  # left by a runtime that died placing it


def test_a_runtime_runs_and_readopts_pods_with_records_in_memory(shm, muster_home):
    rt = LocalRuntime(muster_home, pod_records="memory")
    try:
        final = run_pod(rt, launch("mem", Container("main", ("true",))))
        assert final.phase == PodPhase.SUCCEEDED
        records = _link(muster_home).resolve()
        assert records.parent.parent == shm_root() and (records / "default" / "mem").is_dir()
    finally:
        rt.close()
    # Not released: a new runtime on the home adopts it from memory, reports it, releases it.
    rt = LocalRuntime(muster_home, pod_records="disk")
    try:
        assert [p.phase for p in rt.pods()] == [PodPhase.SUCCEEDED]  # adopted as it was made
        assert _link(muster_home).resolve() == records  # in use: not moved to disk
        rt.release(rt.pods()[0].ref)
        rt.start(launch("next", Container("main", ("true",)), uid="u-next"), DeviceBinding())
    finally:
        rt.close()
    assert (records / "default" / "next").is_dir()  # still there: "next" was not released
