from __future__ import annotations

import pytest

from muster.api.common import check_resource_name
from muster.api.registry import validate
from tests.api.helpers import errors_of, obj


@pytest.mark.parametrize(
    "name",
    [
        "cpu",
        "memory",
        "ephemeral-storage",
        "pods",
        "hugepages-2Mi",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "muster.dev/gpu-memory",
        "example.com/fpga_x",
    ],
)
def test_valid_resource_names(name):
    assert check_resource_name(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("gpu", "did you mean nvidia.com/gpu?"),
        ("cpus", "did you mean cpu?"),
        ("Example.com/gpu", "DNS subdomain"),
        ("nvidia.com/", "not a valid resource name"),
        ("a b", "not a valid resource name"),
        ("", "not a valid resource name"),
    ],
)
def test_invalid_resource_names_say_why(name, fragment):
    assert fragment in check_resource_name(name)


def _flavor(**spec):
    return obj("ResourceFlavor", spec=spec)


def test_toleration_rules():
    errs = errors_of(
        _flavor(
            tolerations=[
                {"operator": "Equal", "value": "x"},
                {"key": "k", "operator": "Exists", "value": "v", "tolerationSeconds": 5},
            ]
        )
    )
    assert errs == [
        "spec.tolerations[0].operator: must be Exists when key is empty, got 'Equal'",
        "spec.tolerations[1].value: must be empty when operator is Exists, got 'v'",
        "spec.tolerations[1].tolerationSeconds: may only be set when effect is NoExecute",
    ]


def test_taint_effect_is_checked():
    (err,) = errors_of(_flavor(nodeTaints=[{"key": "k", "effect": "Sometimes"}]))
    assert err.startswith("spec.nodeTaints[0].effect: must be one of 'NoSchedule', 'PreferNoSchedule'")


def test_label_selector_rules():
    doc = obj(
        "ClusterQueue",
        spec={
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "team", "operator": "In"},
                    {"key": "x", "operator": "Exists", "values": ["a"]},
                ]
            }
        },
    )
    assert errors_of(doc) == [
        "spec.namespaceSelector.matchExpressions[0].values: must not be empty when operator is In",
        "spec.namespaceSelector.matchExpressions[1].values: must be empty when operator is Exists, got ['a']",
    ]


def test_node_affinity_rules():
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu-count", "operator": "Gt", "values": ["many"]}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 101, "preference": {"matchExpressions": []}}
            ],
        }
    }
    doc = obj("Workload", spec={"podSets": [{"count": 1, "affinity": affinity}]})
    assert errors_of(doc) == [
        "spec.podSets[0].affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be <= 100, got 101",
    ]
    affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] = 100
    assert errors_of(doc) == [
        "spec.podSets[0].affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values: must be exactly one integer for Gt, got ['many']",
    ]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {"my label": "x"},
            "label key 'my label' is invalid: the name part must be 1-63 letters, digits, '-', '_' "
            "or '.', starting and ending with a letter or digit",
        ),
        (
            {"team": "a b"},
            "label team='a b' is invalid: a value is at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit",
        ),
        (
            {"Example.com/x": "1"},
            "label key 'Example.com/x' is invalid: the part before '/' must be a DNS subdomain "
            "such as example.com",
        ),
    ],
)
def test_labels_follow_kubernetes_rules(labels, expected):
    doc = obj("ResourceFlavor", spec={"nodeLabels": labels})
    doc["metadata"]["labels"] = labels
    assert errors_of(doc) == [f"metadata.labels: {expected}", f"spec.nodeLabels: {expected}"]


def test_valid_labels_and_annotations():
    doc = obj(
        "ResourceFlavor",
        spec={"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "empty": ""}},
    )
    doc["metadata"]["annotations"] = {"muster.dev/note": "any text at all: ok"}
    validate(doc)
    doc["metadata"]["annotations"] = {"bad key!": "x"}
    assert errors_of(doc) == [
        "metadata.annotations: annotation key 'bad key!' is invalid: the name part "
        "must be "
        "1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
        "digit"
    ]
