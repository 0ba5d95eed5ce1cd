"""The small expression language of ``when`` and ``{{= expression}}`` (no I/O, no Python eval).

Two modes, as in Argo:

* ``when`` is evaluated after every ``{{...}}`` in it was replaced by its value (govaluate
  style), so a bare word is a string: ``{{tasks.flip.outputs.parameters.side}} == heads``
  becomes ``tails == heads``, which is false. Words may contain ``-`` and ``.``; quote a value
  that contains spaces or operators (``'{{inputs.parameters.path}}' != ''``).
* ``{{= expression}}`` names values as variables (expr-lang style): ``item``, ``inputs``,
  ``workflow`` and ``tasks``, with ``.field`` and ``['field-with-dashes']`` access, e.g.
  ``{{= asInt(item) * 2}}`` or ``{{= tasks['prep'].outputs.parameters.n}}``.

Operators: ``|| or``, ``&& and``, ``! not``, ``== != < <= > >= in``, ``+ - * / %``, unary ``-``,
parentheses and list literals ``[1, 2]``. Literals: numbers, ``'single'`` or ``"double"``
quoted strings, ``true``, ``false``, ``null``. Functions: ``asInt``, ``asFloat``, ``string``,
``len``, ``toJson``. Comparisons are numeric when both sides read as numbers, else they
compare text. Errors raise :class:`ExpressionError` naming what is wrong.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ExpressionError", "evaluate", "render"]


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; the message says where and why."""


_NUMBER = r"(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
_STRING = r"(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
_OP = r"(?P<op>==|!=|<=|>=|&&|\|\||[<>!()+\-*/%\[\],.])"
_TOKENS = {
    # when: words are strings after substitution, so they may carry dashes and dots
    True: re.compile(rf"\s*(?:{_NUMBER}(?!\w)|{_STRING}|(?P<word>[A-Za-z_][\w.\-]*)|{_OP})"),
    False: re.compile(rf"\s*(?:{_NUMBER}|{_STRING}|(?P<word>[A-Za-z_]\w*)|{_OP})"),
}
_KEYWORDS = {"true": True, "false": False, "null": None, "nil": None}
_ALIASES = {"and": "&&", "or": "||", "not": "!"}


def evaluate(text: str, variables: Mapping[str, Any] | None = None) -> Any:
    """The value of ``text``: ``variables`` None is ``when`` mode (bare words are strings),
    otherwise the names an ``{{= expression}}`` may use."""
    return _Parser(text, variables).parse()


def render(value: Any) -> str:
    """A value as the text that replaces ``{{= ...}}``: ``2`` (not ``2.0``), ``true``, JSON for
    lists and maps."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer() and math.isfinite(value):
        return str(int(value))
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _as_int(value: Any) -> int:
    n = _number(value)
    if n is None:
        raise ExpressionError(f"asInt: {value!r} is not a number")
    return int(n)


def _as_float(value: Any) -> float:
    n = _number(value)
    if n is None:
        raise ExpressionError(f"asFloat: {value!r} is not a number")
    return n


def _length(value: Any) -> int:
    if isinstance(value, str | list | dict):
        return len(value)
    raise ExpressionError(f"len: {value!r} has no length")


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "asInt": _as_int,
    "asFloat": _as_float,
    "string": render,
    "len": _length,
    "toJson": lambda v: json.dumps(v, separators=(",", ":")),
}


def _compare(op: str, left: Any, right: Any) -> bool:
    a, b = _number(left), _number(right)
    if a is not None and b is not None:
        x: Any
        y: Any
        x, y = a, b
    elif op in ("==", "!="):
        x, y = render(left), render(right)
    elif isinstance(left, str) and isinstance(right, str):
        x, y = left, right
    else:
        raise ExpressionError(f"cannot order {render(left)!r} {op} {render(right)!r}")
    return {
        "==": x == y,
        "!=": x != y,
        "<": x < y,
        "<=": x <= y,
        ">": x > y,
        ">=": x >= y,
    }[op]


def _arithmetic(op: str, left: Any, right: Any) -> Any:
    a, b = _number(left), _number(right)
    if op == "+" and (a is None or b is None):
        return render(left) + render(right)
    if a is None or b is None:
        raise ExpressionError(f"{render(left)!r} {op} {render(right)!r}: both sides must be numbers")
    if op in ("/", "%") and b == 0:
        raise ExpressionError(f"{render(left)} {op} 0: division by zero")
    result = {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "%": a % b}[op]
    return int(result) if result.is_integer() and op != "/" else result


class _Parser:
    """Recursive descent that evaluates as it parses (expressions have no side effects)."""

    def __init__(self, text: str, variables: Mapping[str, Any] | None) -> None:
        self.text = text
        self.variables = variables
        self.tokens = self._tokenize(text, variables is None)
        self.pos = 0

    def parse(self) -> Any:
        if not self.tokens:
            raise ExpressionError("the expression is empty")
        value = self._or()
        if self.pos < len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.pos][1]!r} in {self.text!r}")
        return value

    # -- grammar, lowest precedence first ---------------------------------------------------

    def _or(self) -> Any:
        value = self._and()
        while self._take("||"):
            right = self._and()
            value = _truth(value) or _truth(right)
        return value

    def _and(self) -> Any:
        value = self._not()
        while self._take("&&"):
            right = self._not()
            value = _truth(value) and _truth(right)
        return value

    def _not(self) -> Any:
        if self._take("!"):
            return not _truth(self._not())
        return self._comparison()

    def _comparison(self) -> Any:
        value = self._sum()
        for op in ("==", "!=", "<=", ">=", "<", ">", "in"):
            if self._take(op):
                right = self._sum()
                if op == "in":
                    if not isinstance(right, list | dict | str):
                        raise ExpressionError(f"'in' needs a list, map or string on its right, got {right!r}")
                    return (
                        value in right
                        if not isinstance(right, list)
                        else any(_compare("==", value, r) for r in right)
                    )
                return _compare(op, value, right)
        return value

    def _sum(self) -> Any:
        value = self._term()
        while (op := self._take("+", "-")) is not None:
            value = _arithmetic(op, value, self._term())
        return value

    def _term(self) -> Any:
        value = self._unary()
        while (op := self._take("*", "/", "%")) is not None:
            value = _arithmetic(op, value, self._unary())
        return value

    def _unary(self) -> Any:
        if self._take("-"):
            return _arithmetic("-", 0, self._unary())
        return self._postfix()

    def _postfix(self) -> Any:
        kind, text = self._next("a value")
        value = self._primary(kind, text)
        while True:
            if self._take("."):
                _, field = self._expect("word", "a field name after '.'")
                value = self._index(value, field, text)
            elif self._take("["):
                key = self._or()
                self._expect_op("]")
                value = self._index(value, key, text)
            else:
                return value

    def _primary(self, kind: str, text: str) -> Any:
        if kind == "num":
            number = float(text)
            return (
                int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            )
        if kind == "str":
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "op" and text == "(":
            value = self._or()
            self._expect_op(")")
            return value
        if kind == "op" and text == "[":
            items: list[Any] = []
            while not self._take("]"):
                items.append(self._or())
                if not self._take(","):
                    self._expect_op("]")
                    break
            return items
        if kind == "word":
            if text in _KEYWORDS:
                return _KEYWORDS[text]
            if self._take("("):
                return self._call(text)
            if self.variables is None:
                return text
            if text not in self.variables:
                known = ", ".join(sorted(self.variables))
                raise ExpressionError(f"unknown name {text!r} in {self.text!r} (known: {known})")
            return self.variables[text]
        raise ExpressionError(f"unexpected {text!r} in {self.text!r}")

    def _call(self, name: str) -> Any:
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise ExpressionError(f"unknown function {name}() (known: {', '.join(sorted(_FUNCTIONS))})")
        arg = self._or()
        self._expect_op(")")
        return fn(arg)

    def _index(self, value: Any, key: Any, where: str) -> Any:
        if isinstance(value, Mapping) and key in value:
            return value[key]
        if isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            return value[key]
        raise ExpressionError(f"{where}: no {key!r} in {render(value)!r}")

    # -- tokens ---------------------------------------------------------------------------------

    @staticmethod
    def _tokenize(text: str, when_mode: bool) -> list[tuple[str, str]]:
        pattern = _TOKENS[when_mode]
        tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if not text[pos:].strip():
                break
            m = pattern.match(text, pos)
            if m is None or m.end() == pos:
                raise ExpressionError(f"cannot read {text[pos:].strip()!r} in {text!r}")
            kind = m.lastgroup or "op"
            value = m.group(kind)
            if kind == "word" and value in _ALIASES:
                kind, value = "op", _ALIASES[value]
            elif kind == "word" and value == "in":
                kind = "op"
            tokens.append((kind, value))
            pos = m.end()
        return tokens

    def _take(self, *ops: str) -> str | None:
        if self.pos < len(self.tokens):
            kind, text = self.tokens[self.pos]
            if kind == "op" and text in ops:
                self.pos += 1
                return text
        return None

    def _next(self, what: str) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise ExpressionError(f"{self.text!r} ends where {what} was expected")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def _expect(self, kind: str, what: str) -> tuple[str, str]:
        token = self._next(what)
        if token[0] != kind:
            raise ExpressionError(f"expected {what} in {self.text!r}, got {token[1]!r}")
        return token

    def _expect_op(self, op: str) -> None:
        if self._take(op) is None:
            got = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
            raise ExpressionError(f"expected {op!r} in {self.text!r}, got {got!r}")


def _truth(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ExpressionError(f"{render(value)!r} is not true or false")
