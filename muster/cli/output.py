"""Printing objects: aligned tables (the columns of :mod:`muster.cli.columns`), YAML, JSON
or kind/name. Tables are plain aligned text like kubectl's, so they paste and grep well;
in watch mode later rows keep the widths of the first ones."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from muster.cli.app import console
from muster.cli.columns import Column, columns_for, row

__all__ = ["Output", "Table", "print_objects", "print_rows", "print_tasks", "print_value", "to_yaml"]


class Output(StrEnum):
    table = "table"
    wide = "wide"
    yaml = "yaml"
    json = "json"
    name = "name"


def to_yaml(value: Any) -> str:
    import yaml  # here: only -o yaml pays for it

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


class Table:
    """Rows of one kind, printed as aligned text."""

    def __init__(self, kind: str, wide: bool, namespace_column: bool) -> None:
        self.columns: list[Column] = columns_for(kind, wide=wide, namespace_column=namespace_column)
        self.widths = [len(c.header) for c in self.columns]

    def print(self, objects: list[dict[str, Any]], header: bool = True) -> None:
        rows = [row(o, self.columns) for o in objects]
        for cells in rows:
            self.widths = [max(w, len(c)) for w, c in zip(self.widths, cells, strict=True)]
        if header:
            console.print(self._line([c.header for c in self.columns]), style="bold", markup=False)
        for cells in rows:
            console.print(self._line(cells), markup=False)

    def _line(self, cells: list[str]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, self.widths, strict=True)).rstrip()


def print_objects(
    kind: str, objects: list[dict[str, Any]], output: Output, single: bool, namespaces: bool
) -> None:
    """Print ``objects`` of ``kind``; ``single`` prints the object itself, not a List."""
    if output in (Output.table, Output.wide):
        if not objects:
            console.print("No resources found.", markup=False)
            return
        Table(kind, output == Output.wide, namespaces).print(objects)
        return
    if output == Output.name:
        for obj in objects:
            console.print(f"{kind.lower()}/{obj['metadata']['name']}", markup=False)
        return
    value: Any = objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": objects}
    print_value(value, output)


def print_value(value: Any, output: Output) -> None:
    text = json.dumps(value, indent=2) if output == Output.json else to_yaml(value).rstrip("\n")
    console.print(text, markup=False, soft_wrap=True)


def print_rows(headers: list[str], rows: list[list[str]], indent: str = "") -> None:
    """Aligned columns under a header, for tables that are not one kind's objects."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for n, cells in enumerate([headers, *rows]):
        line = indent + "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        console.print(line, markup=False, highlight=False, style="bold" if n == 0 and not indent else None)


def print_tasks(wf: dict[str, Any], wide: bool = False, indent: str = "") -> None:
    """A Workflow's tasks: phase, duration, attempts, cache hit or miss and key."""
    from muster.sdk.status import HEADERS, WIDE_HEADERS, task_rows

    rows = [r.cells(wide) for r in task_rows(wf)]
    print_rows(WIDE_HEADERS if wide else HEADERS, rows, indent)
