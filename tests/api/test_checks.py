"""The rule walk (muster.api.checks) and the plain-JSON check (muster.api.limits): every model
is visited once with its path, in document order, and every error names where it is."""

from __future__ import annotations

import math

from pydantic import Field

from muster.api.base import MusterModel
from muster.api.checks import check, walk
from muster.api.common import unhonoured
from muster.api.errors import FieldError
from muster.api.limits import MAX_DEPTH, document_errors


class Leaf(MusterModel):
    name: str = Field(description="A name.")
    tags: list[str] = Field(default_factory=list, description="Tags.")

    def field_rules(self, path: str) -> list[FieldError]:
        return [FieldError(f"{path}.name", "must not be bad", self.name)] if self.name == "bad" else []


class Middle(MusterModel):
    leaf: Leaf | None = Field(default=None, description="One leaf.")
    leaves: list[Leaf] = Field(default_factory=list, description="Leaves.")
    by_key: dict[str, Leaf] = Field(default_factory=dict, alias="byKey", description="Leaves by key.")
    legacy: str | None = unhonoured("An old knob.", "the local runtime has no such knob")

    def field_warnings(self, path: str) -> list[FieldError]:
        return [FieldError(path, "has no leaf")] if self.leaf is None else []


class Root(MusterModel):
    middles: list[Middle] = Field(default_factory=list, description="Middles.")
    count: int = Field(default=0, description="A count.")


def _root() -> Root:
    return Root.model_validate(
        {
            "count": 3,
            "middles": [
                {"leaf": {"name": "a"}, "leaves": [{"name": "b"}, {"name": "bad"}]},
                {"byKey": {"x.y": {"name": "c"}, "z": {"name": "bad"}}, "legacy": "on"},
            ],
        }
    )


def test_walk_visits_every_model_once_parents_first_in_document_order() -> None:
    seen = [(type(m).__name__, path) for m, path in walk(_root())]
    assert seen == [
        ("Root", ""),
        ("Middle", "middles[0]"),
        ("Leaf", "middles[0].leaf"),
        ("Leaf", "middles[0].leaves[0]"),
        ("Leaf", "middles[0].leaves[1]"),
        ("Middle", "middles[1]"),
        ("Leaf", "middles[1].byKey[x.y]"),  # a key with a dot is bracketed, as Kubernetes prints it
        ("Leaf", "middles[1].byKey.z"),
    ]


def test_walk_starts_from_the_path_it_is_given() -> None:
    assert [p for _, p in walk(Leaf(name="a"), "spec.leaf")] == ["spec.leaf"]


def test_check_collects_rules_warnings_and_unhonoured_fields_at_their_paths() -> None:
    errors, warnings = check(_root())
    assert [(e.path, e.rule) for e in errors] == [
        ("middles[0].leaves[1].name", "must not be bad"),
        ("middles[1].byKey.z.name", "must not be bad"),
    ]
    assert [(w.path, w.rule.split(":")[0]) for w in warnings] == [
        ("middles[1]", "has no leaf"),
        ("middles[1].legacy", "accepted but not honoured on every runtime"),
    ]


def test_an_unhonoured_field_left_unset_warns_of_nothing() -> None:
    _, warnings = check(Middle(leaf=Leaf(name="a")))
    assert warnings == []


def test_document_errors_name_each_broken_value_by_its_path_in_document_order() -> None:
    doc = {
        "spec": {
            "values": [1, math.nan, {"deep": 2**64}],
            "text": "\ud800",
            "x.y": [math.inf],
            "\udfff": 1,
        }
    }
    assert [e.path for e in document_errors(doc)] == [
        "spec.\\udfff",  # a key is checked as its map is opened, before the values below it
        "spec.values[1]",
        "spec.values[2].deep",
        "spec.text",
        "spec[x.y][0]",
    ]


def test_document_errors_stop_at_the_depth_limit_and_at_the_error_limit() -> None:
    deep: dict = {}
    node = deep
    for _ in range(MAX_DEPTH + 5):
        node["a"] = {}
        node = node["a"]
    (error,) = document_errors(deep)
    assert error.path == ".".join(["a"] * MAX_DEPTH)
    assert "nested more than" in error.rule
    assert len(document_errors({"v": [math.nan] * 50}, limit=7)) == 7


def test_a_plain_document_has_no_errors() -> None:
    assert document_errors({"a": [1, 2.5, "x", True, None, {"b": "é"}], "c": -(2**63), "d": 2**63 - 1}) == []


def test_an_integer_beyond_64_bits_either_way_is_refused() -> None:
    assert [e.path for e in document_errors({"a": 2**63, "b": -(2**63) - 1})] == ["a", "b"]
