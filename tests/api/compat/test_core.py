from __future__ import annotations

from muster.api.registry import validate
from tests.api.helpers import errors_of


def test_priority_class_converts_unchanged():
    doc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000000,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": "This priority class should be used for XYZ service pods only.",
    }
    result = validate(doc)
    assert result.obj == {**doc, "apiVersion": "muster.dev/v1"} and result.warnings == []
    assert errors_of({**doc, "preemptionPolicy": "Sometimes"}) == [
        "preemptionPolicy: must be one of 'PreemptLowerPriority' or 'Never', got 'Sometimes'"
    ]


def test_namespace_converts_to_a_namespace_labelled_with_its_name():
    result = validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert result.info is not None and result.info.kind == "Namespace" and result.warnings == []
    assert result.obj == {
        "apiVersion": "muster.dev/v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
    }
    labelled = validate(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    )
    assert labelled.obj["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": "team-a"}
    assert errors_of({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}) == [
        "metadata.name: a namespace name must be a DNS-1123 label (no dots, at most 63 characters), got 'a.b'"
    ]
