"""GPU and node health through the manager: faults taint the node and move jobs elsewhere,
lost nodes become NotReady and their pods NodeLost, drains evict."""

from __future__ import annotations

import pytest

from muster.api.labels import DRAIN_ANNOTATION, DRAIN_GRACE_ANNOTATION
from muster.controllers.nodes.health import GPU_UNHEALTHY_TAINT
from muster.runtime.base import GpuFault
from muster.store import Store
from tests.controllers.conftest import Harness, job


@pytest.fixture
def two_nodes(sqlite_store: Store, tmp_path) -> Harness:
    h = Harness(sqlite_store, tmp_path / "home", nodes={"node-a": 2, "node-b": 2}, node_grace_seconds=40)
    yield h
    h.close()


def running_on(h: Harness, name: str) -> set[str]:
    return {
        p["spec"]["nodeName"]
        for p in h.pods().values()
        if p["metadata"]["labels"]["muster.dev/job-name"] == name and p["status"].get("phase") == "Running"
    }


def start(h: Harness, name: str, **kwargs) -> str:
    h.apply(job(name, workers=1, gpus=2, run_policy={"backoffLimit": 0}, **kwargs))
    h.settle(lambda: h.rt.pods_by_uid)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", name, "Running"))
    (node,) = running_on(h, name)
    return node


def inject(h: Harness, node: str, fault: GpuFault) -> None:
    future = h.manager.request_fault(node, fault)
    h.settle(future.done)
    future.result()


def test_an_xid_taints_the_node_and_the_job_moves_off_the_gpu(two_nodes: Harness):
    h = two_nodes
    node = start(h, "train")
    other = ({"node-a", "node-b"} - {node}).pop()
    inject(h, node, GpuFault(gpu=1, xid=79))

    n = h.get("Node", node, None)
    assert GPU_UNHEALTHY_TAINT in n["spec"]["taints"]
    assert n["status"]["gpus"][1]["health"] == "Unhealthy"
    assert "XID 79" in n["status"]["gpus"][1]["healthReason"]
    gpu_condition = next(c for c in n["status"]["conditions"] if c["type"] == "GPUHealthy")
    assert gpu_condition["status"] == "False"
    assert (
        "GPUUnhealthy",
        f"tainted nvidia.com/gpu=unhealthy:NoSchedule: GPU 1: {n['status']['gpus'][1]['healthReason']}",
    ) in h.events(n)

    # The job is requeued (reason GPUUnhealthy) and its pods stopped with that reason ...
    h.settle(lambda: h.has("TrainingJob", "train", "Queued") and not h.rt.running())
    stops = [reason for pod, reason in h.rt.stops if pod == "default/train-worker-0"]
    assert stops == ["GPUUnhealthy"]
    events = h.events(h.job("train"))
    assert events[-1][0] == "GPUUnhealthy" and f"GPU 1 of node {node} is unhealthy" in events[-1][1]
    assert "GPUUnhealthy" in [r for r, _ in h.events(h.get("Workload", "train"))]
    # ... and runs on the other node; nothing counted against backoffLimit 0.
    h.settle(lambda: any(f.launch.node == other for f in h.rt.pods_by_uid.values()))
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    assert running_on(h, "train") == {other}
    j = h.job("train")
    assert j["status"].get("restartCount", 0) == 0
    assert not h.has("TrainingJob", "train", "Failed")

    # Cleared, the GPU is healthy and the taint goes.
    inject(h, node, GpuFault(gpu=1, clear=True))
    h.settle(lambda: GPU_UNHEALTHY_TAINT not in (h.get("Node", node, None)["spec"].get("taints") or []))
    assert h.get("Node", node, None)["status"]["gpus"][1]["health"] == "Healthy"


def test_an_application_xid_leaves_the_gpu_healthy(two_nodes: Harness):
    h = two_nodes
    node = start(h, "train")
    inject(h, node, GpuFault(gpu=0, xid=13))
    n = h.get("Node", node, None)
    assert n["status"]["gpus"][0]["health"] == "Healthy"
    assert not n["spec"].get("taints")
    assert any(r == "NodeWarning" and "XID 13" in m for r, m in h.events(n))
    assert h.has("TrainingJob", "train", "Running")


def test_a_lost_gpu_has_no_readings_and_is_unhealthy(two_nodes: Harness):
    h = two_nodes
    inject(h, "node-a", GpuFault(gpu=0, lost=True))
    n = h.get("Node", "node-a", None)
    assert n["status"]["gpus"][0]["health"] == "Unhealthy"
    assert "GPU is lost" in n["status"]["gpus"][0]["healthReason"]
    assert n["status"]["allocatable"]["nvidia.com/gpu"] == "1"
    h.manager.gpus.sample(h.clock())
    reading = h.manager.gpus.latest()["GPU-node-a-0"]
    assert reading.utilization is None and reading.temperature_c is None


def test_fault_injection_names_what_exists(two_nodes: Harness):
    h = two_nodes
    with pytest.raises(KeyError, match="node-a"):
        inject(h, "node-z", GpuFault(gpu=0, xid=79))
    with pytest.raises(KeyError, match=r"GPUs: \[0, 1\]"):
        inject(h, "node-a", GpuFault(gpu=7, xid=79))


def test_a_node_that_stops_heartbeating_becomes_not_ready_and_its_pods_node_lost(two_nodes: Harness):
    h = two_nodes
    node = start(h, "train")
    other = ({"node-a", "node-b"} - {node}).pop()
    h.rt.lose_node(node)
    h.clock.advance(20)
    h.settle()
    ready = next(c for c in h.get("Node", node, None)["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"  # within the grace period
    h.clock.advance(30)
    h.settle(lambda: h.has("TrainingJob", "train", "Queued"))
    ready = next(c for c in h.get("Node", node, None)["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
    assert "stopped posting heartbeats" in ready["message"]
    assert "NodeLost" in [r for r, _ in h.events(h.get("Workload", "train"))]
    lost = [
        e
        for e in h.store.list("Event", "default").items
        if e["involvedObject"]["name"] == "train-worker-0" and e["reason"] == "NodeLost"
    ]
    assert lost and f"node {node} stopped answering" in lost[0]["message"]
    # The lost pod was failed NodeLost; the job runs again on the live node.
    h.settle(lambda: any(f.launch.node == other for f in h.rt.pods_by_uid.values()))
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    assert running_on(h, "train") == {other}
    assert h.job("train")["status"].get("restartCount", 0) == 0


def test_drain_evicts_with_its_grace_and_the_job_runs_elsewhere(two_nodes: Harness):
    h = two_nodes
    node = start(h, "train")
    other = ({"node-a", "node-b"} - {node}).pop()
    n = h.get("Node", node, None)
    n["spec"]["unschedulable"] = True
    n["metadata"].setdefault("annotations", {}).update(
        {DRAIN_ANNOTATION: "2025-01-01T00:00:00Z", DRAIN_GRACE_ANNOTATION: "5"}
    )
    h.store.update(n)
    h.rt.hold_stops = True
    h.settle(lambda: h.rt.stops)
    pod = h.pods()["train-worker-0"]
    assert pod["metadata"]["annotations"]["muster.dev/stop-reason"] == "Evicted"
    assert h.rt.find("default/train-worker-0").grace == 5.0
    h.rt.finish_stop("default/train-worker-0")
    h.settle(lambda: any(f.launch.node == other for f in h.rt.pods_by_uid.values()))
    j = h.job("train")
    assert any(r == "NodeDrained" for r, _ in h.events(j))
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    assert running_on(h, "train") == {other}


def test_a_job_moved_off_a_failed_gpu_says_so_while_it_waits(sqlite_store: Store, tmp_path):
    """docs/operations.md: the requeued job stays Queued with reason GPUUnhealthy until it is
    admitted again; the message adds what keeps it out now (issue 14, 14)."""
    h = Harness(sqlite_store, tmp_path / "home", nodes={"node-a": 2})
    try:
        start(h, "train")
        inject(h, "node-a", GpuFault(gpu=1, xid=79))
        h.settle(lambda: (h.get("Workload", "train") or {}).get("status", {}).get("pending"))
        h.settle()
        queued = h.condition("TrainingJob", "train", "Queued")
        assert queued is not None and queued["status"] == "True"
        assert queued["reason"] == "GPUUnhealthy"
        assert queued["message"].startswith("GPU 1 of node node-a is unhealthy")
        assert "; now waiting for admission: ExceedsMaxQuota: " in queued["message"]
        # Repaired, it runs again; the next wait (none here) would carry its own reason.
        inject(h, "node-a", GpuFault(gpu=1, clear=True))
        h.settle(
            lambda: h.rt.pods_by_uid and any(f.phase.value == "Pending" for f in h.rt.pods_by_uid.values())
        )
        h.rt.run_all()
        h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    finally:
        h.close()
