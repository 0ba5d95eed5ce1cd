"""The expression language of when and {{= ...}}, and reference resolution."""

from __future__ import annotations

import re

import pytest

from muster.controllers.workflow.expr import ExpressionError, evaluate, render
from muster.controllers.workflow.values import NO_ITEM, ArtifactPaths, Scope, UnresolvedReference


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tails == heads", False),
        ("heads == heads", True),
        ("0.7 > 0.5 && true", True),
        ("10 > 9", True),  # numeric, not text, comparison
        ("abc < abd", True),
        ("my-model != my-model", False),
        ("!(1 == 2) || false", True),
        ("not false and 3 >= 3", True),
        ("2 in [1, 2]", True),
        ("'a b' == \"a b\"", True),
        ("5-3 == 2", True),
        ("v1.2 == v1.2", True),
    ],
)
def test_when_mode(text, expected):
    assert evaluate(text) is expected


def test_expression_mode_with_variables_and_functions():
    names = {"item": "3", "tasks": {"flip-coin": {"outputs": {"parameters": {"n": "4"}}}}}
    assert evaluate("asInt(item) * 2", names) == 6
    assert evaluate("asFloat(tasks['flip-coin'].outputs.parameters.n) / 8", names) == 0.5
    assert evaluate("len([1, 2, 3]) + 1", names) == 4
    assert render(evaluate("7 / 2", names)) == "3.5"
    assert render(evaluate("string(2.0)", names)) == "2"
    assert render(evaluate("[1, 'a']", names)) == '[1,"a"]'


@pytest.mark.parametrize(
    ("text", "names", "message"),
    [
        ("", None, "empty"),
        ("1 ==", None, "ends where"),
        ("(1 == 1", None, "expected ')'"),
        ("1 / 0", None, "division by zero"),
        ("nope + 1", {}, "unknown name 'nope'"),
        ("frob(1)", {}, "unknown function frob()"),
        ("a < 1", None, "cannot order"),
        ("1 && true", None, "not true or false"),
        ("1 # 2", None, "cannot read"),
    ],
)
def test_errors_say_what_is_wrong(text, names, message):
    with pytest.raises(ExpressionError, match=re.escape(message)):
        evaluate(text, names)


def _scope(**kw):
    wf = {
        "metadata": {"name": "wf", "namespace": "ns", "uid": "u-1"},
        "spec": {"arguments": {"parameters": [{"name": "lr", "value": "0.1"}]}},
    }
    nodes = {
        "a": {
            "phase": "Succeeded",
            "outputs": {"parameters": {"n": "5"}, "artifacts": {"d": "sha256:" + "a" * 64}},
        },
        "s": {"phase": "Skipped"},
    }
    return Scope(wf, nodes, **kw)


def test_references_resolve_in_two_stages():
    scope = _scope(inputs={"x": "1"}, item={"k": "v"})
    text = "{{workflow.name}} {{workflow.parameters.lr}} {{inputs.parameters.x}} {{item.k}} "
    text += "{{inputs.artifacts.d}}"
    assert scope.resolve(text) == "wf 0.1 1 v {{inputs.artifacts.d}}"
    paths = ArtifactPaths("/in", lambda d: f"/store/{d[7:10]}")
    assert scope.resolve(text, paths) == "wf 0.1 1 v /in/d"
    assert scope.resolve("{{tasks.a.outputs.artifacts.d}}", paths) == "/store/aaa"
    assert scope.resolve(
        ["{{tasks.a.outputs.parameters.n}}", {"k": "{{= asInt(tasks.a.outputs.parameters.n) + 1}}"}]
    ) == [
        "5",
        {"k": "6"},
    ]
    assert scope.resolve("[{{tasks.s.outputs.parameters.n}}]") == "[]"  # skipped: empty


def test_unresolvable_references_raise():
    scope = _scope()
    for text in (
        "{{item}}",
        "{{workflow.status}}",
        "{{inputs.parameters.nope}}",
        "{{tasks.a.outputs.parameters.zz}}",
    ):
        with pytest.raises(UnresolvedReference):
            scope.resolve(text)
    assert _scope(item=NO_ITEM, status="Failed").resolve("{{workflow.status}}") == "Failed"


def test_when_substitutes_then_evaluates():
    scope = _scope()
    assert scope.when("{{tasks.a.outputs.parameters.n}} > 4") is True
    assert scope.when("'{{tasks.s.outputs.parameters.n}}' == ''") is True
    with pytest.raises(UnresolvedReference, match="not true or false"):
        scope.when("{{tasks.a.outputs.parameters.n}}")
