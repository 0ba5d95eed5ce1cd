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

from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from muster.api.errors import FieldError, child_path

__all__ = ["check", "duplicate_errors", "walk"]


def check(model: BaseModel, path: str = "") -> tuple[list[FieldError], list[FieldError]]:
    """All rule violations and warnings in ``model`` and everything below it."""
    errors: list[FieldError] = []
    warnings: list[FieldError] = []
    for node, where in walk(model, path):
        rules = getattr(node, "field_rules", None)
        if rules is not None:
            errors.extend(rules(where))
        notes = getattr(node, "field_warnings", None)
        if notes is not None:
            warnings.extend(notes(where))
        warnings.extend(_unhonoured_warnings(node, where))
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
    yield model, path
    for name, field in type(model).model_fields.items():
        yield from _walk_value(getattr(model, name), child_path(path, field.alias or name))


def _walk_value(value: Any, path: str) -> Iterator[tuple[BaseModel, str]]:
    if isinstance(value, BaseModel):
        yield from walk(value, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk_value(item, child_path(path, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk_value(item, child_path(path, str(key)))


def _unhonoured_warnings(node: BaseModel, path: str) -> list[FieldError]:
    out: list[FieldError] = []
    fields = type(node).model_fields
    for name in node.model_fields_set:
        field = fields.get(name)
        extra = field.json_schema_extra if field is not None else None
        if not isinstance(extra, dict) or "unhonoured" not in extra:
            continue
        if getattr(node, name) in (None, False, [], {}):
            continue
        where = child_path(path, field.alias or name)  # type: ignore[union-attr]
        out.append(FieldError(where, f"accepted but not honoured on every runtime: {extra['unhonoured']}"))
    return sorted(out, key=lambda w: w.path)
