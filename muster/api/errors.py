"""Validation errors that name the field path and the rule, and suggest the fix.

Every layer that rejects user input raises :class:`InvalidObject`; the CLI prints each
:class:`FieldError` as ``file[doc] path: rule, got value`` and exits with status 2, and the
server answers 422 with the same list as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI reads FieldErrors without loading pydantic
    from pydantic import ValidationError

__all__ = ["FieldError", "InvalidObject", "child_path", "error_line", "errors_from_pydantic", "format_path"]

_MISSING = object()


@dataclass(frozen=True)
class FieldError:
    """One broken rule: where (dotted path), what rule, the offending value, and a hint."""

    path: str
    rule: str
    got: Any = _MISSING
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.path}: {self.rule}" if self.path else self.rule
        if self.got is not _MISSING:
            text += f", got {_short(self.got)}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "rule": self.rule}
        if self.got is not _MISSING:
            out["got"] = self.got if _jsonable(self.got) else repr(self.got)
        if self.hint:
            out["hint"] = self.hint
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FieldError:
        return cls(
            path=data.get("path", ""),
            rule=data.get("rule", ""),
            got=data.get("got", _MISSING),
            hint=data.get("hint", ""),
        )


def error_line(where: str, error: FieldError) -> str:
    """``job.yaml[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0``: an error of a
    document, after where the document came from."""
    return f"{where} {error}" if error.path else f"{where}: {error}"


@dataclass
class InvalidObject(ValueError):
    """An object (or document) that breaks one or more rules. Nothing was stored."""

    errors: list[FieldError] = field(default_factory=list)
    kind: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        return "; ".join(str(e) for e in self.errors) or "invalid object"

    def with_prefix(self, prefix: str) -> InvalidObject:
        """The same errors with ``prefix`` prepended to every path."""
        return InvalidObject(
            [FieldError(_join(prefix, e.path), e.rule, e.got, e.hint) for e in self.errors],
            self.kind,
            self.name,
        )


def format_path(loc: Sequence[str | int]) -> str:
    """``("spec", "replicaSpecs", "Worker", "replicas")`` -> ``spec.replicaSpecs.Worker.replicas``;
    list indices print as ``[0]`` and map keys that hold a dot or a slash as ``[nvidia.com/gpu]``,
    as Kubernetes prints them."""
    return child_path("", *loc)


def child_path(path: str, *parts: str | int) -> str:
    """The path of ``parts`` (field names, map keys, list indices) below ``path``."""
    for part in parts:
        if isinstance(part, int) or _needs_brackets(part):
            path = f"{path}[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def errors_from_pydantic(exc: ValidationError, prefix: str = "") -> list[FieldError]:
    """Translate pydantic's errors into FieldErrors with Kubernetes-style paths and rules."""
    out: list[FieldError] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err.get("loc", ()) if not _is_union_tag(p)]
        path = _join(prefix, format_path(loc))
        etype = err.get("type", "")
        got = err.get("input", _MISSING)
        ctx = err.get("ctx") or {}
        if etype == "extra_forbidden":
            out.append(FieldError(path, "unknown field", hint=_unknown_hint(path)))
        elif etype == "missing":
            out.append(FieldError(path, "required field is missing"))
        elif etype in _BOUNDS:
            bound = next(iter(ctx.values()), "?")
            out.append(FieldError(path, f"must be {_BOUNDS[etype]} {bound}", got))
        elif etype in ("value_error", "assertion_error"):
            msg = _plain_msg(str(ctx.get("error", err.get("msg", ""))))
            # Messages such as "'16GG' is not a quantity: ..." already show the value (or, for
            # a map, the offending key).
            parts = [*got, *got.values()] if isinstance(got, dict) else [got]
            shown = any(repr(v) in msg for v in parts)
            out.append(FieldError(path, msg, _MISSING if shown else got))
        elif etype in ("literal_error", "enum"):
            expected = ctx.get("expected", "")
            out.append(FieldError(path, f"must be one of {expected}", got))
        elif etype in _TYPE_RULES:
            out.append(FieldError(path, _TYPE_RULES[etype], got))
        elif etype in ("too_short", "too_long"):
            size = ctx.get("actual_length")
            if size is None and hasattr(got, "__len__"):
                size = len(got)
            out.append(FieldError(path, _length_rule(etype, ctx), size if size else _MISSING))
        else:
            out.append(FieldError(path, _plain_msg(err.get("msg", etype)), got))
    return _dedupe(out)


_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}

_TYPE_RULES = {
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping (key: value pairs)",
    "model_type": "must be a mapping (key: value pairs)",
    "model_attributes_type": "must be a mapping (key: value pairs)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
}


def _length_rule(etype: str, ctx: dict[str, Any]) -> str:
    if etype == "too_short":
        n = ctx.get("min_length", 1)
        return "must not be empty" if n == 1 else f"must have at least {n} items"
    return f"must have at most {ctx.get('max_length', '?')} items"


def _dedupe(errors: list[FieldError]) -> list[FieldError]:
    # A value that fails every member of a union reports once per member; keep the first.
    seen: set[tuple[str, str]] = set()
    out: list[FieldError] = []
    for e in errors:
        if (e.path, e.rule) not in seen:
            seen.add((e.path, e.rule))
            out.append(e)
    return out


def _needs_brackets(part: str) -> bool:
    return "." in part or "/" in part or " " in part


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _is_union_tag(part: str | int) -> bool:
    # pydantic inserts the union member name (e.g. "int", "function-after[...]") into locs,
    # and "[key]" after a map key whose key (not value) is invalid.
    if not isinstance(part, str):
        return False
    if part == "[key]":
        return True
    if part.endswith("]") and "[" in part and not part.startswith("["):
        return True
    return part in ("int", "str", "float", "bool", "list", "dict", "none", "nullable")


def _plain_msg(msg: str) -> str:
    msg = msg.removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:] if msg else msg


def _unknown_hint(path: str) -> str:
    return "remove it, or check its spelling and indentation" if path else ""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), list, dict))


def collect(errors: Iterable[FieldError], kind: str = "", name: str = "") -> None:
    """Raise InvalidObject when ``errors`` is not empty."""
    errs = list(errors)
    if errs:
        raise InvalidObject(errs, kind, name)
