"""Gangs on a runtime that starts them as one unit (SupportsGangStart): the executor starts a
Workload's pods together, once all exist; a gang the runtime could not place and a node lost
with its pods evict and requeue the Workload without counting against the job's backoffLimit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from muster.controllers.manager import Manager, ManagerConfig
from muster.store import Store
from muster.testing import cluster
from muster.testing.fake_gang_runtime import GangFakeRuntime
from tests.controllers.conftest import Harness, job
from tests.controllers.test_executor import create
from tests.controllers.workflows import Flow, task, workflow
from tests.controllers.workflows import pod as wf_pod

NODES = ("node-0", "node-1")


class GangHarness(Harness):
    """The manager on a gang-starting runtime of two nodes with four GPUs each."""

    rt: GangFakeRuntime

    def __init__(self, store: Store, home: Path) -> None:
        super().__init__(store, home)
        self.manager.stop()
        self.rt = GangFakeRuntime(nodes=NODES, gpus=4)
        self.manager = Manager(
            store,
            ManagerConfig(home=home, resync_seconds=0, heartbeat_seconds=3600, clock=self.clock),
            runtime=self.rt,
        )
        self.manager.open()


@pytest.fixture
def gh(sqlite_store: Store, tmp_path: Path) -> Iterator[GangHarness]:
    h = GangHarness(sqlite_store, tmp_path / "home")
    yield h
    h.close()


def test_the_gang_starts_once_with_every_pod_the_admission_placed(gh: GangHarness):
    h = gh
    create(h.store, cluster.admitted(cluster.workload("w", pods=2), "default", "node-1", [[0], [1]]))
    create(h.store, cluster.pod("w-0", job="w", node="node-1", gpus=[0], phase="Pending"))
    h.settle()
    assert not h.rt.started  # one of two: nothing starts alone
    assert not (h.pods()["w-0"].get("status") or {}).get("handle")
    create(
        h.store, cluster.pod("w-1", job="w", replica=("Worker", 1), node="node-1", gpus=[1], phase="Pending")
    )
    h.settle(lambda: h.rt.gangs)
    h.settle()
    (gang,) = h.rt.gangs
    assert (gang.namespace, gang.workload) == ("default", "w")
    assert gang.uid == h.get("Workload", "w")["metadata"]["uid"]
    assert gang.timeout_seconds == 60.0
    assert [(m.pod.ref.name, m.node, m.devices.gpus) for m in gang.members] == [
        ("w-0", "node-1", (0,)),
        ("w-1", "node-1", (1,)),
    ]
    assert not h.rt.singles
    # The start was written before the runtime acted; members are Pending until placed.
    for name in ("w-0", "w-1"):
        assert h.pods()[name]["status"]["handle"] == {"runtime": "local", "node": "node-1"}
        assert h.pods()[name]["status"]["phase"] == "Pending"
    h.rt.place("w")
    h.settle(lambda: all(p["status"]["phase"] == "Running" for p in h.pods().values()))


def test_a_job_runs_as_one_gang(gh: GangHarness):
    h = gh
    h.apply(job("train", workers=2, master=True, gpus=2))
    h.settle(lambda: h.rt.gangs)
    gang = h.rt.gang("train")
    assert sorted(m.pod.ref.name for m in gang.members) == [
        "train-master-0",
        "train-worker-0",
        "train-worker-1",
    ]
    wl = h.get("Workload", "train")
    placed = {
        (a["name"], i): p["node"]
        for a in wl["status"]["admission"]["podSetAssignments"]
        for i, p in enumerate(a["pods"])
    }
    assert {m.pod.ref.name: m.node for m in gang.members} == {
        f"train-{kind}-{i}": node for (kind, i), node in placed.items()
    }
    assert all(m.pod.node == m.node for m in gang.members)
    h.settle()
    assert h.has("TrainingJob", "train", "Queued")  # admitted, not yet placed by the runtime
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))


def test_pods_reach_the_master_at_its_nodes_address(gh: GangHarness):
    h = gh
    h.apply(job("train", workers=1, master=True, gpus=4))
    h.settle(lambda: h.rt.gangs)
    members = {m.pod.ref.name: m for m in h.rt.gang("train").members}
    master_node = members["train-master-0"].node
    assert {m.node for m in members.values()} == set(NODES)  # 4 GPUs each: one pod per node
    address = f"10.0.0.{NODES.index(master_node) + 1}"
    for member in members.values():
        assert member.pod.containers[0].env["MASTER_ADDR"] == address
    node = h.get("Node", master_node, None)
    assert {"type": "InternalIP", "address": address} in node["status"]["addresses"]
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    assert h.pods()["train-master-0"]["status"]["hostIP"] == address


def test_a_gang_that_cannot_be_placed_is_requeued_without_counting(gh: GangHarness):
    h = gh
    h.apply(job("train", workers=2, gpus=2, run_policy={"backoffLimit": 0}))
    h.settle(lambda: h.rt.gangs)
    first = {m.pod.ref.uid for m in h.rt.gang("train").members}
    h.rt.fail_gang("train", "no room for bundle 1 ({GPU: 2}) on node-1 within 60s")
    # The failed pods are deleted, the Workload requeued with the runtime's reason; it waits
    # out a backoff before it is admitted again, and the job says why it waits.
    h.settle(lambda: h.has("Workload", "train", "Requeued", "GangStartFailed"))
    h.settle()
    assert not first & {p["metadata"]["uid"] for p in h.pods().values()}
    wl = h.get("Workload", "train")
    assert wl["status"]["requeueState"]["count"] == 1
    assert not wl["status"].get("admission")
    evicted = h.condition("Workload", "train", "Evicted")
    assert evicted["reason"] == "GangStartFailed"
    assert "no room for bundle 1" in evicted["message"] and "admitted again after 10s" in evicted["message"]
    queued = h.condition("TrainingJob", "train", "Queued")
    assert (queued["status"], queued["reason"]) == ("True", "GangStartFailed")
    assert "no room for bundle 1" in queued["message"]
    assert len(h.rt.gangs) == 1
    # After the backoff: admitted again and started as a new gang of new pods.
    h.clock.advance(10)
    h.settle(lambda: len(h.rt.gangs) == 2)
    assert not first & {m.pod.ref.uid for m in h.rt.gang("train").members}
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    j = h.job("train")
    assert j["status"].get("restartCount", 0) == 0
    assert not h.has("TrainingJob", "train", "Failed")
    assert not j["status"].get("preemptions")
    assert "GangStartFailed" in [r for r, _ in h.events(j)]
    assert "GangStartFailed" in [r for r, _ in h.events(wl)]
    # A second failure waits twice as long.
    h.rt.fail_gang("train")
    h.settle(lambda: h.has("Workload", "train", "Requeued", "GangStartFailed") and h.rt.gangs)
    h.settle()
    assert "admitted again after 20s" in h.condition("Workload", "train", "Evicted")["message"]


def test_a_gang_member_that_cannot_launch_fails_the_gang(gh: GangHarness):
    h = gh
    body = job("train", workers=2, gpus=1)
    body["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["initContainers"] = [
        {"name": "prep", "command": ["true"]}
    ]
    h.apply(body)
    h.settle(lambda: h.has("TrainingJob", "train", "Failed"))
    assert not h.rt.gangs
    failed = h.condition("TrainingJob", "train", "Failed")
    assert failed["reason"] == "ReplicaFailed" and "it could not start" in failed["message"]
    assert "spec.initContainers" in failed["message"]


def test_a_node_lost_with_its_pods_requeues_the_job_onto_another_node(gh: GangHarness):
    h = gh
    h.apply(job("train", workers=1, gpus=4, run_policy={"backoffLimit": 0}))
    h.settle(lambda: h.rt.gangs)
    (member,) = h.rt.gang("train").members
    lost, other = member.node, ({*NODES} - {member.node}).pop()
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    h.rt.kill_node(lost, "Ray reports the node dead")
    # The node is NotReady at once; the job is requeued (not failed, not restarted) and its
    # new gang placed on the other node, in one pass.
    h.settle(lambda: len(h.rt.gangs) == 2)
    ready = next(c for c in h.get("Node", lost, None)["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NodeLost")
    wl = h.get("Workload", "train")
    assert wl["status"]["requeueState"]["count"] == 1
    evictions = [m for r, m in h.events(wl) if r == "NodeLost"]
    assert evictions and "Ray reports the node dead" in evictions[0]
    assert "train-worker-0" not in {n for n, p in h.pods().items() if p["spec"]["nodeName"] == lost}
    # ... and its new gang is placed on the other node.
    (again,) = h.rt.gang("train").members
    assert again.node == other
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    j = h.job("train")
    assert j["status"].get("restartCount", 0) == 0
    assert "NodeLost" in [r for r, _ in h.events(j)]


def test_a_process_lost_on_a_live_node_is_the_jobs_failure(gh: GangHarness):
    h = gh
    h.apply(job("train", workers=1, gpus=1, run_policy={"backoffLimit": 0}))
    h.settle(lambda: h.rt.gangs)
    h.rt.place("train")
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    from muster.runtime.base import PodReason

    h.rt.exit("default/train-worker-0", 137, reason=PodReason.NODE_LOST, message="its shim died")
    h.settle(lambda: h.has("TrainingJob", "train", "Failed"))
    assert h.condition("TrainingJob", "train", "Failed")["reason"] == "BackoffLimitExceeded"
    assert not (h.get("Workload", "train")["status"].get("requeueState") or {}).get("count")


def test_a_pod_no_workload_owns_starts_alone(gh: GangHarness):
    h = gh
    create(h.store, cluster.pod("solo", node="node-0", gpus=[2], phase="Pending"))
    h.settle(lambda: h.rt.started)
    assert h.rt.singles == ["default/solo"] and not h.rt.gangs


def test_a_workflow_task_waits_out_a_failed_gang_start(gh: GangHarness):
    h = gh
    h.apply(workflow("wf", task("a", template=wf_pod("true", gpus=1))))
    h.settle(lambda: h.rt.gangs)
    (member,) = h.rt.gangs[0].members
    h.rt.fail_gang(h.rt.gangs[0].workload, "no room on the node")
    h.settle(lambda: h.has("Workload", member.pod.ref.name, "Requeued", "GangStartFailed"))
    node = Flow(h, "wf").node("a")
    assert node["phase"] in ("Pending", "Running") and node["attempts"] == 1
    h.clock.advance(10)
    h.settle(lambda: len(h.rt.gangs) == 2)
    h.rt.place(h.rt.gangs[1].workload)
    h.rt.exit(str(h.rt.gangs[1].members[0].pod.ref), 0)
    h.settle(lambda: Flow(h, "wf").phase() == "Succeeded")
    assert Flow(h, "wf").node("a")["attempts"] == 1  # the failed start was no attempt of the task
