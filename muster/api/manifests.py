"""Parsing manifests: multi-document YAML or JSON texts, each document remembered with its
source and 0-based index, so every error can say ``job.yaml[1] spec...: rule``.

Shared by the CLI (``muster delete -f``) and the API server, which parses what ``muster apply``
sends as text (so the CLI never loads a YAML parser: docs/cli.md, "Start-up"). A source whose
name ends in ``.json`` is JSON and may hold one object or a list of them; any other is YAML. A
``kind: List`` document contributes its ``items``. Empty YAML documents (a trailing ``---``)
are skipped but keep their index.

A mapping that names a key twice is an error (as kubectl's strict decoding): YAML and JSON
parsers keep the last value silently, so the object applied would not be the one the file
seems to describe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from muster.api.errors import FieldError, error_line, format_path

__all__ = ["Document", "Problem", "parse_sources"]

_DUPLICATE = "duplicate key{lines}; a mapping may name each key once"


@dataclass(frozen=True)
class Document:
    source: str  # the path as the user gave it (or joined under their directory), "-" for stdin
    index: int  # 0-based position among the source's documents
    body: Any

    @property
    def where(self) -> str:
        return f"{self.source}[{self.index}]"


@dataclass(frozen=True)
class Problem:
    """A document that could not be read: where (``job.yaml[1]``) and what (a path, if any)."""

    where: str
    error: FieldError

    def __str__(self) -> str:
        return error_line(self.where, self.error)


def parse_sources(sources: Iterable[tuple[str, str]]) -> tuple[list[Document], list[Problem]]:
    """Every document of every ``(name, text)`` source, and every problem found (syntax errors,
    duplicate keys), in the order read; a source with a syntax error contributes the documents
    before it."""
    docs: list[Document] = []
    problems: list[Problem] = []
    for source, text in sources:
        docs += _parse(source, text, problems)
    return docs, problems


def _parse(source: str, text: str, problems: list[Problem]) -> list[Document]:
    if source.endswith(".json"):
        try:
            data = json.loads(text, object_pairs_hook=_JsonObject)
        except json.JSONDecodeError as exc:
            rule = f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            problems.append(Problem(f"{source}[0]", FieldError("", rule)))
            return []
        items = data if isinstance(data, list) else [data]
        docs = [Document(source, i, body) for i, body in enumerate(_expand_lists(items))]
        for doc in docs:
            problems += [
                Problem(doc.where, FieldError(path, _DUPLICATE.format(lines="")))
                for path in _json_duplicates(doc.body)
            ]
        return docs
    docs: list[Document] = []
    index = 0
    loader = yaml.SafeLoader(text)
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                node = loader.get_node()
                duplicates = list(_yaml_duplicates(node, ()))
                body = loader.construct_document(node)
            except yaml.YAMLError as exc:
                rule = f"YAML syntax error{_mark(exc)}: {_problem(exc)}"
                problems.append(Problem(f"{source}[{index}]", FieldError("", rule)))
                break
            problems += [
                Problem(f"{source}[{index}]", FieldError(path, _DUPLICATE.format(lines=lines)))
                for path, lines in duplicates
            ]
            for item in _expand_lists([body]):
                if item is not None:
                    docs.append(Document(source, index, item))
            index += 1
    finally:
        loader.dispose()
    return docs


def _yaml_duplicates(node: yaml.Node, path: tuple[str | int, ...]) -> Iterator[tuple[str, str]]:
    """``(path, " (lines A and B)")`` of every key a mapping under ``node`` names twice."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                lines = f" (lines {first.start_mark.line + 1} and {key.start_mark.line + 1})"
                yield format_path((*path, key.value)), lines
            yield from _yaml_duplicates(value, (*path, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _yaml_duplicates(item, (*path, i))


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        counted: dict[str, int] = {}
        for key, _ in pairs:
            counted[key] = counted.get(key, 0) + 1
        self.duplicates = [key for key, n in counted.items() if n > 1]


def _json_duplicates(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[str]:
    if isinstance(value, dict):
        for key in getattr(value, "duplicates", ()):
            yield format_path((*path, key))
        for key, child in value.items():
            yield from _json_duplicates(child, (*path, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _json_duplicates(child, (*path, i))


def _expand_lists(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("kind") == "List" and isinstance(item.get("items"), list):
            out += item["items"]
        else:
            out.append(item)
    return out


def _mark(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem:
        return f"{problem} ({context})" if context else str(problem)
    return str(exc).splitlines()[0]
