"""The hook provider: JSON over stdin/stdout to an executable of yours, its errors and time-outs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from muster.providers.base import NodeRequest, ProviderError
from muster.providers.hook import HookProvider, request_document
from muster.runtime.base import NodeTaint

SCRIPT = Path(__file__).with_name("hook_script.py")
REQUEST = NodeRequest(
    "pool-abcde",
    "pool",
    "spot",
    3.5,
    gpus=8,
    gpu_model="A100",
    gpu_memory_bytes=80 << 30,
    cpu="96",
    memory="1Ti",
    labels={"muster.dev/nodepool": "pool"},
    taints=(NodeTaint("muster.dev/capacity-type", "spot"),),
    ready_in_seconds=90,
)


def hook(tmp_path: Path, timeout: str = "10") -> HookProvider:
    return HookProvider(
        {"command": f"{sys.executable} {SCRIPT} {tmp_path / 'machines.json'}", "timeoutSeconds": timeout}
    )


def test_create_get_list_delete(tmp_path: Path):
    provider = hook(tmp_path)
    made = provider.create(REQUEST)
    assert (made.claim, made.state, made.node_name) == ("pool-abcde", "running", "ghost-pool-abcde")
    assert provider.create(REQUEST) == made, "a repeated create returns the same machine"
    assert provider.get("pool-abcde") == made and provider.get("other") is None
    assert [i.claim for i in provider.list()] == ["pool-abcde"]
    provider.delete("pool-abcde")
    provider.delete("pool-abcde")
    assert provider.list() == []


def test_the_request_document_is_camel_case_json():
    doc = request_document(REQUEST)
    assert doc["capacityType"] == "spot" and doc["gpuMemoryBytes"] == 80 << 30 and doc["readyInSeconds"] == 90
    assert doc["taints"] == [{"key": "muster.dev/capacity-type", "value": "spot", "effect": "NoSchedule"}]


def test_failures_and_timeouts_are_provider_errors_with_the_cause(tmp_path: Path):
    (tmp_path / "FAIL").touch()
    with pytest.raises(ProviderError, match="create failed: quota exceeded in zone-a"):
        hook(tmp_path).create(REQUEST)
    (tmp_path / "FAIL").unlink()
    (tmp_path / "SLEEP").touch()
    with pytest.raises(ProviderError, match=r"timed out after 0\.5s"):
        hook(tmp_path, timeout="0.5").get("x")
    with pytest.raises(ProviderError, match="not found"):
        HookProvider({"command": "/no/such/hook"}).list()
    with pytest.raises(ProviderError, match="timeoutSeconds must be a number"):
        HookProvider({"command": "x", "timeoutSeconds": "soon"})
    with pytest.raises(ProviderError, match="printed no JSON"):
        HookProvider({"command": f"{sys.executable} -c \"print('hello')\""}).list()
