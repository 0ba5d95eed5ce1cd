"""Printing objects: aligned tables (the columns of :mod:`muster.cli.columns`), YAML, JSON,
kind/name or a JSONPath template. Tables are plain aligned text like kubectl's, so they paste
and grep well; in watch mode a row that needs wider columns is printed under a new header
line, so every row stays aligned with the header above it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from muster.cli.app import console
from muster.cli.columns import Column, age, columns_for, row
from muster.cli.jsonpath import JsonPathError, Template

__all__ = [
    "OUTPUT_HELP",
    "Output",
    "OutputFormat",
    "Table",
    "parse_output",
    "print_events",
    "print_field",
    "print_heading",
    "print_objects",
    "print_raw",
    "print_records",
    "print_rows",
    "print_tasks",
    "print_value",
    "to_yaml",
]

OUTPUT_HELP = (
    "Output format: table, wide, yaml, json, name or jsonpath=TEMPLATE "
    "(e.g. jsonpath={.items[*].metadata.name})."
)
# The width a watch reserves for names before the first rows are seen, so that most
# rows arriving later fit under the header.
_WATCH_NAME_WIDTH = 24


class Output(StrEnum):
    table = "table"
    wide = "wide"
    yaml = "yaml"
    json = "json"
    name = "name"
    jsonpath = "jsonpath"


@dataclass(frozen=True)
class OutputFormat:
    """What ``-o`` asked for: a format, and the template of ``jsonpath=``."""

    output: Output
    template: Template | None = None

    @property
    def tabular(self) -> bool:
        return self.output in (Output.table, Output.wide)


def parse_output(text: str) -> OutputFormat:
    """``-o TEXT`` as an :class:`OutputFormat`; ValueError naming the choices otherwise."""
    name, sep, template = text.partition("=")
    if name == "jsonpath":
        if not sep or not template:
            raise ValueError("-o jsonpath needs a template: -o jsonpath={.metadata.name}")
        try:
            return OutputFormat(Output.jsonpath, Template(template))
        except JsonPathError as exc:
            raise ValueError(f"-o {text}: {exc}") from None
    try:
        return OutputFormat(Output(text))
    except ValueError:
        raise ValueError(
            f"-o {text!r} is not a format; choose table, wide, yaml, json, name or jsonpath=TEMPLATE"
        ) from None


def to_yaml(value: Any) -> str:
    import yaml  # here: only -o yaml pays for it

    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


class Table:
    """Rows of one kind, printed as aligned text. With ``watch``, rows come a few at a time:
    names get room from the start, and a row wider than the columns so far widens them and
    is printed under a repeated header."""

    def __init__(self, kind: str, wide: bool, namespace_column: bool, watch: bool = False) -> None:
        self.columns: list[Column] = columns_for(kind, wide=wide, namespace_column=namespace_column)
        self.widths = [len(c.header) for c in self.columns]
        self.watch = watch
        if watch:
            self.widths = [
                max(w, _WATCH_NAME_WIDTH) if c.header == "NAME" else w
                for w, c in zip(self.widths, self.columns, strict=True)
            ]

    def print(self, objects: list[dict[str, Any]], header: bool = True) -> None:
        rows = [row(o, self.columns) for o in objects]
        widened = False
        for cells in rows:
            wider = [max(w, len(c)) for w, c in zip(self.widths, cells, strict=True)]
            widened = widened or wider != self.widths
            self.widths = wider
        if header or (self.watch and widened):
            console.print(self._line([c.header for c in self.columns]), style="bold", markup=False)
        for cells in rows:
            console.print(self._line(cells), markup=False)

    def _line(self, cells: list[str]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, self.widths, strict=True)).rstrip()


def print_objects(
    kind: str,
    objects: list[dict[str, Any]],
    output: Output | OutputFormat,
    single: bool,
    namespaces: bool,
    kind_prefix: bool = False,
) -> None:
    """Print ``objects`` of ``kind``; ``single`` prints the object itself, not a List;
    ``kind_prefix`` names table rows ``kind/name`` (as ``get all`` does)."""
    fmt = output if isinstance(output, OutputFormat) else OutputFormat(output)
    if fmt.tabular:
        if not objects:
            console.print("No resources found.", markup=False)
            return
        if kind_prefix:
            objects = [_prefixed(kind, o) for o in objects]
        Table(kind, fmt.output == Output.wide, namespaces).print(objects)
        return
    if fmt.output == Output.name:
        for obj in objects:
            console.print(f"{kind.lower()}/{obj['metadata']['name']}", markup=False)
        return
    value: Any = objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": objects}
    if fmt.template is not None:
        print_raw(fmt.template.render(value))
        return
    print_value(value, fmt.output)


def _prefixed(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = {**obj["metadata"], "name": f"{kind.lower()}/{obj['metadata']['name']}"}
    return {**obj, "metadata": meta}


def print_raw(text: str) -> None:
    """Text exactly as given (tabs and all, no newline added): a template's output is for scripts."""
    console.file.write(text)
    console.file.flush()


def print_value(value: Any, output: Output) -> None:
    text = json.dumps(value, indent=2) if output == Output.json else to_yaml(value).rstrip("\n")
    console.print(text, markup=False, soft_wrap=True)


def print_field(label: str, value: str) -> None:
    """A ``Label:    value`` line of an explanation (``muster why``); an empty label continues one."""
    console.print(f"{label + ':' if label else '':<10}{value}", markup=False, highlight=False)


def print_heading(title: str) -> None:
    """A section heading of an explanation, after a blank line."""
    console.print()
    console.print(f"{title}:", style="bold", markup=False)


def print_rows(headers: list[str], rows: list[list[str]], indent: str = "") -> None:
    """Aligned columns under a header, for tables that are not one kind's objects."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    for n, cells in enumerate([headers, *rows]):
        line = indent + "   ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        console.print(line, markup=False, highlight=False, style="bold" if n == 0 and not indent else None)


def print_events(events: list[dict[str, Any]], now: datetime, indent: str = "  ") -> None:
    """The events of an explanation (``muster why``): last seen, type, reason, object, message."""
    print_rows(
        ["LAST-SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        [
            [age(e.get("lastTimestamp"), now), e["type"] or "", e["reason"] or "", e["object"], e["message"]]
            for e in events
        ],
        indent,
    )


def print_records(
    list_kind: str,
    items: list[dict[str, Any]],
    output: Output,
    headers: list[str],
    rows: list[list[str]],
    empty: str,
) -> None:
    """Records that are not objects of a kind (tokens, audit records): a ``list_kind`` with
    ``-o json|yaml``, else the ``rows`` under ``headers``, or ``empty`` when there are none."""
    if output in (Output.json, Output.yaml):
        print_value({"apiVersion": "muster.dev/v1", "kind": list_kind, "items": items}, output)
    elif not items:
        console.print(empty, markup=False)
    else:
        print_rows(headers, rows)


def print_tasks(wf: dict[str, Any], wide: bool = False, indent: str = "") -> None:
    """A Workflow's tasks: phase, duration, attempts, cache hit or miss and key."""
    from muster.sdk.status import HEADERS, WIDE_HEADERS, task_rows

    rows = [r.cells(wide) for r in task_rows(wf)]
    print_rows(WIDE_HEADERS if wide else HEADERS, rows, indent)
