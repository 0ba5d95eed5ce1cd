"""The capacity controller end to end on a puppet runtime: scale from zero, idle removal."""

from __future__ import annotations

from muster.api.lifecycle import job_phase
from tests.controllers.capacity_harness import CapacityHarness, cap, pool  # noqa: F401
from tests.controllers.conftest import job


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
