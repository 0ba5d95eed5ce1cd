"""The capacity controller end to end on a puppet runtime: scale from zero, idle removal."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api.lifecycle import job_phase
from muster.controllers.insight.doctor import diagnose
from muster.controllers.insight.explain import Explanation, explain
from muster.controllers.insight.explain.gather import gather
from muster.controllers.insight.findings import Inputs, Thresholds
from muster.controllers.manager import Manager
from muster.providers.base import ProviderError
from muster.providers.local import LocalProvider
from muster.runtime.base import VirtualNodeSpec
from muster.server.views import StoreSource
from tests.controllers.capacity.conftest import CapacityHarness, pool
from tests.controllers.conftest import Harness, job


def test_a_gang_that_fits_nowhere_gets_a_node_after_the_delay_and_the_idle_node_goes(cap: CapacityHarness):
    cap.apply(pool(), job("train", workers=2, gpus=2))
    cap.settle()
    wl = cap.get("Workload", "train")
    assert wl["status"]["pending"]["reason"] == "InsufficientResources"
    claims = cap.claims()
    assert len(claims) == 1, "one 4-GPU node holds both 2-GPU workers"
    assert claims[0]["status"]["phase"] == "Launched"
    assert claims[0]["status"]["workloads"] == ["default/train"]
    cap.clock.advance(30)
    cap.settle()
    assert cap.phases() == ["Ready"]
    node = claims[0]["metadata"]["name"]
    assert cap.get("Node", node, None) is not None
    cap.rt.run_all()
    cap.settle()
    assert str(job_phase(cap.job("train"))) == "Running"
    for pod in ("train-worker-0", "train-worker-1"):
        cap.rt.exit(f"default/{pod}", 0)
    cap.settle()
    assert str(job_phase(cap.job("train"))) == "Succeeded"
    cap.clock.advance(61)
    cap.settle()
    assert cap.phases() == ["Terminated"]
    assert cap.get("Node", node, None) is None


SPOT = [{"key": "muster.dev/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]


def spot_job(name: str, workers: int = 1, gpus: int = 4, checkpointable: bool = True) -> dict:
    doc = job(name, workers=workers, gpus=gpus)
    for replica in doc["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["tolerations"] = SPOT
        if checkpointable:
            replica["template"]["metadata"] = {"annotations": {"muster.dev/checkpointable": "true"}}
    return doc


def test_spot_is_chosen_for_work_that_tolerates_it_and_on_demand_for_the_rest(cap: CapacityHarness):
    cap.apply(
        pool("od", pricePerHour=32.0),
        pool("spot", capacityType="spot", pricePerHour=10.0),
        spot_job("tolerant"),
        job("strict", workers=1, gpus=4),
    )
    cap.settle()
    pools = {c["spec"]["nodePool"]: c["status"]["workloads"] for c in cap.claims()}
    assert pools == {"spot": ["default/tolerant"], "od": ["default/strict"]}
    spot = next(c for c in cap.claims() if c["spec"]["nodePool"] == "spot")
    assert spot["spec"]["capacityType"] == "spot"
    cap.clock.advance(30)
    cap.settle()
    node = cap.get("Node", spot["metadata"]["name"], None)
    assert {"key": "muster.dev/capacity-type", "value": "spot", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    assert cap.pods()["tolerant-worker-0"]["spec"]["nodeName"] == node["metadata"]["name"]


def test_a_spot_notice_drains_requeues_ahead_of_newer_work_and_counts_lost_gpu_seconds(cap: CapacityHarness):
    cap.apply(pool("spot", capacityType="spot", pricePerHour=10.0, maxNodes=2), spot_job("first"))
    cap.settle()
    cap.clock.advance(30)
    cap.settle()
    cap.rt.run_all()
    cap.settle()
    assert str(job_phase(cap.job("first"))) == "Running"
    interrupted = cap.claims()[0]
    node = interrupted["status"]["nodeName"]
    cap.clock.advance(600)  # ten minutes of work, no checkpoint written
    cap.apply(spot_job("second"))  # newer work of the same priority
    cap.settle()
    for_second = next(c for c in cap.claims() if c["status"].get("workloads") == ["default/second"])
    future = cap.manager.request_interruption(node, cap.clock.now + 120)
    cap.settle(until=lambda: future.done())
    stored = future.result()
    assert stored["status"]["phase"] == "Draining"
    assert stored["status"]["interruption"]["terminationTime"]
    cap.settle()
    assert ("default/first-worker-0", "Evicted") in cap.rt.stops, "SIGTERM at once: the checkpoint handshake"
    assert cap.has("Workload", "first", "Requeued", "SpotInterrupted")
    assert "SpotInterrupted" in [r for r, _ in cap.events(cap.job("first"))]
    assert cap.job("first")["status"]["preemptions"][-1]["reason"] == "SpotInterrupted"
    # Its pods are gone, so the machine is given back before the deadline.
    old = next(c for c in cap.claims() if c["metadata"]["name"] == interrupted["metadata"]["name"])
    assert old["status"]["phase"] == "Terminated"
    assert old["status"]["interruption"]["lostGpuSeconds"] == 4 * 600
    records = [r for r in cap.store.list("UsageRecord").items if r["spec"]["name"] == "first-worker-0"]
    assert records[0]["spec"]["interrupted"] is True
    assert records[0]["spec"]["lostGpuSeconds"] == 4 * 600
    # "first" kept its place in the queue (creation time, not eviction time): the node asked
    # for "second" is now planned for it, and "second" waits for a new one.
    now = {c["metadata"]["name"]: c["status"].get("workloads") for c in cap.claims()}
    assert now[for_second["metadata"]["name"]] == ["default/first"]
    assert ["default/second"] in now.values()
    cap.clock.advance(30)
    cap.settle()
    placed = cap.get("Workload", "first")["status"]["admission"]["podSetAssignments"][0]["pods"][0]["node"]
    assert placed == for_second["metadata"]["name"]


def _why(cap: CapacityHarness, name: str) -> Explanation:
    obj = cap.job(name)
    return explain(obj, gather(StoreSource(cap.store), obj, now=cap.clock()))


def test_why_names_the_node_coming_up_and_its_eta(cap: CapacityHarness):
    cap.apply(pool(), job("train", workers=1, gpus=4))
    cap.settle()
    claim = cap.claims()[0]["metadata"]["name"]
    cap.clock.advance(10)
    ex = _why(cap, "train")
    assert ex.summary == f"trainingjob/train is waiting for node {claim} of pool gpu (ETA 20s)"
    assert ex.capacity is not None and ex.capacity.nodes[0].phase == "Launched"
    assert ex.to_dict()["capacity"]["nodes"][0]["claim"] == claim
    wl = cap.get("Workload", "train")
    assert ("TriggeredScaleUp", f"waiting for node {claim} of pool gpu (ETA 30s)") in cap.events(wl)


def test_a_failing_provider_keeps_the_work_pending_with_its_error_and_retries_with_backoff(
    cap: CapacityHarness, monkeypatch: pytest.MonkeyPatch
):
    calls: list[str] = []
    real = LocalProvider.create

    def flaky(self: LocalProvider, request: Any) -> Any:
        calls.append(request.claim)
        if len(calls) <= 2:
            raise ProviderError("quota exceeded for A100 in zone-a")
        return real(self, request)

    monkeypatch.setattr(LocalProvider, "create", flaky)
    cap.apply(pool(), job("train", workers=1, gpus=4))
    cap.settle()
    [claim] = cap.claims()
    assert claim["status"]["phase"] == "Pending"
    assert claim["status"]["attempts"] == 1
    assert "quota exceeded for A100 in zone-a" in claim["status"]["lastError"]
    ex = _why(cap, "train")
    assert "the local provider failed: quota exceeded for A100 in zone-a; asking again in 10s" in ex.summary
    assert cap.rt.virtual == {}, "a failed call leaves no half-made node"
    assert [n["metadata"]["name"] for n in cap.store.list("Node").items] == ["cpu-0"]
    cap.clock.advance(10)
    cap.settle()
    assert cap.claims()[0]["status"]["attempts"] == 2
    assert cap.claims()[0]["status"]["nextAttemptAt"] > claim["status"]["nextAttemptAt"]
    cap.clock.advance(19)
    cap.settle()
    assert len(calls) == 2, "the second failure doubled the backoff to 20 s"
    cap.clock.advance(1)
    cap.settle()
    assert len(calls) == 3 and cap.phases() == ["Launched"]
    cap.clock.advance(30)
    cap.settle()
    assert cap.phases() == ["Ready"] and cap.get("Workload", "train")["status"].get("admission")
    assert len(cap.claims()) == 1


def _restart(cap: CapacityHarness) -> None:
    cap.manager.stop()
    config = cap.manager.config
    cap.manager = Manager(cap.store, config, runtime=cap.rt)
    cap.manager.open()


@pytest.mark.parametrize("crash", ["before the provider call", "after the provider call"])
def test_a_restart_during_provisioning_neither_loses_nor_duplicates_a_node(
    cap: CapacityHarness, monkeypatch: pytest.MonkeyPatch, crash: str
):
    real = LocalProvider.create

    def crashing(self: LocalProvider, request: Any) -> Any:
        if crash == "after the provider call":
            real(self, request)
        raise SystemExit("the server died")

    monkeypatch.setattr(LocalProvider, "create", crashing)
    cap.apply(pool(), job("train", workers=1, gpus=4))
    with pytest.raises(SystemExit):
        cap.settle()
    assert cap.phases() == ["Pending"], "the intent is in the store before the provider is called"
    assert len(cap.rt.virtual) == (1 if crash == "after the provider call" else 0)
    monkeypatch.setattr(LocalProvider, "create", real)
    _restart(cap)
    cap.settle()
    cap.clock.advance(30)
    cap.settle()
    assert cap.phases() == ["Ready"]
    assert len(cap.rt.virtual) == 1
    assert cap.get("Workload", "train")["status"].get("admission")


def test_a_machine_no_claim_accounts_for_is_given_back(cap: CapacityHarness):
    cap.apply(pool())
    cap.settle()
    cap.rt.add_virtual_node(
        VirtualNodeSpec("stray", gpus=4, gpu_model="A100", gpu_memory_bytes=1 << 34, cpu="8", memory="64Gi")
    )
    cap.manager.capacity.providers.of("local", {})  # the provider is in use
    cap.settle()
    assert cap.rt.virtual == {}


def _doctor_codes(cap: CapacityHarness) -> list[str]:
    kinds = {
        "nodes": "Node",
        "pods": "Pod",
        "workloads": "Workload",
        "jobs": "TrainingJob",
        "cluster_queues": "ClusterQueue",
        "local_queues": "LocalQueue",
        "flavors": "ResourceFlavor",
        "node_claims": "NodeClaim",
    }
    inputs = Inputs(now=cap.clock(), **{field: cap.store.list(kind).items for field, kind in kinds.items()})
    return [f.code for f in diagnose(inputs, Thresholds())]


def test_no_gpu_node_yet_is_no_finding_while_a_pool_brings_one(cap: CapacityHarness):
    """Scale from zero: no node has GPUs, which why and doctor name as the root cause until a
    node is coming up; then the wait is the node's, with nothing for the user to do."""
    cap.apply(job("train", workers=1, gpus=4))
    cap.settle()
    assert "NoGPUs" in _doctor_codes(cap)
    cap.apply(pool())
    cap.settle()
    assert cap.phases() == ["Launched"]
    assert "NoGPUs" not in _doctor_codes(cap)
    ex = _why(cap, "train")
    assert ex.summary.startswith("trainingjob/train is waiting for node ")
    assert ex.unblock[0].startswith("nothing to do: waiting for node ")
    assert not any("fake-gpus" in hint for hint in ex.unblock), ex.unblock


def test_a_pass_on_a_cluster_without_node_pools_does_not_plan_any(harness: Harness, monkeypatch):
    import muster.controllers.capacity.autoscaler as autoscaler

    def planned(*args: object, **kwargs: object) -> None:
        raise AssertionError("the autoscaler looked at the cluster with no NodePool nor NodeClaim")

    monkeypatch.setattr(autoscaler, "build_nodes", planned)
    h = harness
    h.apply(job("a", workers=1))
    h.settle(lambda: h.rt.started)
    assert h.manager.capacity.autoscaler.last.launch == []
