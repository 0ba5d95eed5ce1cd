from __future__ import annotations

from datetime import UTC, datetime

import pytest

from muster.api import registry
from muster.cli.columns import COLUMNS, Column, age, columns_for, evaluate, row

NOW = datetime(2026, 1, 2, 12, 0, 0, tzinfo=UTC)


def test_paths():
    obj = {
        "status": {
            "allocatable": {"nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "GPUHealthy", "status": "False"}],
            "gpus": [{"model": "A100"}, {"model": "A100"}, {"model": "H100"}],
        },
        "spec": {"replicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}},
    }
    assert evaluate(obj, 'status.allocatable["nvidia.com/gpu"]') == ["8"]
    assert evaluate(obj, "status.conditions[type=Ready].status") == ["True"]
    assert evaluate(obj, "status.gpus.*.model") == ["A100", "A100", "H100"]
    assert evaluate(obj, "spec.replicaSpecs.*.replicas") == [1, 3]
    assert evaluate(obj, "status.missing.deeper") == []


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (Column("R", "spec.replicaSpecs.*.replicas", "sum"), "4"),
        (Column("M", "status.gpus.*.model", "unique"), "A100,H100"),
        (Column("N", "status.gpus", "count"), "3"),
        (Column("L", "metadata.labels", "map"), "a=1,b=2"),
        (Column("S", "status.conditions", "state"), "Running"),
        (Column("O", "involvedObject", "ref"), "trainingjob/x"),
        (Column("A", "metadata.creationTimestamp", "age"), "3h"),
        (Column("X", "spec.nothing"), "<none>"),
        (Column("B", "spec.flag"), "false"),
        (Column("C", "status.nothing", "sum"), "0"),
        (Column("M", "status.memory", "bytes"), "23.5Gi"),
        (Column("K", "status.small", "bytes"), "512"),
        (Column("T", "status.exact", "bytes"), "2Ti"),
    ],
)
def test_formats(column: Column, expected: str):
    obj = {
        "metadata": {"labels": {"b": "2", "a": "1"}, "creationTimestamp": "2026-01-02T09:00:00.000000Z"},
        "spec": {"replicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}, "flag": False},
        "status": {
            "gpus": [{"model": "A100"}, {"model": "A100"}, {"model": "H100"}],
            "conditions": [
                {"type": "Created", "status": "True", "lastTransitionTime": "2026-01-02T10:00:00Z"},
                {"type": "Running", "status": "True", "lastTransitionTime": "2026-01-02T11:00:00Z"},
                {"type": "Queued", "status": "False", "lastTransitionTime": "2026-01-02T11:30:00Z"},
            ],
        },
        "involvedObject": {"kind": "TrainingJob", "name": "x"},
    }
    obj["status"] |= {"memory": "24683656Ki", "small": "512", "exact": "2Ti"}
    assert row(obj, [column], NOW) == [expected]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "5s"), (59, "59s"), (60, "1m"), (119 * 60, "119m"), (2 * 3600, "2h"), (3 * 86400, "3d")],
)
def test_age(seconds: int, text: str):
    then = datetime.fromtimestamp(NOW.timestamp() - seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert age(then, NOW) == text


def test_wide_and_namespace_columns():
    assert [c.header for c in columns_for("TrainingJob")] == ["NAME", "STATE", "REPLICAS", "QUEUE", "AGE"]
    assert "RESTARTS" in [c.header for c in columns_for("TrainingJob", wide=True)]
    assert columns_for("TrainingJob", namespace_column=True)[0].header == "NAMESPACE"
    assert [c.header for c in columns_for("SomethingNew")] == ["NAME", "AGE"]


def test_every_column_names_a_field_of_its_kind():
    """A typo in a column path would print <none> forever; check each against the schema."""
    kinds = {info.kind: info for info in registry.kinds()}
    assert set(COLUMNS) <= set(kinds), set(COLUMNS) - set(kinds)
    for kind, columns in COLUMNS.items():
        schema = kinds[kind].model.model_json_schema(by_alias=True)
        for column in columns:
            assert _resolves(schema, schema, column.path), f"{kind} column {column.header}: {column.path}"
    tj = kinds["TrainingJob"].model.model_json_schema(by_alias=True)
    assert not _resolves(tj, tj, "spec.replicaSpec.*.replicas")  # the check itself catches typos
    assert not _resolves(tj, tj, "status.conditions[type=Ready].stat")


def _resolves(root: dict, node: dict, path: str) -> bool:
    from muster.cli.columns import _steps

    for step in _steps(path):
        node = _deref(root, node)
        if step[0] == "filter":
            node = node.get("items") or {}
            continue
        if step[0] == "all":  # a list's items, a map's values, or (a model) its first field
            fields = list((node.get("properties") or {}).values())
            node = node.get("items") or node.get("additionalProperties") or (fields[0] if fields else {})
            continue
        props = node.get("properties") or {}
        if step[1] in props:
            node = props[step[1]]
        elif isinstance(node.get("additionalProperties"), dict) or "propertyNames" in node:
            node = node.get("additionalProperties") or {}
        else:
            return False
    return True


def _deref(root: dict, node: dict) -> dict:
    while True:
        if "$ref" in node:
            node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in node:
            node = next((n for n in node["anyOf"] if n.get("type") != "null"), {})
        else:
            return node


def test_experiment_columns_show_the_best_trial_and_its_parameters():
    from muster.cli.columns import columns_for, row

    exp = {
        "metadata": {"name": "lr-search"},
        "status": {
            "trials": 7,
            "trialsRunning": 2,
            "currentOptimalTrial": {
                "bestTrialName": "lr-search-3",
                "objectiveValue": 0.123456789,
                "parameterAssignments": [{"name": "lr", "value": "0.01"}, {"name": "opt", "value": "adam"}],
            },
        },
    }
    cols = columns_for("Experiment")
    cells = dict(zip([c.header for c in cols], row(exp, cols), strict=True))
    assert cells["BEST-TRIAL"] == "lr-search-3"
    assert cells["OBJECTIVE"] == "0.123457"
    assert cells["PARAMETERS"] == "lr=0.01,opt=adam"
    assert cells["TRIALS"] == "7" and cells["RUNNING"] == "2"
