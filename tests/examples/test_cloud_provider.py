"""examples/capacity/cloud_provider.py works as written: a NodePool names it (provider python)
and the controller loads it; against a fake EC2-like cloud it makes one machine per claim (a
repeated create returns the same one), finds them by tag, reports a spot notice and gives
machines back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from muster.api import registry
from muster.controllers.capacity.providers import Providers
from muster.providers.base import NodeProvider, NodeRequest, ProviderError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "capacity"


class FakeEc2:
    def __init__(self) -> None:
        self.instances: dict[str, dict[str, Any]] = {}
        self.fail = False

    def run_instances(self, **kw: Any) -> dict[str, Any]:
        if self.fail:
            raise RuntimeError("InsufficientInstanceCapacity")
        token = kw["ClientToken"]
        if token not in self.instances:
            self.instances[token] = {
                "InstanceId": f"i-{len(self.instances):04d}",
                "State": {"Name": "pending"},
                "Tags": kw["TagSpecifications"][0]["Tags"],
                "Placement": {"AvailabilityZone": "us-east-1a"},
                "PrivateDnsName": f"ip-10-0-0-{len(self.instances)}.ec2.internal",
            }
        return {"Instances": [self.instances[token]]}

    def describe_instances(self, Filters: list[dict[str, Any]]) -> dict[str, Any]:
        f = Filters[0]

        def keep(i: dict[str, Any]) -> bool:
            tags = {t["Key"]: t["Value"] for t in i["Tags"]}
            if f["Name"] == "tag-key":
                return f["Values"][0] in tags
            return tags.get(f["Name"][4:]) in f["Values"]

        return {"Reservations": [{"Instances": [i for i in self.instances.values() if keep(i)]}]}

    def terminate_instances(self, InstanceIds: list[str]) -> dict[str, Any]:
        for i in self.instances.values():
            if i["InstanceId"] in InstanceIds:
                i["State"]["Name"] = "terminated"
        return {}


REQUEST = NodeRequest(
    "a100-abcde",
    "a100",
    "spot",
    9.0,
    gpus=8,
    gpu_model="A100",
    gpu_memory_bytes=80 << 30,
    cpu="96",
    memory="1Ti",
    labels={"team": "ml"},
)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("cloud_provider", None)
    import cloud_provider

    return cloud_provider.CloudProvider({"launchTemplate": "gpu-a100"}, cloud=FakeEc2())


def test_the_example_provider_against_a_fake_cloud(provider):
    assert isinstance(provider, NodeProvider)
    made = provider.create(REQUEST)
    assert made.state == "pending" and made.provider_id == "aws:///us-east-1a/i-0000"
    assert provider.create(REQUEST) == made, "the claim is the idempotency token"
    raw = provider.cloud.instances["a100-abcde"]
    raw["State"]["Name"] = "running"
    raw["SpotInterruption"] = {"action": "terminate", "time": "2025-01-01T00:02:00Z"}
    got = provider.get("a100-abcde")
    assert got.state == "running" and got.node_name == "ip-10-0-0-0.ec2.internal"
    assert got.interruption is not None and got.interruption.action == "terminate"
    assert [i.claim for i in provider.list()] == ["a100-abcde"]
    provider.delete("a100-abcde")
    assert provider.get("a100-abcde") is None and provider.list() == []
    provider.cloud.fail = True
    with pytest.raises(ProviderError, match="InsufficientInstanceCapacity"):
        provider.create(REQUEST)


def test_a_nodepool_names_it_and_the_controller_loads_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("cloud_provider", None)
    import cloud_provider

    cloud = FakeEc2()
    monkeypatch.setattr(cloud_provider, "_connect", lambda config: cloud)  # instead of boto3
    pool = registry.validate(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "NodePool",
            "metadata": {"name": "a100"},
            "spec": {
                "provider": "python",
                "providerConfig": {"class": "cloud_provider:CloudProvider", "region": "us-east-1"},
                "template": {"gpus": 8, "gpuModel": "A100"},
            },
        }
    ).obj
    providers = Providers(runtime=None, clock=lambda: 0.0)
    provider = providers.of("python", pool["spec"]["providerConfig"])
    assert provider.create(REQUEST).claim == "a100-abcde" and list(cloud.instances) == ["a100-abcde"]
    assert providers.of("python", pool["spec"]["providerConfig"]) is provider, "opened once"
    with pytest.raises(ProviderError, match="cannot load provider class nowhere:Nothing"):
        providers.of("python", {"class": "nowhere:Nothing"})
