"""kubectl's JSONPath templates (``-o jsonpath=...``) and ``--sort-by`` paths.

A template is text with actions in braces, as kubectl's (Kubernetes' ``util/jsonpath``):

* ``{.items[*].metadata.name}``: a path from the object printed (``$`` or ``@`` may start it);
  ``.field``, ``['field.with.dots']``, ``[0]``, ``[-1]``, ``[1:3]``, ``[*]``, ``..field``
  (every depth) and filters ``[?(@.type=="Ready")]`` (``==``, ``!=``, ``<``, ``<=``, ``>``,
  ``>=``, or ``[?(@.field)]`` for presence);
* ``{range .items[*]}...{end}``: the template between them, once per value;
* ``{"\\t"}``: a string literal (``\\n``, ``\\t``, ``\\\\`` and ``\\"`` are escapes).

The values of one path are printed separated by spaces; strings as they are, numbers and
booleans as JSON writes them, maps and lists as compact JSON. A path that reaches nothing
prints nothing. A malformed template raises :class:`JsonPathError`, naming what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JsonPathError", "Template", "parse_path", "sort_key"]


class JsonPathError(ValueError):
    """A template or path that cannot be parsed; the message says where and why."""


# -- paths ---------------------------------------------------------------------------------------

_Step = tuple[Any, ...]
_IDENT = re.compile(r"[A-Za-z_][-A-Za-z0-9_/]*")
_FILTER = re.compile(
    r"^\s*@(?P<path>[^=!<>]*?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<value>.+?))?\s*$",
)


def parse_path(text: str) -> list[_Step]:
    """The steps of a path such as ``.items[*].metadata.name`` (``$``/``@`` may start it)."""
    steps: list[_Step] = []
    i = 0
    if text[:1] in ("$", "@"):
        i = 1
    while i < len(text):
        ch = text[i]
        if text.startswith("..", i):
            m = _IDENT.match(text, i + 2)
            if not m:
                raise JsonPathError(f"{text!r}: a field name must follow '..' (at {i})")
            steps.append(("deep", m.group()))
            i = m.end()
        elif ch == ".":
            if i + 1 == len(text):
                break  # a lone "." (or a trailing one) is the object itself
            m = _IDENT.match(text, i + 1)
            if m:
                steps.append(("key", m.group()))
                i = m.end()
            elif text.startswith("*", i + 1):
                steps.append(("all",))
                i += 2
            else:
                raise JsonPathError(f"{text!r}: a field name must follow '.' (at {i})")
        elif ch == "[":
            end = _closing(text, i)
            steps.append(_bracket(text[i + 1 : end], text))
            i = end + 1
        elif ch.isspace():
            i += 1
        else:
            raise JsonPathError(f"{text!r}: unexpected {ch!r} at {i}; a path is like .metadata.name")
    return steps


def evaluate(steps: list[_Step], value: Any) -> list[Any]:
    """Every value the path reaches from ``value``."""
    values = [value]
    for step in steps:
        values = [out for v in values for out in _apply(step, v)]
    return values


def sort_key(path: str) -> Any:
    """A key function ordering objects by ``path`` (``.spec.x`` or ``{.spec.x}``): missing
    values first, then numbers (and quantities such as ``16Gi``) by size, then text."""
    inner = path.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    if not inner or inner[0] not in ".$@[":
        raise JsonPathError(f"{path!r} is not a path like .metadata.name")
    steps = parse_path(inner)

    def key(obj: Any) -> tuple[int, Any]:
        found = evaluate(steps, obj)
        if not found or found[0] is None:
            return (0, 0)
        first = found[0]
        if isinstance(first, bool):
            return (1, int(first))
        if isinstance(first, int | float):
            return (1, first)
        if isinstance(first, str):
            from muster.api.quantity import Quantity, QuantityError  # fractions and decimal: when needed

            try:
                return (1, Quantity.parse(first).value)
            except (QuantityError, ValueError, TypeError, AttributeError):
                return (2, first)
        return (2, json.dumps(first, sort_keys=True))

    return key


def _closing(text: str, start: int) -> int:
    depth, quote = 0, ""
    for j in range(start, len(text)):
        ch = text[j]
        if quote:
            if ch == quote and text[j - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return j
    raise JsonPathError(f"{text!r}: unclosed '[' at {start}")


def _bracket(inner: str, text: str) -> _Step:
    inner = inner.strip()
    if inner == "*":
        return ("all",)
    if inner.startswith("?(") and inner.endswith(")"):
        m = _FILTER.match(inner[2:-1])
        if not m:
            raise JsonPathError(f'{text!r}: filter [{inner}] is not like [?(@.field=="value")]')
        value = m.group("value")
        return ("filter", parse_path(m.group("path")), m.group("op"), _literal(value) if value else None)
    if inner[:1] in ("'", '"') and inner[-1:] == inner[:1] and len(inner) >= 2:
        return ("key", inner[1:-1])
    if ":" in inner:
        parts = inner.split(":")
        try:
            bounds = [int(p) if p.strip() else None for p in parts[:2]]
        except ValueError:
            raise JsonPathError(f"{text!r}: [{inner}] is not a slice like [1:3]") from None
        return ("slice", bounds[0], bounds[1] if len(bounds) > 1 else None)
    try:
        return ("index", int(inner))
    except ValueError:
        pass
    if _IDENT.fullmatch(inner):
        return ("key", inner)
    raise JsonPathError(f"{text!r}: [{inner}] is not an index, a slice, a quoted key or a filter")


def _literal(text: str) -> Any:
    text = text.strip()
    if text[:1] in ("'", '"') and text[-1:] == text[:1] and len(text) >= 2:
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        return text


def _apply(step: _Step, value: Any) -> list[Any]:
    kind = step[0]
    if kind == "key":
        return [value[step[1]]] if isinstance(value, dict) and step[1] in value else []
    if kind == "all":
        if isinstance(value, dict):
            return list(value.values())
        return list(value) if isinstance(value, list) else []
    if kind == "index":
        if isinstance(value, list) and -len(value) <= step[1] < len(value):
            return [value[step[1]]]
        return []
    if kind == "slice":
        return list(value[step[1] : step[2]]) if isinstance(value, list) else []
    if kind == "deep":
        return list(_deep(value, step[1]))
    _, path, op, wanted = step
    items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    return [item for item in items if _matches(evaluate(path, item), op, wanted)]


def _deep(value: Any, name: str) -> Iterator[Any]:
    if isinstance(value, dict):
        if name in value:
            yield value[name]
        for child in value.values():
            yield from _deep(child, name)
    elif isinstance(value, list):
        for child in value:
            yield from _deep(child, name)


def _matches(found: list[Any], op: str | None, wanted: Any) -> bool:
    if op is None:
        return bool(found)
    for got in found:
        try:
            if (
                (op == "==" and got == wanted)
                or (op == "!=" and got != wanted)
                or (op == "<" and got < wanted)
                or (op == "<=" and got <= wanted)
                or (op == ">" and got > wanted)
                or (op == ">=" and got >= wanted)
            ):
                return True
        except TypeError:
            continue
    return False


# -- templates -----------------------------------------------------------------------------------


@dataclass
class _Node:
    kind: str  # "text", "path", "range"
    text: str = ""
    steps: list[_Step] = field(default_factory=list)
    body: list[_Node] = field(default_factory=list)


class Template:
    """A parsed ``-o jsonpath=`` template; :meth:`render` applies it to an object."""

    def __init__(self, source: str) -> None:
        self.source = source
        text = source
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]  # quotes a shell did not strip
        nodes, rest = self._parse(text, 0, top=True)
        assert rest == len(text)
        self.nodes = nodes

    def render(self, value: Any) -> str:
        return "".join(self._render(self.nodes, value))

    def _parse(self, text: str, i: int, top: bool) -> tuple[list[_Node], int]:
        nodes: list[_Node] = []
        while i < len(text):
            start = text.find("{", i)
            if start < 0:
                nodes.append(_Node("text", text[i:]))
                return nodes, len(text)
            if start > i:
                nodes.append(_Node("text", text[i:start]))
            end = _action_end(text, start)
            if end < 0:
                raise JsonPathError(f"jsonpath template {self.source!r}: unclosed '{{' at {start}")
            action = text[start + 1 : end].strip()
            i = end + 1
            if action == "end":
                if top:
                    raise JsonPathError(f"jsonpath template {self.source!r}: {{end}} without {{range}}")
                return nodes, i
            if action.startswith("range ") or action == "range":
                steps = parse_path(action[len("range") :].strip())
                body, i = self._parse(text, i, top=False)
                nodes.append(_Node("range", steps=steps, body=body))
                continue
            if action[:1] == '"':
                nodes.append(_Node("text", _unescape(action, self.source)))
                continue
            try:
                nodes.append(_Node("path", steps=parse_path(action)))
            except JsonPathError as exc:
                raise JsonPathError(f"jsonpath template {self.source!r}: {exc}") from None
        if not top:
            raise JsonPathError(f"jsonpath template {self.source!r}: {{range}} without {{end}}")
        return nodes, i

    def _render(self, nodes: list[_Node], value: Any) -> Iterator[str]:
        for node in nodes:
            if node.kind == "text":
                yield node.text
            elif node.kind == "path":
                yield " ".join(_show(v) for v in evaluate(node.steps, value))
            else:
                for item in evaluate(node.steps, value):
                    yield from self._render(node.body, item)


def _action_end(text: str, start: int) -> int:
    quote = False
    for j in range(start + 1, len(text)):
        ch = text[j]
        if ch == '"' and text[j - 1] != "\\":
            quote = not quote
        elif ch == "}" and not quote:
            return j
    return -1


def _unescape(action: str, source: str) -> str:
    if len(action) < 2 or not action.endswith('"'):
        raise JsonPathError(f"jsonpath template {source!r}: unclosed string {action}")
    try:
        return str(json.loads(action))
    except ValueError:
        raise JsonPathError(f"jsonpath template {source!r}: bad string {action}") from None


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))
