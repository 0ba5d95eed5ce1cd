"""NodeClaims whose machine never becomes a node, and machines given back through a hook."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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
