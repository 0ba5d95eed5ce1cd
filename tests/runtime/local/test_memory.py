"""Memory limits: breaching is OOMKilled with exit code 137, by cgroup where writable or by RSS watch."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.runtime.base import Container, PodPhase, PodReason
from muster.runtime.local.fake import parse_fake_gpus
from muster.runtime.local.memory import (
    CgroupLimiter,
    Limiter,
    RssWatch,
    _own_cgroups,
    _v2_candidates,
    detect_cgroup,
    open_limiter,
    tree_rss,
)
from muster.runtime.local.runtime import LocalRuntime
from muster.testing import skip_or_fail
from tests.runtime.local.conftest import launch, py, run_pod, shutdown

# Holds 200 MB for long enough that any watcher sees it.
HOG = "import time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"


@pytest.fixture(params=["auto", "rss"])
def limited_runtime(request, muster_home):
    rt = LocalRuntime(muster_home, fake_gpus=parse_fake_gpus("1"), memory=request.param, rss_interval=0.05)
    yield rt
    shutdown(rt)


class TestOOM:
    def test_breaching_the_limit_is_oomkilled_137(self, limited_runtime):
        pod = launch("hog", Container("main", py(HOG), limits={"memory": "64Mi"}))
        final = run_pod(limited_runtime, pod)
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.FAILED, PodReason.OOM_KILLED, 137)
        assert "memory limit of 67108864 bytes exceeded" in final.message

    def test_breach_by_a_grandchild_counts_for_the_container(self, limited_runtime):
        pod = launch(
            "tree", Container("main", ("sh", "-c", f"python3 -c '{HOG}'; exit 0"), limits={"memory": "64Mi"})
        )
        final = run_pod(limited_runtime, pod)
        assert (final.reason, final.exit_code) == (PodReason.OOM_KILLED, 137)

    def test_staying_under_the_limit_completes(self, limited_runtime):
        pod = launch(
            "small", Container("main", py("b = bytearray(8 * 1024 * 1024)"), limits={"memory": "256Mi"})
        )
        final = run_pod(limited_runtime, pod)
        assert final.reason == PodReason.COMPLETED

    def test_the_enforcement_used_is_recorded(self, limited_runtime):
        pod = launch("mode", Container("main", py("pass"), limits={"memory": "256Mi"}))
        run_pod(limited_runtime, pod)
        state = (limited_runtime._pods[pod.ref.uid].containers[0].files.state).read_text()
        expected = "rss" if limited_runtime._cgroup is None else f"cgroup{limited_runtime._cgroup.version}"
        assert f'"memory_enforcement":"{expected}"' in state


class TestCgroupDetection:
    def test_own_cgroups_are_read_from_proc_self_cgroup(self):
        text = "12:memory:/user/app\n4:cpu,cpuacct:/x\n0::/user.slice/app.scope\n"
        assert _own_cgroups(text) == ("/user.slice/app.scope", "/user/app")
        assert _own_cgroups("0::/\n") == ("/", None)

    def test_v2_cgroup_goes_beside_our_own_then_at_the_root(self, tmp_path):
        assert _v2_candidates(tmp_path, "/a/b/leaf.scope") == [tmp_path / "a/b/muster", tmp_path / "muster"]
        assert _v2_candidates(tmp_path, "/") == [tmp_path / "muster"]
        assert _v2_candidates(tmp_path, "/top.scope") == [tmp_path / "muster"]

    def test_no_cgroup_filesystem_means_none(self, tmp_path):
        assert detect_cgroup(tmp_path, "0::/\n") is None
        assert detect_cgroup(tmp_path, "") is None

    def test_detection_on_this_machine_finds_a_usable_cgroup_or_none(self):
        found = detect_cgroup()
        if found is None:
            skip_or_fail("no writable memory cgroup on this machine (the RSS watch is used)")
        assert found.version in (1, 2) and found.base.is_dir()

    def test_asking_for_cgroups_where_there_are_none_is_an_error(self, muster_home, monkeypatch):
        import muster.runtime.local.runtime as runtime_module

        monkeypatch.setattr(runtime_module, "detect_cgroup", lambda: None)
        with pytest.raises(Exception, match="no writable cgroup"):
            LocalRuntime(muster_home, memory="cgroup")


class TestLimiters:
    def test_no_limit_needs_no_watch(self):
        limiter = open_limiter(None, "x")
        assert type(limiter) is Limiter and limiter.interval is None and not limiter.breached(1)

    def test_rss_mode_without_a_cgroup(self):
        limiter = open_limiter({"limit": 1 << 20, "mode": "rss", "interval": 0.1}, "x")
        assert isinstance(limiter, RssWatch) and limiter.interval == 0.1

    def test_an_unusable_cgroup_falls_back_to_the_rss_watch_and_says_why(self, tmp_path: Path):
        missing = tmp_path / "not-a-cgroup" / "deeper"
        limiter = open_limiter({"limit": 1 << 20, "mode": "cgroup2", "cgroup": str(missing)}, "ctr").prepare()
        assert isinstance(limiter, RssWatch)
        assert "cannot use cgroup" in limiter.note and "watching RSS instead" in limiter.note

    @pytest.mark.parametrize(
        ("version", "name", "text", "kills"),
        [
            (2, "memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n", 1),
            (1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3),
            (2, "memory.events", "low 0\n", 0),
        ],
    )
    def test_oom_kills_are_read_from_the_cgroup(self, tmp_path, version, name, text, kills):
        (tmp_path / name).write_text(text)
        limiter = CgroupLimiter(version, tmp_path, 1 << 20, 0.1, fallback=Limiter())
        assert limiter.oom_kills() == kills
        assert limiter.breached(1) is (kills > 0)

    def test_tree_rss_of_a_missing_process_is_zero(self):
        assert tree_rss(2**22 + 12345) == 0
