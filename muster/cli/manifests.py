"""Reading ``-f FILE|DIR|-``: multi-document YAML or JSON, each document remembered with
its source and 0-based index, so every error can say ``job.yaml[1] spec...: rule``.

A directory contributes its ``*.yaml``, ``*.yml`` and ``*.json`` files in name order. A
JSON file may hold one object or a list of them; a ``kind: List`` document contributes its
``items``. Empty YAML documents (a trailing ``---``) are skipped but keep their index.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from muster.api.errors import FieldError
from muster.cli.common import BadInput

__all__ = ["Document", "error_line", "load_documents", "locate"]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Document:
    source: str  # the path as the user gave it (or joined under their directory), "-" for stdin
    index: int  # 0-based position among the source's documents
    body: Any

    @property
    def where(self) -> str:
        return f"{self.source}[{self.index}]"


def load_documents(paths: Iterable[str], stdin: IO[str] | None = None) -> list[Document]:
    """Every document of every path; raises BadInput listing every unreadable one."""
    docs: list[Document] = []
    problems: list[str] = []
    for path in paths:
        for source, text in _sources(path, stdin or sys.stdin, problems):
            docs += _parse(source, text, problems)
    if problems:
        raise BadInput(problems)
    if not docs:
        raise BadInput([f"error: no documents in {', '.join(paths)}"])
    return docs


def locate(docs: list[Document], index: int) -> str:
    """``file[i]`` of the ``index``-th document sent (the server reports that index)."""
    return docs[index].where if 0 <= index < len(docs) else f"document {index}"


def error_line(where: str, error: FieldError) -> str:
    """``job.yaml[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0``."""
    return f"{where} {error}" if error.path else f"{where}: {error}"


def _sources(path: str, stdin: IO[str], problems: list[str]) -> list[tuple[str, str]]:
    if path == "-":
        return [("-", stdin.read())]
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in _SUFFIXES)
        if not files:
            problems.append(f"{path}: error: no .yaml, .yml or .json files in this directory")
        return [pair for f in files for pair in _sources(str(f), stdin, problems)]
    try:
        return [(path, p.read_text())]
    except FileNotFoundError:
        problems.append(f"{path}: error: no such file or directory")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{path}: error: cannot read: {exc}")
    return []


def _parse(source: str, text: str, problems: list[str]) -> list[Document]:
    if source.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(
                f"{source}[0]: JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            )
            return []
        items = data if isinstance(data, list) else [data]
        return [Document(source, i, body) for i, body in enumerate(_expand_lists(items))]
    docs: list[Document] = []
    index = 0
    loader = yaml.safe_load_all(text)
    while True:
        try:
            body = next(loader)
        except StopIteration:
            break
        except yaml.YAMLError as exc:
            problems.append(f"{source}[{index}]: YAML syntax error{_mark(exc)}: {_problem(exc)}")
            break
        for item in _expand_lists([body]):
            if item is not None:
                docs.append(Document(source, index, item))
        index += 1
    return docs


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
