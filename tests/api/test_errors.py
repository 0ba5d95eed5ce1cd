from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from muster.api.errors import FieldError, InvalidObject, child_path, errors_from_pydantic, format_path


def test_format_path_prints_indices_and_dotted_keys_in_brackets():
    assert format_path(("spec", "replicaSpecs", "Worker", "replicas")) == "spec.replicaSpecs.Worker.replicas"
    assert format_path(("spec", "containers", 0, "name")) == "spec.containers[0].name"
    assert format_path(("limits", "nvidia.com/gpu")) == "limits[nvidia.com/gpu]"
    assert child_path("spec", "tasks", 2) == "spec.tasks[2]"
    assert child_path("", "kind") == "kind"


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(ge=1)
    mode: Literal["A", "B"] = "A"


class _Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[_Inner]
    flag: bool = False
    names: dict[str, str] = {}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"items": [{"n": 0}]}, "items[0].n: must be >= 1, got 0"),
        (
            {"items": [{"n": 1, "x": 1}]},
            "items[0].x: unknown field (remove it, or check its spelling and indentation)",
        ),
        ({}, "items: required field is missing"),
        ({"items": [{"n": "two"}]}, "items[0].n: must be an integer, got 'two'"),
        ({"items": [{"n": 1, "mode": "C"}]}, "items[0].mode: must be one of 'A' or 'B', got 'C'"),
        ({"items": 3}, "items: must be a list, got 3"),
        ({"items": ["x"]}, "items[0]: must be a mapping (key: value pairs), got 'x'"),
        ({"items": [], "flag": "maybe"}, "flag: must be true or false, got 'maybe'"),
        ({"items": [], "names": {"a": 1}}, "names.a: must be a string, got 1"),
    ],
)
def test_pydantic_errors_read_as_path_rule_got(data, expected):
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate(data)
    assert [str(e) for e in errors_from_pydantic(info.value)] == [expected]


def test_prefix_and_round_trip_through_dicts():
    err = FieldError("spec.x", "must be 1", 2, "use 1")
    assert str(err) == "spec.x: must be 1, got 2 (use 1)"
    assert FieldError.from_dict(err.to_dict()) == err
    prefixed = InvalidObject([err, FieldError("[0]", "bad")]).with_prefix("items")
    assert [e.path for e in prefixed.errors] == ["items.spec.x", "items[0]"]
