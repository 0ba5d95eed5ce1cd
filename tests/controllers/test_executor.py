"""The pod executor: write before acting, stop on request, re-adopt after a crash."""

from __future__ import annotations

from pathlib import Path

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.pods.stop import request_stop
from muster.runtime.base import DeviceBinding, PodLaunch
from muster.store import Store
from muster.testing.fake_runtime import FakeRuntime
from tests.controllers.conftest import Harness, job


def bound_pod(name: str, phase: str | None = None, handle: bool = False) -> dict:
    pod: dict = {
        "apiVersion": "muster.dev/v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "node-0", "gpus": [1], "containers": [{"name": "c", "command": ["sleep", "9"]}]},
    }
    status = {}
    if phase:
        status["phase"] = phase
    if handle:
        status["handle"] = {"runtime": "local", "node": "node-0"}
    if status:
        pod["status"] = status
    return pod


def create(store: Store, pod: dict) -> dict:
    status = pod.pop("status", None)
    stored = store.create(pod)
    if status:
        stored["status"] = status
        stored = store.update_status(stored)
    return stored


class CheckingRuntime(FakeRuntime):
    """Fails the test if a pod is started before its start was written to the store."""

    store: Store

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        stored = self.store.get("Pod", pod.ref.name, pod.ref.namespace)
        assert stored["status"]["handle"] == {"runtime": "local", "node": "node-0"}
        return super().start(pod, devices)


def test_start_is_written_before_the_runtime_acts(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home")
    try:
        rt = CheckingRuntime(gpus=4)
        rt.store = sqlite_store
        h.manager.stop()
        h.rt = rt
        h.manager = Manager(
            sqlite_store, ManagerConfig(home=tmp_path / "home", resync_seconds=0, clock=h.clock), runtime=rt
        )
        create(sqlite_store, bound_pod("p"))
        h.settle(lambda: rt.started)
        assert rt.started == ["default/p"] and rt.find("default/p").devices.gpus == (1,)
    finally:
        h.close()


def test_a_start_interrupted_by_a_crash_is_completed_once(harness: Harness):
    h = harness
    create(h.store, bound_pod("p", phase="Pending", handle=True))  # written, then the server died
    h.settle(lambda: h.rt.started)
    h.settle()
    assert h.rt.started == ["default/p"]


def test_running_pod_the_runtime_lost_fails_as_node_lost(harness: Harness):
    h = harness
    create(h.store, bound_pod("p", phase="Running", handle=True))
    h.settle(lambda: h.pods()["p"]["status"]["phase"] == "Failed")
    status = h.pods()["p"]["status"]
    assert status["reason"] == "NodeLost" and "no record" in status["message"]
    assert not h.rt.started


def test_stop_request_stops_stores_final_status_then_deletes(harness: Harness):
    h = harness
    h.rt.hold_stops = True
    pod = create(h.store, bound_pod("p"))
    h.settle(lambda: h.rt.started)
    h.rt.run("default/p")
    h.settle(lambda: h.pods()["p"]["status"]["phase"] == "Running")
    request_stop(h.store, h.pods()["p"], "Preempted")
    h.settle(lambda: h.rt.stops)
    assert h.rt.stops == [("default/p", "Preempted")]
    assert h.pods()["p"]["metadata"]["deletionTimestamp"]
    h.rt.finish_stop("default/p")
    h.settle(lambda: "p" not in h.pods())
    reasons = [r for r, _ in h.events(pod)]
    assert reasons[-2:] == ["Stopping", "Preempted"]  # the final status carried the stop's reason
    assert not h.rt.pods_by_uid  # released once the final status was stored


def test_pod_stopped_before_it_started_is_failed_and_removed(harness: Harness):
    h = harness
    pod = create(h.store, bound_pod("p", phase="Pending", handle=False))
    # Not started yet: stop it in the same breath as its creation.
    request_stop(h.store, pod, "Suspended")
    h.settle(lambda: "p" not in h.pods())
    assert not h.rt.started


def test_process_of_a_deleted_pod_is_stopped(harness: Harness):
    h = harness
    create(h.store, bound_pod("p"))
    h.settle(lambda: h.rt.started)
    h.rt.run("default/p")
    h.settle()
    h.store.delete("Pod", "p", "default")
    h.settle(lambda: h.rt.stops)
    assert h.rt.stops == [("default/p", "Stopped")]
    h.settle(lambda: not h.rt.pods_by_uid)


def test_restart_re_adopts_and_records_what_happened_meanwhile(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home")
    h.apply(job("train", workers=2))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    h.manager.stop()  # the server goes away; its pods run on
    h.rt.exit("default/train-worker-0", 0)
    h.rt.exit("default/train-worker-1", 0)
    # A new manager on the same runtime state: the runtime reports every pod it adopted.
    for fake in h.rt.pods_by_uid.values():
        fake.reported = None  # type: ignore[assignment]
    h.manager = Manager(
        sqlite_store, ManagerConfig(home=tmp_path / "home", resync_seconds=0, clock=h.clock), runtime=h.rt
    )
    try:
        h.settle(lambda: h.has("TrainingJob", "train", "Succeeded"))
        assert h.rt.started.count("default/train-worker-0") == 1  # nothing started twice
        assert {p["status"]["reason"] for p in h.pods().values()} == {"Completed"}
    finally:
        h.close()


def test_a_pass_between_resyncs_hands_the_executor_only_pods_in_play_or_changed(
    sqlite_store: Store, tmp_path: Path
):
    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=3600)  # only the first pass is full
    try:
        create(h.store, bound_pod("done"))
        h.settle(lambda: h.rt.started)
        h.rt.run("default/done")
        h.rt.exit("default/done", 0)
        h.settle(lambda: h.pods()["done"]["status"]["phase"] == "Succeeded")
        h.settle()
        handed: list[set[str]] = []
        sync = h.manager.executor.sync

        def spied(pods: list[dict]) -> None:
            handed.append({p["metadata"]["name"] for p in pods})
            sync(pods)

        h.manager.executor.sync = spied
        create(h.store, bound_pod("next"))
        h.settle(lambda: "default/next" in h.rt.started)
        assert handed and all(names == {"next"} for names in handed)  # the finished pod is left alone
        # ... until it changes (a stop asked of it after it ended: it keeps its outcome)
        request_stop(h.store, h.pods()["done"], "Stopped")
        h.settle()
        assert "done" in handed[-1] and h.pods()["done"]["status"]["phase"] == "Succeeded"
    finally:
        h.close()
