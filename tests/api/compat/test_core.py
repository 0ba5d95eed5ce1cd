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


def test_namespace_is_accepted_and_creates_nothing():
    result = validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert (result.obj, result.info, result.warnings) == (None, None, [])
    labelled = validate(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    )
    assert labelled.obj is None
    assert labelled.warnings == [
        "metadata.labels: namespace labels and annotations are not stored; namespaces are "
        "implicit (match them by name with kubernetes.io/metadata.name)"
    ]
