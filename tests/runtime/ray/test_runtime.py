"""The Ray runtime on a real Ray cluster on this machine (head + two nodes of four GPUs declared
through resources): nodes from Ray's table, gangs as pinned placement groups (all or nothing),
processes, stops, logs, memory limits, and a node that dies with its pods."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from muster.runtime.base import (
    Container,
    DeviceBinding,
    GangLaunch,
    GangMember,
    PodLaunch,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
    StopReason,
)
from muster.testing import wait_for
from muster.testing.ray import LocalRayCluster

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]

PYTHON = sys.executable


@pytest.fixture
def runtime(ray_cluster: LocalRayCluster, tmp_path: Path) -> Iterator:
    from muster.runtime.ray.runtime import RayRuntime

    rt = RayRuntime(tmp_path / "home", node_refresh=0.2)
    try:
        yield rt
    finally:
        rt.close()


def gpu_nodes(rt) -> list[str]:
    return sorted(n.name for n in rt.nodes() if n.gpus and n.conditions[0].status == "True")


def member(name: str, node: str, *command: str, gpus: tuple[int, ...] = (0,), **kw) -> GangMember:
    container = Container("main", command, **kw)
    pod = PodLaunch(PodRef("default", name, f"{name}-{time.monotonic_ns()}"), (container,), node=node)
    return GangMember(pod, DeviceBinding(gpus=gpus), node)


def gang(*members: GangMember, timeout: float = 30) -> GangLaunch:
    return GangLaunch("default", f"g-{time.monotonic_ns()}", "uid", tuple(members), timeout)


def drive(rt, until: Callable[[dict[str, PodStatusChange]], bool], timeout: float = 60) -> dict:
    """Poll until ``until(latest change per pod name)`` holds."""
    seen: dict[str, PodStatusChange] = {}
    deadline = time.monotonic() + timeout
    while not until(seen):
        assert time.monotonic() < deadline, f"no such state within {timeout}s: {seen}"
        for change in rt.poll(0.2):
            seen[change.ref.name] = change
    return seen


def all_final(*names: str) -> Callable[[dict[str, PodStatusChange]], bool]:
    return lambda seen: all(n in seen and seen[n].final for n in names)


def release(rt, g: GangLaunch) -> None:
    for m in g.members:
        rt.release(m.pod.ref)
    rt.poll(0)


def pod_actors() -> list[str]:
    import ray

    return [
        a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("pod/")
    ]


def test_nodes_come_from_rays_node_table(runtime):
    import ray

    # A node an earlier test removed stays listed, NotReady, until Ray forgets it.
    nodes = {n.name: n for n in runtime.nodes() if n.conditions[0].status == "True"}
    assert len(nodes) == 3
    ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    gpu = [n for n in nodes.values() if n.gpus]
    assert len(gpu) == 2
    for n in gpu:
        assert n.capacity["nvidia.com/gpu"] == n.allocatable["nvidia.com/gpu"] == "4"
        assert n.capacity["cpu"] == "1" and int(n.capacity["memory"]) > 0
        assert [g.index for g in n.gpus] == [0, 1, 2, 3] and {g.model for g in n.gpus} == {"H100"}
        assert n.labels["nvidia.com/gpu.product"] == "H100" and n.labels["nvidia.com/gpu.count"] == "4"
        assert n.labels["ray.io/node-id"] in ids
        assert n.name.endswith(n.labels["ray.io/node-id"][:8])
        assert n.address == "127.0.0.1" and n.runtime == "ray"
        assert (n.conditions[0].type, n.conditions[0].status) == ("Ready", "True")
    (head,) = [n for n in nodes.values() if not n.gpus]
    assert head.capacity["nvidia.com/gpu"] == "0"


def test_a_gang_runs_each_pod_on_its_node_with_the_bound_gpus(runtime, tmp_path: Path):
    a, b = gpu_nodes(runtime)
    script = 'echo "node=$MUSTER_RAY_NODE_ID gpus=$CUDA_VISIBLE_DEVICES x=$X"'
    g = gang(
        member("p0", a, "sh", "-c", f"{script}; sleep 0.5", gpus=(1, 2), env={"X": "one"}),
        member("p1", b, "sh", "-c", f"{script}; exit 3", gpus=(3,), env={"X": "$(Y)-two", "Y": "why"}),
    )
    assert runtime.start_gang(g) == []
    seen = drive(runtime, all_final("p0", "p1"))
    assert (seen["p0"].phase, seen["p0"].reason, seen["p0"].exit_code) == (
        PodPhase.SUCCEEDED,
        PodReason.COMPLETED,
        0,
    )
    assert (seen["p1"].phase, seen["p1"].reason, seen["p1"].exit_code) == (
        PodPhase.FAILED,
        PodReason.ERROR,
        3,
    )
    assert "exited with code 3" in seen["p1"].message
    assert seen["p0"].started_at and seen["p0"].finished_at
    ids = {n.name: n.labels["ray.io/node-id"] for n in runtime.nodes()}
    log0 = "".join(runtime.logs(PodRef("default", "p0", "")))
    log1 = "".join(runtime.logs(PodRef("default", "p1", ""), "main"))
    assert log0 == f"node={ids[a]} gpus=1,2 x=one\n"
    assert log1 == f"node={ids[b]} gpus=3 x=$(Y)-two\n"  # $(Y) is defined after X: left as is
    release(runtime, g)
    assert runtime.pods() == []


def test_a_gang_ray_cannot_place_starts_nothing(runtime):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    a, b = gpu_nodes(runtime)
    node_a = next(n for n in runtime.nodes() if n.name == a)
    # Work Muster does not see holds three of node a's GPUs.
    outside = placement_group(
        [{"GPU": 3}], bundle_label_selector=[{"ray.io/node-id": node_a.labels["ray.io/node-id"]}]
    )
    assert outside.wait(30)
    try:
        before = set(pod_actors())
        g = gang(
            member("big", a, "sh", "-c", "echo ran", gpus=(0, 1)),
            member("small", b, "sh", "-c", "echo ran", gpus=(0,)),
            timeout=2,
        )
        runtime.start_gang(g)
        seen = drive(runtime, all_final("big", "small"), timeout=30)
        for name in ("big", "small"):
            assert (seen[name].phase, seen[name].reason) == (PodPhase.FAILED, PodReason.GANG_START_FAILED)
            assert seen[name].started_at is None
        message = seen["big"].message
        assert "Ray did not reserve the gang within 2s" in message
        assert f"big needs {{nvidia.com/gpu 2}} on node {a}" in message
        assert set(pod_actors()) == before  # no actor was ever created
        assert "".join(runtime.logs(PodRef("default", "small", ""))) == ""
        release(runtime, g)
        assert not [p for p in ray.util.placement_group_table().values() if p["state"] == "PENDING"]
    finally:
        remove_placement_group(outside)


def test_the_last_gangs_group_goes_once_its_pods_are_released(runtime):
    """Removing a released gang's group waits for its actors' clean-up, which poll() sees
    finish; the runtime says it has clean-up left, so whoever drives it polls until the
    group is gone even when no pod is left to report on."""
    import ray

    a, _ = gpu_nodes(runtime)
    g = gang(member("last", a, "sh", "-c", "echo done", gpus=(0, 1)))
    runtime.start_gang(g)
    drive(runtime, all_final("last"))

    def muster_groups() -> list[str]:
        table = ray.util.placement_group_table().values()
        return [p["name"] for p in table if p["state"] == "CREATED" and p["name"].startswith("muster/")]

    assert len(muster_groups()) == 1
    assert not runtime.cleaning_up()
    for m in g.members:
        runtime.release(m.pod.ref)
    assert runtime.pods() == [] and runtime.cleaning_up()
    wait_for(lambda: runtime.poll(0.1) == [] and not runtime.cleaning_up(), 30, what="the clean-up")
    wait_for(lambda: not muster_groups(), 30, what="the placement group's removal")


def test_a_workload_started_again_while_its_earlier_group_remains_gets_a_group_of_its_own(runtime):
    import ray

    a, b = gpu_nodes(runtime)
    # A requeued Workload keeps its uid; its earlier start's pods (here still running) are
    # released later, so both starts' groups exist at once.
    first = GangLaunch("default", "again", "wl-uid", (member("first", a, "sh", "-c", "sleep 30"),), 30)
    runtime.start_gang(first)
    drive(runtime, lambda s: "first" in s and s["first"].phase is PodPhase.RUNNING)
    second = GangLaunch("default", "again", "wl-uid", (member("second", b, "sh", "-c", "echo ran"),), 30)
    runtime.start_gang(second)
    seen = drive(runtime, all_final("second"))
    assert (seen["second"].phase, seen["second"].reason) == (PodPhase.SUCCEEDED, PodReason.COMPLETED)
    groups = [p["name"] for p in ray.util.placement_group_table().values() if p["state"] == "CREATED"]
    assert len([n for n in groups if n.startswith("muster/default/again/")]) == 2
    runtime.stop(first.members[0].pod.ref, 0, StopReason.STOPPED)
    drive(runtime, all_final("first"))
    release(runtime, first)
    release(runtime, second)


def test_a_pod_stopped_before_its_gang_is_placed_never_starts(runtime):
    a, _ = gpu_nodes(runtime)
    # Two CPUs on a node of one: Ray cannot reserve it.
    g = gang(member("wait", a, "sh", "-c", "echo ran", requests={"cpu": "2"}), timeout=60)
    runtime.start_gang(g)
    runtime.poll(0.3)
    runtime.stop(g.members[0].pod.ref, None, StopReason.PREEMPTED)
    seen = drive(runtime, all_final("wait"), timeout=5)
    assert (seen["wait"].reason, seen["wait"].message) == (
        PodReason.PREEMPTED,
        "container 'main': stopped before it started",
    )
    release(runtime, g)


def test_stop_is_sigterm_then_sigkill_after_the_grace(runtime):
    a, b = gpu_nodes(runtime)
    handshake = (
        "import signal, sys, time\n"
        "def done(*_):\n    print('checkpoint saved', flush=True); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, done)\nprint('ready', flush=True)\ntime.sleep(60)\n"
    )
    stubborn = "trap '' TERM; echo ready; while true; do sleep 0.1; done"
    g = gang(member("polite", a, PYTHON, "-c", handshake), member("stubborn", b, "sh", "-c", stubborn))
    runtime.start_gang(g)
    drive(runtime, lambda s: all(n in s and s[n].phase is PodPhase.RUNNING for n in ("polite", "stubborn")))
    for pod in ("polite", "stubborn"):
        log_ready = lambda pod=pod: "ready" in "".join(runtime.logs(PodRef("default", pod, "")))  # noqa: E731
        drive(runtime, lambda _s, ready=log_ready: ready(), timeout=30)
    started = time.monotonic()
    for m in g.members:
        runtime.stop(m.pod.ref, 1.0, StopReason.PREEMPTED)
    seen = drive(runtime, all_final("polite", "stubborn"), timeout=30)
    assert (seen["polite"].reason, seen["polite"].exit_code) == (PodReason.PREEMPTED, 0)
    assert "exited with code 0 after SIGTERM" in seen["polite"].message
    assert (seen["stubborn"].reason, seen["stubborn"].exit_code) == (PodReason.PREEMPTED, 137)
    assert "still running 1.0s after SIGTERM; killed" in seen["stubborn"].message
    assert time.monotonic() - started >= 1.0
    assert "checkpoint saved" in "".join(runtime.logs(PodRef("default", "polite", "")))
    release(runtime, g)


def test_logs_follow_until_the_pod_ends_and_the_previous_run_is_kept(runtime):
    a, _ = gpu_nodes(runtime)
    first = gang(member("talk", a, "sh", "-c", "echo first"))
    runtime.start_gang(first)
    drive(runtime, all_final("talk"))
    release(runtime, first)
    second = gang(member("talk", a, "sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done"))
    runtime.start_gang(second)
    drive(runtime, lambda s: "talk" in s and s["talk"].phase is PodPhase.RUNNING)
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(runtime.logs(PodRef("default", "talk", ""), follow=True))
    )
    reader.start()
    drive(runtime, all_final("talk"))
    reader.join(timeout=10)
    assert not reader.is_alive() and lines == ["line 1\n", "line 2\n", "line 3\n"]
    assert list(runtime.logs(PodRef("default", "talk", ""), previous=True)) == ["first\n"]
    release(runtime, second)


def test_a_memory_limit_is_enforced(runtime):
    a, _ = gpu_nodes(runtime)
    hog = "b = bytearray(300 << 20); import time; time.sleep(30)"
    g = gang(member("hog", a, PYTHON, "-c", hog, limits={"memory": "64Mi"}))
    runtime.start_gang(g)
    seen = drive(runtime, all_final("hog"), timeout=60)
    assert (seen["hog"].reason, seen["hog"].exit_code) == (PodReason.OOM_KILLED, 137)
    release(runtime, g)


def test_a_node_that_dies_fails_its_pods_node_lost(runtime, ray_cluster: LocalRayCluster):
    import ray

    a, b = gpu_nodes(runtime)
    g = gang(
        member("doomed", a, "sh", "-c", "echo up; sleep 120"), member("fine", b, "sh", "-c", "sleep 120")
    )
    runtime.start_gang(g)
    running = drive(
        runtime, lambda s: all(n in s and s[n].phase is PodPhase.RUNNING for n in ("doomed", "fine"))
    )
    (pid,) = [c.pid for c in running["doomed"].containers]
    assert pid and psutil.pid_exists(pid)
    node_id = next(n.labels["ray.io/node-id"] for n in runtime.nodes() if n.name == a)
    handle = next(w for w in ray_cluster.workers if w.node_id == node_id)
    try:
        ray_cluster.remove_node(handle)
        seen = drive(runtime, all_final("doomed"), timeout=60)
        assert seen["doomed"].reason is PodReason.NODE_LOST
        assert f"Ray node {node_id[:8]} ({a}) died" in seen["doomed"].message
        dead = next(n for n in runtime.nodes() if n.name == a)
        assert (dead.conditions[0].status, dead.conditions[0].reason) == ("False", "NodeLost")
        assert dead.allocatable["nvidia.com/gpu"] == "0"
        assert "fine" not in seen  # the other node's pod runs on
        # Its shim outlived the node's Ray processes and ended the container with them.
        wait_for(lambda: not _alive(pid), timeout=10, what=f"the dead node's process {pid} to end")
        runtime.stop(g.members[1].pod.ref, 0, StopReason.STOPPED)
        drive(runtime, all_final("fine"))
        release(runtime, g)
    finally:
        ray_cluster.add_gpu_node()
        ray_cluster.cluster.wait_for_nodes()
    assert sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")) == 2


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
