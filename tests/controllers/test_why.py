"""`why` names the right blocker, with the cluster driven through the real scheduler loop:
quota, fragmentation, a taint, the GPU model, strict FIFO, a gang too large, a preemption
under way, a stopped queue; and for a preempted job, whether it resumed from a checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from muster.api.conditions import is_true
from muster.controllers.insight.explain import Explanation, explain
from muster.controllers.insight.explain.gather import gather
from muster.runtime.base import GpuFault
from muster.server.views import StoreSource
from muster.store import Store
from muster.testing.cluster import cluster_queue
from muster.testing.factories import local_queue
from tests.controllers.conftest import Harness, job

Obj = dict[str, Any]
HIGH = {"apiVersion": "muster.dev/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}


def why(h: Harness, name: str) -> Explanation:
    obj = h.job(name)
    return explain(obj, gather(StoreSource(h.store), obj, now=h.clock()))


def queue(name: str, gpus: str, strategy: str = "BestEffortFIFO", **spec: Any) -> list[Obj]:
    cq = cluster_queue(
        name, {"default": {"cpu": "1000", "memory": "10Ti", "nvidia.com/gpu": gpus}}, strategy=strategy
    )
    cq["spec"].update(spec)
    return [cq, local_queue(name, name)]


def started(h: Harness, pod: str) -> bool:
    return any(f.launch.ref.name == pod for f in h.rt.pods_by_uid.values())


def running(h: Harness, name: str, **kwargs: Any) -> None:
    h.apply(job(name, **kwargs))
    h.settle(lambda: started(h, f"{name}-worker-0"))
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", name, "Running"))


def waiting(h: Harness, name: str, reason: str, **kwargs: Any) -> Explanation:
    h.apply(job(name, **kwargs))
    h.settle(
        lambda: (h.get("Workload", name) or {}).get("status", {}).get("pending", {}).get("reason") == reason
    )
    return why(h, name)


@pytest.fixture
def make(sqlite_store: Store, tmp_path: Path):
    made: list[Harness] = []

    def build(**kwargs: Any) -> Harness:
        h = Harness(sqlite_store, tmp_path / "home", **kwargs)
        made.append(h)
        return h

    yield build
    for h in made:
        h.close()


def test_quota(make):
    h = make(gpus=8)
    h.apply(*queue("team", "2"))
    running(h, "first", workers=1, gpus=2, queueName="team")
    ex = waiting(h, "second", "QuotaExhausted", workers=1, gpus=2, queueName="team")
    assert ex.blocker == "needs 2 more nvidia.com/gpu of quota in ClusterQueue team"
    assert ex.summary.endswith(": QuotaExhausted: needs 2 more nvidia.com/gpu of quota in ClusterQueue team")
    assert ex.fits_when is not None and ex.fits_when.finishing == ["default/first"]
    assert ex.unblock[0] == "fits when default/first finishes"


def test_fragmentation(make):
    h = make(nodes={"n1": 4, "n2": 4, "n3": 4})
    for name, gpus in (("a", 3), ("b", 3), ("c", 2)):
        running(h, name, workers=1, gpus=gpus)
    ex = waiting(h, "big", "InsufficientResources", workers=1, gpus=4)
    frag = ex.fragmentation
    assert frag is not None and (frag.free_gpus, frag.nodes_with_free, frag.largest_block) == (4, 3, 2)
    assert frag.fragmented
    block_node = frag.largest_block_node
    assert ex.blocker == (
        f"no node has 4 free GPUs; the largest free block is 2 on {block_node} "
        "(4 free GPUs spread over 3 nodes)"
    )
    by_node = {v.node: v for v in ex.nodes}
    assert by_node[block_node].reason == "FreeGPUs"
    assert by_node[block_node].message == "2 of 4 GPUs free, a pod needs 4; held by default/c"
    assert ex.fits_when is not None and len(ex.fits_when.finishing) == 1


def test_taint(make):
    h = make(gpus=4)
    future = h.manager.request_fault("node-0", GpuFault(gpu=0, xid=79))
    h.settle(future.done)
    ex = waiting(h, "train", "InsufficientResources", workers=1, gpus=1)
    assert ex.blocker == (
        "every node has a taint its pods do not tolerate: nvidia.com/gpu=unhealthy:NoSchedule"
    )
    assert [(v.node, v.reason) for v in ex.nodes] == [("node-0", "Taint")]


def test_gpu_model(make):
    h = make(nodes={"n1": 4, "n2": 4}, models={"n1": "H100", "n2": "L4"})
    spec = job("train", workers=1, gpus=1)
    spec["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.product": "A100"
    }
    h.apply(spec)
    h.settle(lambda: (h.get("Workload", "train") or {}).get("status", {}).get("pending"))
    ex = why(h, "train")
    assert ex.reason == "InsufficientResources"
    assert ex.blocker == "no node has A100 GPUs, which its pods ask for (the nodes have H100, L4)"
    assert {v.message for v in ex.nodes} == {
        "GPU model H100, the pods want A100",
        "GPU model L4, the pods want A100",
    }


def test_strict_fifo(make):
    h = make(gpus=8)
    h.apply(*queue("strict", "4", strategy="StrictFIFO"))
    running(h, "resident", workers=1, gpus=2, queueName="strict")
    h.apply(job("head", workers=1, gpus=4, queueName="strict"))
    h.settle(lambda: (h.get("Workload", "head") or {}).get("status", {}).get("pending"))
    ex = waiting(h, "small", "StrictFIFOBlocked", workers=1, gpus=1, queueName="strict")
    assert ex.blocker == "ClusterQueue strict is StrictFIFO and default/head is ahead of it"
    assert ex.queue is not None and ex.queue.position == 2


def test_gang_too_large(make):
    h = make(nodes={"n1": 4, "n2": 4})
    h.apply(*queue("roomy", "32"))
    ex = waiting(h, "huge", "InsufficientResources", workers=3, gpus=4, queueName="roomy")
    assert ex.fits_when is not None and ex.fits_when.never
    assert ex.blocker.startswith("the gang can never fit, not even with every running workload gone")
    assert "it asks for 12 GPUs in all" in ex.blocker and "8 usable GPUs" in ex.blocker


def test_preemption_pending(make):
    h = make(gpus=4, hold_stops=True)
    h.apply(HIGH)
    running(h, "low", workers=1, gpus=4)
    ex = waiting(h, "urgent", "WaitingForPreemption", workers=1, gpus=4, priorityClassName="high")
    assert ex.blocker == "preempting low; admitted once their pods have stopped"
    h.settle()
    low = why(h, "low")
    assert low.state in ("Preempted", "Evicting")
    assert low.preemptions[0].preemptor == "default/urgent"


def test_queue_stopped(make):
    h = make(gpus=4)
    h.apply(*queue("paused", "4", stopPolicy="Hold"))
    ex = waiting(h, "train", "QueueStopped", workers=1, gpus=1, queueName="paused")
    assert "paused" in ex.blocker and "stop" in ex.blocker.lower()
    assert ex.unblock[0] == "set spec.stopPolicy to None on ClusterQueue paused and on its LocalQueue"


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_preempted_job_says_whether_it_resumed_from_a_checkpoint(make, checkpointed: bool):
    h = make(gpus=4)
    h.apply(HIGH)
    running(h, "low", workers=1, gpus=4)
    ckpt = h.home / "checkpoints" / "default" / "low"
    if checkpointed:
        (ckpt / "ckpt-00000100.pt").write_text("weights")
        (ckpt / ".ckpt-00000200.pt.99.tmp").write_text("half written")
    h.apply(job("urgent", workers=1, gpus=4, priorityClassName="high"))
    h.settle(lambda: started(h, "urgent-worker-0"))
    assert why(h, "low").preemptions[0].resumed_at is None
    h.rt.run_all()
    h.rt.exit("default/urgent-worker-0", 0)
    h.settle(
        lambda: any(
            f.launch.ref.name == "low-worker-0"
            for f in h.rt.pods_by_uid.values()
            if f.phase.value == "Pending"
        )
    )
    record = h.job("low")["status"]["preemptions"][0]
    ex = why(h, "low")
    (pre,) = ex.preemptions
    assert pre.preemptor == "default/urgent" and pre.resumed_at == record["resumedAt"]
    reasons = [r for r, _ in h.events(h.job("low"))]
    if checkpointed:
        assert (pre.checkpoint_found, pre.checkpoint) == (True, "ckpt-00000100.pt")
        assert "ResumedFromCheckpoint" in reasons
    else:
        assert (pre.checkpoint_found, pre.checkpoint) == (False, None)
        assert "NoCheckpoint" in reasons


# -- the root cause behind the blocker (issue 15) ----------------------------------------------


def cohort_queue(name: str, gpus: str | tuple[str, str | None, str | None]) -> list[Obj]:
    cq = cluster_queue(
        name, {"default": {"cpu": "1000", "memory": "10Ti", "nvidia.com/gpu": gpus}}, cohort="research"
    )
    return [cq, local_queue(name, name)]


def first_cause(ex: Explanation) -> str:
    """What the summary names first, after where it waits."""
    return ex.summary.split("): ", 1)[1]


def admitted_after(h: Harness, name: str) -> bool:
    h.settle(lambda: (h.get("Workload", name) or {}).get("status", {}).get("admission"))
    return True


def test_root_cause_an_unhealthy_gpu_of_a_one_node_cluster(make):
    """The default queue's quota follows the healthy GPUs: the sick GPU is the cause, the quota of
    0 its consequence."""
    h = make(nodes={"node-0": 1})
    future = h.manager.request_fault("node-0", GpuFault(gpu=0, xid=79))
    h.settle(future.done)
    ex = waiting(h, "train", "ExceedsMaxQuota", workers=1, gpus=1)
    assert ex.blocker == (
        "asks for 1 nvidia.com/gpu, more than ClusterQueue default can ever have "
        "(0 with what its cohort may lend)"
    )
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("GPUUnhealthy", "node/node-0")
    since = next(
        c for c in h.get("Node", "node-0", None)["status"]["conditions"] if c["type"] == "GPUHealthy"
    )
    assert cause.since == since["lastTransitionTime"]
    assert cause.numbers == {"node": "node-0", "gpus": [0], "healthyGpus": 0, "totalGpus": 1, "xid": [79]}
    assert first_cause(ex).startswith(
        f"GPU 0 of node node-0 is unhealthy since {cause.since} (XID 79 (GPU has fallen off the bus)); "
        "ClusterQueue default's quota follows the nodes' healthy GPUs (0 of 1); "
        "so ExceedsMaxQuota: asks for 1"
    )
    assert ex.unblock[0] == (
        "repair or replace GPU 0 of node node-0: drain the node (muster node drain node-0), reset the GPU "
        "(nvidia-smi -r) or reboot the machine, then restart muster up there"
    )
    assert not any("at most 0" in hint for hint in ex.unblock)
    out = ex.to_dict()
    assert out["blocker"] == ex.blocker and out["rootCause"]["kind"] == "GPUUnhealthy"
    # The action is the cure: repaired, the GPU is quota again and the job is admitted.
    future = h.manager.request_fault("node-0", GpuFault(gpu=0, clear=True))
    h.settle(future.done)
    assert admitted_after(h, "train")


def test_root_cause_a_borrowing_limit_with_idle_capacity_in_the_cohort(make):
    h = make(nodes={"node-0": 4})
    h.apply(*cohort_queue("team-a", ("1", "0", None)), *cohort_queue("team-b", "3"))
    ex = waiting(h, "train", "ExceedsMaxQuota", workers=2, gpus=1, queueName="team-a")
    assert ex.blocker.endswith(
        "more than ClusterQueue team-a can ever have (1 with what its cohort may lend)"
    )
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("BorrowingLimit", "clusterqueue/team-a")
    assert first_cause(ex).startswith(
        "ClusterQueue team-a's borrowingLimit of 0 nvidia.com/gpu (flavor default) forbids borrowing the 3 "
        "idle in cohort research: it has nominal 1 and the job asks for 2; so ExceedsMaxQuota"
    )
    assert (cause.numbers["borrowingLimit"], cause.numbers["idleInCohort"], cause.numbers["needed"]) == (
        "0",
        "3",
        "1",
    )
    assert ex.unblock[0] == (
        "raise borrowingLimit of nvidia.com/gpu in flavor default of ClusterQueue team-a "
        "from 0 to at least 1 (or remove it)"
    )
    h.apply(*cohort_queue("team-a", ("1", "1", None)))  # as the action says
    assert admitted_after(h, "train")


def test_root_cause_a_lending_limit_of_another_queue(make):
    h = make(nodes={"node-0": 4})
    h.apply(*cohort_queue("team-a", "1"), *cohort_queue("team-b", ("3", None, "1")))
    ex = waiting(h, "train", "ExceedsMaxQuota", workers=4, gpus=1, queueName="team-a")
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("LendingLimit", "clusterqueue/team-b")
    assert first_cause(ex).startswith(
        "ClusterQueue team-b lends at most 1 of its 3 nvidia.com/gpu (flavor default, lendingLimit) "
        "to cohort research and keeps the 2 it leaves idle for itself; so ExceedsMaxQuota"
    )
    assert ex.unblock[0] == (
        "raise lendingLimit of nvidia.com/gpu in flavor default of ClusterQueue team-b from 1 to at least 3 "
        "(or remove it)"
    )
    h.apply(*cohort_queue("team-b", ("3", None, "3")))
    assert admitted_after(h, "train")


def test_root_cause_a_cordoned_node_not_the_size_of_the_gang(make):
    h = make(nodes={"n1": 4, "n2": 4})
    node = h.get("Node", "n2", None)
    node["spec"]["unschedulable"] = True
    h.store.update(node)
    ex = waiting(h, "train", "InsufficientResources", workers=2, gpus=4)
    assert ex.fits_when is not None and ex.fits_when.never
    assert "(4 usable GPUs)" in ex.blocker  # the cordoned node's GPUs take no pods
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("NodeCordoned", "node/n2")
    assert first_cause(ex).startswith(
        "node n2 is cordoned (spec.unschedulable): its 4 GPU(s) take no new pods; so InsufficientResources: "
        "the gang can never fit"
    )
    assert ex.unblock[0] == "muster node uncordon n2 once it is fit to take pods"
    node = h.get("Node", "n2", None)
    node["spec"]["unschedulable"] = False
    h.store.update(node)
    assert admitted_after(h, "train")


def test_no_node_with_gpus_is_the_cause_not_the_request(make):
    h = make(gpus=0)
    ex = waiting(h, "train", "ExceedsMaxQuota", workers=1, gpus=1)
    cause = ex.root_cause
    assert cause is not None and cause.kind == "NoGPUs"
    assert first_cause(ex).startswith("no node has GPUs (node ")
    assert ex.unblock[0].endswith("declare fake GPUs to try Muster without: muster up --fake-gpus 4")
    assert not any("at most 0" in hint for hint in ex.unblock)


def test_a_quota_wait_with_a_healthy_cluster_has_no_root_cause(make):
    h = make(gpus=8)
    h.apply(*queue("team", "2"))
    running(h, "first", workers=1, gpus=2, queueName="team")
    ex = waiting(h, "second", "QuotaExhausted", workers=1, gpus=2, queueName="team")
    assert ex.root_cause is None and ex.to_dict()["rootCause"] is None


def test_the_gang_counts_every_pod_set(make):
    """A master and a worker of one GPU each are a gang of two pods, not of one (issue 14, 7)."""
    h = make(nodes={"node-0": 2})
    running(h, "first", workers=1, gpus=1)
    ex = waiting(h, "second", "QuotaExhausted", workers=1, master=True, gpus=1)
    frag = ex.fragmentation
    assert frag is not None and (frag.pods, frag.room, frag.free_gpus) == (2, 1, 1)
    assert frag.message == (
        "the free GPUs take 1 of its 2 pods of 1 "
        "(1 free GPUs spread over 1 node; the largest free block is 1 on node-0)"
    )


def test_root_cause_a_node_that_stopped_answering(make):
    h = make(nodes={"n1": 2, "n2": 2}, node_grace_seconds=40)
    h.rt.lose_node("n2")
    h.clock.advance(60)
    h.settle(lambda: not is_true(h.get("Node", "n2", None), "Ready"))
    ex = waiting(h, "train", "InsufficientResources", workers=2, gpus=2)
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("NodeNotReady", "node/n2")
    assert first_cause(ex).startswith("node n2 is not ready since ")
    assert ex.unblock[0] == (
        "bring node n2 back: check the machine and the muster runtime on it (muster up there); "
        "a node gone for good: muster delete node n2"
    )


def test_root_cause_a_borrowing_limit_of_a_parent_cohort(make):
    """Cohort research (team-a's) may borrow nothing from org, where team-x leaves 3 GPUs idle."""
    h = make(nodes={"node-0": 4})
    research = {
        "apiVersion": "muster.dev/v1",
        "kind": "Cohort",
        "metadata": {"name": "research"},
        "spec": {
            "parentName": "org",
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "0"}
                            ],
                        }
                    ],
                }
            ],
        },
    }
    other = cluster_queue(
        "team-x", {"default": {"cpu": "1000", "memory": "10Ti", "nvidia.com/gpu": "3"}}, cohort="org"
    )
    h.apply(research, *cohort_queue("team-a", "1"), other, local_queue("team-x", "team-x"))
    ex = waiting(h, "train", "ExceedsMaxQuota", workers=2, gpus=1, queueName="team-a")
    cause = ex.root_cause
    assert cause is not None and (cause.kind, cause.object) == ("BorrowingLimit", "cohort/research")
    assert first_cause(ex).startswith(
        "Cohort research's borrowingLimit of 0 nvidia.com/gpu (flavor default) forbids borrowing the 3 idle "
        "in cohort org"
    )
    assert ex.unblock[0] == (
        "raise borrowingLimit of nvidia.com/gpu in flavor default of Cohort research from 0 to at least 1 "
        "(or remove it)"
    )
