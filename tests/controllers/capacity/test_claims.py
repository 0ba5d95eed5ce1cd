"""NodeClaims whose machine never becomes a node, and machines given back through a hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.controllers.capacity.conftest import CapacityHarness, pool
from tests.controllers.conftest import job

SCRIPT = Path(__file__).resolve().parents[2] / "providers" / "hook_script.py"


def test_a_machine_that_never_registers_is_given_back_and_asked_for_again(
    cap: CapacityHarness, tmp_path: Path
):
    state = tmp_path / "machines.json"
    hooked = pool(
        provider="hook",
        providerConfig={"command": f"{sys.executable} {SCRIPT} {state}"},
        registrationTimeoutSeconds=120,
    )
    cap.apply(hooked, job("train", workers=1, gpus=4))
    cap.settle()
    [claim] = cap.claims()
    assert (
        claim["status"]["phase"] == "Launched"
        and claim["status"]["nodeName"] == f"ghost-{claim['metadata']['name']}"
    )
    assert list(json.loads(state.read_text())) == [claim["metadata"]["name"]]
    cap.clock.advance(121)
    cap.settle()
    old = next(c for c in cap.claims() if c["metadata"]["name"] == claim["metadata"]["name"])
    assert old["status"]["phase"] == "Terminated"
    assert "not Ready 120s after launch" in " ".join(m for _, m in cap.events(old))
    machines = json.loads(state.read_text())
    assert claim["metadata"]["name"] not in machines, "the half-made machine is given back"
    # the work still waits, so a new node is asked for
    fresh = [c for c in cap.claims() if c["status"]["phase"] == "Launched"]
    assert len(fresh) == 1 and fresh[0]["status"]["workloads"] == ["default/train"]
    assert [n["metadata"]["name"] for n in cap.store.list("Node").items] == ["cpu-0"]


def test_a_failing_hook_leaves_the_claim_pending_with_its_message(cap: CapacityHarness, tmp_path: Path):
    state = tmp_path / "machines.json"
    (tmp_path / "FAIL").touch()
    cap.apply(
        pool(provider="hook", providerConfig={"command": f"{sys.executable} {SCRIPT} {state}"}),
        job("train", workers=1, gpus=4),
    )
    cap.settle()
    [claim] = cap.claims()
    assert claim["status"]["phase"] == "Pending"
    assert (
        "hook " in claim["status"]["lastError"] and "quota exceeded in zone-a" in claim["status"]["lastError"]
    )
    pool_obj = cap.get("NodePool", "gpu", None)
    assert any(r == "ProvisioningFailed" for r, _ in cap.events(pool_obj))


def _ckpt_job(name: str, gpus: int, checkpointable: bool = True) -> dict:
    doc = job(name, workers=1, gpus=gpus)
    if checkpointable:
        template = doc["spec"]["replicaSpecs"]["Worker"]["template"]
        template["metadata"] = {"annotations": {"muster.dev/checkpointable": "true"}}
    return doc


def _run_on_nodes(cap: CapacityHarness) -> dict[str, str]:
    cap.clock.advance(30)
    cap.settle()
    cap.rt.run_all()
    cap.settle()
    return {
        name: p["spec"]["nodeName"] for name, p in cap.pods().items() if p["status"].get("phase") == "Running"
    }


@pytest.mark.parametrize("checkpointable", [True, False])
def test_an_underused_node_is_repacked_when_its_pods_checkpoint(cap: CapacityHarness, checkpointable: bool):
    repack = pool(
        consolidation={"repackUnderutilized": True, "ttlSecondsAfterEmpty": 60, "utilizationThreshold": 0.5}
    )
    cap.apply(repack, _ckpt_job("small", 1, checkpointable), _ckpt_job("other", 2))
    cap.settle()
    first = _run_on_nodes(cap)
    assert first["small-worker-0"] == first["other-worker-0"]
    cap.apply(_ckpt_job("mid", 2))
    cap.settle()
    placed = _run_on_nodes(cap)
    node1, node2 = placed["small-worker-0"], placed["mid-worker-0"]
    assert node1 != node2
    cap.rt.exit("default/other-worker-0", 0)
    cap.settle()
    cap.clock.advance(61)
    cap.settle()
    claim1 = next(c for c in cap.claims() if c["status"].get("nodeName") == node1)
    if not checkpointable:
        assert claim1["status"]["phase"] == "Ready", "a pod that cannot checkpoint pins its node"
        return
    assert claim1["status"]["phase"] in ("Draining", "Terminating", "Terminated")
    assert "under-used (25% of its GPUs allocated" in " ".join(
        m for _, m in cap.events(cap.get("NodePool", "gpu", None))
    )
    cap.rt.run_all()
    cap.settle()
    assert cap.pods()["small-worker-0"]["spec"]["nodeName"] == node2
    assert "NodeDrained" in [r for r, _ in cap.events(cap.get("Workload", "small"))]
    assert (
        next(c for c in cap.claims() if c["metadata"]["name"] == claim1["metadata"]["name"])["status"][
            "phase"
        ]
        == "Terminated"
    )


def test_min_nodes_are_kept_up(cap: CapacityHarness):
    cap.apply(pool(minNodes=1))
    cap.settle()
    assert cap.phases() == ["Launched"] and "keeps minNodes 1" in cap.claims()[0]["spec"]["reason"]
    cap.clock.advance(3600)
    cap.settle()
    assert cap.phases() == ["Ready"], "an idle node the pool must keep stays"
