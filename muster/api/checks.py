"""Cross-field rules and warnings, run over a validated model tree.

Pydantic checks each field's type and bounds; rules that relate several fields (Master has
exactly one replica, a flavor lists the group's resources in order, a DAG has no cycle) are
written as a ``field_rules(self, path) -> list[FieldError]`` method on the model they concern,
and warnings as ``field_warnings(self, path) -> list[FieldError]`` (a warning is a FieldError
that does not reject the object). :func:`check` walks the tree once,
gives every model its path from the document root, and collects both, plus a warning for
each field declared with :func:`muster.api.common.unhonoured` that the document sets.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from muster.api.errors import FieldError, child_path

__all__ = ["check", "duplicate_errors", "walk"]


def check(model: BaseModel, path: str = "") -> tuple[list[FieldError], list[FieldError]]:
    """All rule violations and warnings in ``model`` and everything below it."""
    errors: list[FieldError] = []
    warnings: list[FieldError] = []
    for node, where in walk(model, path):
        # Looked up on the class once: a model without the method would otherwise go through
        # pydantic's attribute fallback, which raises and catches, at every node.
        known = _fields(type(node))
        if known.rules is not None:
            errors.extend(known.rules(node, where))
        if known.notes is not None:
            warnings.extend(known.notes(node, where))
        if known.unhonoured:
            warnings.extend(_unhonoured_warnings(node, where, known.unhonoured))
    return errors, warnings


def duplicate_errors(
    values: Sequence[Hashable], path: str, field: str, rule: str = "duplicate name"
) -> list[FieldError]:
    """An error at ``path[i].field`` for every value that already appeared earlier in the list."""
    seen: set[Hashable] = set()
    errors: list[FieldError] = []
    for i, value in enumerate(values):
        if value in seen:
            errors.append(FieldError(child_path(path, i, field), rule, value))
        seen.add(value)
    return errors


def walk(model: BaseModel, path: str = "") -> Iterator[tuple[BaseModel, str]]:
    """Every model in the tree with its path from the root, parents before children."""
    # A stack of its own rather than nested generators: each level of ``yield from`` would pass
    # every model below it up through every generator above it.
    out: list[tuple[BaseModel, str]] = []
    stack: list[tuple[Any, str]] = [(model, path)]
    while stack:
        value, where = stack.pop()
        # A scalar holds no model: its path is not worth building (most values are scalars).
        if isinstance(value, BaseModel):
            out.append((value, where))
            children = [
                (item, child_path(where, shown))
                for name, shown in _fields(type(value)).names
                if (item := getattr(value, name)) and isinstance(item, _CONTAINERS)
            ]
        elif isinstance(value, list):
            children = [
                (item, child_path(where, i))
                for i, item in enumerate(value)
                if item and isinstance(item, _CONTAINERS)
            ]
        else:
            children = [
                (item, child_path(where, str(key)))
                for key, item in value.items()
                if item and isinstance(item, _CONTAINERS)
            ]
        stack.extend(reversed(children))  # popped in document order
    return iter(out)


_CONTAINERS = (BaseModel, list, dict)


@dataclass(frozen=True, slots=True)
class _Fields:
    """What the walk needs of a model class: each field's attribute and shown name, its rule
    and warning methods, and the fields declared unhonoured with their note."""

    names: tuple[tuple[str, str], ...]
    rules: Callable[[Any, str], list[FieldError]] | None
    notes: Callable[[Any, str], list[FieldError]] | None
    unhonoured: dict[str, tuple[str, str]]


_FIELDS: dict[type[BaseModel], _Fields] = {}


def _fields(cls: type[BaseModel]) -> _Fields:
    found = _FIELDS.get(cls)
    if found is None:
        names = tuple((name, field.alias or name) for name, field in cls.model_fields.items())
        unhonoured = {}
        for name, field in cls.model_fields.items():
            extra = field.json_schema_extra
            if isinstance(extra, dict) and "unhonoured" in extra:
                unhonoured[name] = (field.alias or name, str(extra["unhonoured"]))
        rules, notes = getattr(cls, "field_rules", None), getattr(cls, "field_warnings", None)
        found = _FIELDS[cls] = _Fields(names, rules, notes, unhonoured)
    return found


def _unhonoured_warnings(
    node: BaseModel, path: str, unhonoured: dict[str, tuple[str, str]]
) -> list[FieldError]:
    out: list[FieldError] = []
    for name in node.model_fields_set:
        known = unhonoured.get(name)
        if known is None or getattr(node, name) in (None, False, [], {}):
            continue
        shown, note = known
        out.append(FieldError(child_path(path, shown), f"accepted but not honoured on every runtime: {note}"))
    return sorted(out, key=lambda w: w.path)
