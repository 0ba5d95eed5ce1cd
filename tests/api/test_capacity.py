"""NodePool, NodeClaim and UsageRecord validation, and Karpenter's NodePool converted."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from muster.api import registry
from muster.api.compat.karpenter import parse_duration
from muster.api.errors import InvalidObject
from muster.sdk.client import Client
from muster.sdk.errors import Invalid
from muster.testing.server import serve

Obj = dict[str, Any]


def pool(**spec: Any) -> Obj:
    body = {"provider": "local", "template": {"gpus": 8, "gpuModel": "A100"}, **spec}
    return {"apiVersion": "muster.dev/v1", "kind": "NodePool", "metadata": {"name": "a100"}, "spec": body}


def errors(doc: Obj) -> list[str]:
    with pytest.raises(InvalidObject) as info:
        registry.validate(doc)
    return [str(e) for e in info.value.errors]


def test_a_valid_pool_gets_its_defaults():
    obj = registry.validate(pool(maxNodes=4, pricePerHour=32.77)).obj
    assert obj is not None and "namespace" not in obj["metadata"]
    spec = obj["spec"]
    assert spec["capacityType"] == "on-demand" and spec["minNodes"] == 0 and spec["maxNodes"] == 4
    assert spec["consolidation"]["ttlSecondsAfterEmpty"] == 300
    assert registry.lookup("np").kind == "NodePool" and not registry.lookup("nodeclaims").namespaced


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"minNodes": 3, "maxNodes": 2},
            "spec.maxNodes: must be >= minNodes (3), got 2 (raise maxNodes or lower minNodes)",
        ),
        ({"pricePerHour": -1}, "spec.pricePerHour: must be >= 0.0, got -1"),
        (
            {"provider": "aws"},
            "spec.provider: unknown provider; use one of local, kubernetes, hook, python, got 'aws'",
        ),
        ({"provider": "hook"}, "spec.providerConfig.command: is required by the hook provider"),
        ({"provider": "python"}, "spec.providerConfig.class: is required by the python provider"),
        (
            {"providerConfig": {"zone": "a"}},
            "spec.providerConfig.zone: is not a setting of the local provider; it takes none",
        ),
        ({"template": {"gpus": 8}}, "spec.template.gpuModel: is required when gpus > 0"),
        (
            {"template": {"gpus": 2, "gpuModel": "A100", "mig": {"profile": "9x", "slicesPerGpu": 7}}},
            "spec.template.mig.profile",
        ),
        ({"capacityType": "reserved"}, "spec.capacityType"),
        ({"maxNodes": -1}, "spec.maxNodes: must be >= 0"),
    ],
)
def test_bad_pools_are_rejected_with_the_field_path(spec: Obj, expected: str):
    found = errors(pool(**spec))
    assert any(e.startswith(expected) for e in found), found


def test_an_unknown_field_is_an_error_naming_its_path():
    assert any(e.startswith("spec.template.gpuCount") for e in errors(pool(template={"gpuCount": 8})))


def test_apply_of_a_bad_pool_among_good_documents_stores_nothing(sqlite_store):
    good = pool()
    bad = pool(maxNodes=-3)
    bad["metadata"]["name"] = "bad"
    with serve(sqlite_store) as running, Client(running.url, running.token) as client:
        with pytest.raises(Invalid) as info:
            client.apply([good, bad])
        assert any(e.get("document") == 1 and e["path"] == "spec.maxNodes" for e in info.value.errors)
        assert client.list("NodePool")["items"] == []


KARPENTER = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
  annotations: {muster.dev/price-per-hour: "32.77", muster.dev/provider: local}
spec:
  template:
    metadata: {labels: {team: ml}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: karpenter.k8s.aws/instance-gpu-count, operator: In, values: ["8"]}
        - {key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [a100]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge, p4de.24xlarge]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
      expireAfter: 720h
  limits: {nvidia.com/gpu: 64}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5m, budgets: [{nodes: "10%"}]}
  weight: 5
"""


def test_karpenter_nodepool_converts_where_the_fields_map_and_warns_for_each_other_field():
    v = registry.validate(yaml.safe_load(KARPENTER))
    spec = v.obj["spec"]
    assert spec["provider"] == "local" and spec["capacityType"] == "spot" and spec["pricePerHour"] == 32.77
    assert spec["template"]["gpus"] == 8 and spec["template"]["gpuModel"] == "a100"
    assert spec["template"]["labels"] == {"team": "ml", "topology.kubernetes.io/zone": "us-east-1a"}
    assert spec["template"]["taints"] == [{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}]
    assert spec["maxNodes"] == 8, "the GPU limit over the GPUs per node"
    assert spec["limits"] == {"nvidia.com/gpu": "64"} and spec["weight"] == 5
    assert (
        spec["consolidation"]["ttlSecondsAfterEmpty"] == 300 and spec["consolidation"]["repackUnderutilized"]
    )
    warned = {w.split(":")[0] for w in v.warnings}
    assert {
        "spec.template.spec.nodeClassRef",
        "spec.template.spec.expireAfter",
        "spec.template.spec.requirements[3]",
        "spec.disruption.budgets",
    } <= warned
    assert "muster.dev/ignored-fields" in v.obj["metadata"]["annotations"]


def test_karpenter_without_muster_annotations_warns_about_price_and_node_count():
    doc = yaml.safe_load(KARPENTER)
    del doc["metadata"]["annotations"]
    del doc["spec"]["limits"]
    v = registry.validate(doc)
    assert v.obj["spec"]["provider"] == "kubernetes" and v.obj["spec"]["maxNodes"] == 10
    text = "\n".join(v.warnings)
    assert "metadata.annotations[muster.dev/price-per-hour]: absent" in text
    assert "metadata.annotations[muster.dev/max-nodes]: absent" in text


def test_karpenter_with_both_capacity_types_becomes_on_demand_with_a_warning():
    doc = yaml.safe_load(KARPENTER)
    doc["spec"]["template"]["spec"]["requirements"][0]["values"] = ["spot", "on-demand"]
    v = registry.validate(doc)
    assert v.obj["spec"]["capacityType"] == "on-demand"
    assert any(w.startswith("spec.template.spec.requirements[0]: allows spot, on-demand") for w in v.warnings)


def test_karpenter_errors_name_the_foreign_path():
    doc = yaml.safe_load(KARPENTER)
    doc["metadata"]["annotations"]["muster.dev/price-per-hour"] = "-4"
    with pytest.raises(InvalidObject) as info:
        registry.validate(doc)
    assert str(info.value.errors[0]).startswith(
        "metadata.annotations[muster.dev/price-per-hour]: must be >= 0"
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("Never", None), ("", None)]
)
def test_go_durations(text: str, seconds: float | None):
    assert parse_duration(text) == seconds
