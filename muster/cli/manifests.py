"""Reading ``-f FILE|DIR|-``: the texts of the files (a directory contributes its ``*.yaml``,
``*.yml`` and ``*.json`` files in name order; ``-`` is stdin), parsed here for ``delete -f``
and sent as they are by ``apply``, whose server parses them (:mod:`muster.api.manifests`)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from muster.cli.common import BadInput

if TYPE_CHECKING:
    from muster.api.manifests import Document

__all__ = ["load_documents", "read_sources"]

_SUFFIXES = (".yaml", ".yml", ".json")


def read_sources(paths: Iterable[str], stdin: IO[str] | None = None) -> list[tuple[str, str]]:
    """``(name, text)`` of every file under ``paths``; raises BadInput listing every unreadable
    one."""
    problems: list[str] = []
    sources = [pair for path in paths for pair in _sources(path, stdin or sys.stdin, problems)]
    if problems:
        raise BadInput(problems)
    return sources


def load_documents(paths: Iterable[str], stdin: IO[str] | None = None) -> list[Document]:
    """Every document of every path; raises BadInput listing every unreadable one."""
    from muster.api.manifests import parse_sources  # YAML's parser: only for the verbs parsing here

    paths = list(paths)
    docs, problems = parse_sources(read_sources(paths, stdin))
    if problems:
        raise BadInput([str(p) for p in problems])
    if not docs:
        raise BadInput([f"error: no documents in {', '.join(paths)}"])
    return docs


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
