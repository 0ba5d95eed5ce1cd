"""Where the traces are, and reading their CSV files with errors that name file, row and column.

The trace directory is, in order: the ``--trace-dir`` option, ``MUSTER_TRACES_DIR``,
``../shared/traces`` next to the repository root when it exists (the full releases), else
the repository's own ``traces/`` folder, which holds gzipped copies of the files the README's
commands read (traces/README.md gives their origin and licence). Each trace keeps its own
folder inside it (``alibaba-gpu-v2023/csv/``, ``philly/``); a file may be stored as
``NAME.csv`` or ``NAME.csv.gz``. A loader asks :func:`read_csv` for the columns it needs and
converts them with :func:`column`; every bad value becomes a
:class:`~muster.api.errors.FieldError` whose path is ``file:line column`` (lines count the
header as line 1, as an editor does), and nothing is returned from a bad file.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from muster.api.errors import FieldError, InvalidObject

__all__ = [
    "BUNDLED_TRACES",
    "REPO_ROOT",
    "SHARED_TRACES",
    "CsvTable",
    "TraceNotFound",
    "column",
    "open_text",
    "read_csv",
    "resolve",
    "trace_dir",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "traces"
BUNDLED_TRACES = REPO_ROOT / "traces"
T = TypeVar("T")
_MAX_ERRORS = 20  # a broken file reports this many problems, not one per row


class TraceNotFound(FileNotFoundError):
    """A trace file or directory that is not where it was looked for; the message says how
    to point at it."""


def trace_dir(override: str | Path | None = None) -> Path:
    """The traces root: ``override``, else ``MUSTER_TRACES_DIR``, else ``../shared/traces``
    when it exists, else the repository's bundled ``traces/``."""
    if override:
        root = Path(override)
        how = "--trace-dir"
    elif os.environ.get("MUSTER_TRACES_DIR"):
        root = Path(os.environ["MUSTER_TRACES_DIR"])
        how = "MUSTER_TRACES_DIR"
    elif SHARED_TRACES.is_dir():
        root, how = SHARED_TRACES, "../shared/traces"
    else:
        root, how = BUNDLED_TRACES, "the repository's traces/ folder"
    if not root.is_dir():
        raise TraceNotFound(
            f"trace directory {root} (from {how}) does not exist; "
            "pass --trace-dir DIR or set MUSTER_TRACES_DIR to the folder holding philly/ "
            "and alibaba-gpu-v2023/ (docs/simulator.md says where the traces come from)"
        )
    return root


def resolve(root: Path, folder: str, name: str, suffix: str = ".csv") -> Path:
    """A trace file given as a path or as a bare name inside ``root/folder`` (``.csv`` optional)."""
    given = Path(name)
    candidates = [given] if given.is_absolute() or given.parent != Path(".") else []
    stem = name if name.endswith((suffix, suffix + ".gz")) else name + suffix
    candidates += [root / folder / stem, Path(stem)]
    for path in candidates:
        for found in (path, path.with_name(path.name + ".gz")):
            if found.is_file():
                return found
    raise TraceNotFound(
        f"{name}: no such trace file (looked in {root / folder}); give a path or a file name there"
    )


def open_text(path: Path) -> IO[str]:
    """``path`` opened as text for the csv module, decompressing a ``.gz`` file."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path), newline="")
    return open(path, newline="")


class CsvTable:
    """The rows of one CSV file as strings, with the file name for error paths."""

    __slots__ = ("header", "path", "rows")

    def __init__(self, path: Path, header: list[str], rows: list[list[str]]) -> None:
        self.path = path
        self.header = header
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def index(self, name: str) -> int:
        return self.header.index(name)


def read_csv(path: Path, required: Sequence[str]) -> CsvTable:
    """Read ``path``; every name in ``required`` must be a column and every row as wide as
    the header. Raises :class:`InvalidObject` listing what is wrong."""
    with open_text(path) as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        rows = [row for row in reader if row]  # a blank line (often the last) is no row
    errors = [
        FieldError(f"{path.name}:1", f"must have a column {name!r}", header, "the header lists the columns")
        for name in required
        if name not in header
    ]
    for i, row in enumerate(rows):
        if len(row) != len(header) and len(errors) < _MAX_ERRORS:
            errors.append(FieldError(f"{path.name}:{i + 2}", f"must have {len(header)} fields", len(row)))
    if errors:
        raise InvalidObject(errors, kind="trace", name=path.name)
    return CsvTable(path, header, rows)


def column(
    table: CsvTable,
    name: str,
    convert: Callable[[str], T],
    rule: str,
    check: Callable[[T], bool] | None = None,
    errors: list[FieldError] | None = None,
) -> list[T]:
    """Column ``name`` converted by ``convert``; a value that fails to convert or ``check``
    adds an error (``rule`` says what was expected). With ``errors`` given the caller
    collects problems across columns and raises once; otherwise this raises."""
    out: list[T] = []
    own = errors is None
    errs: list[FieldError] = [] if errors is None else errors
    col = table.index(name)
    for i, row in enumerate(table.rows):
        raw = row[col].strip()
        try:
            value = convert(raw)
            ok = check is None or check(value)
        except ValueError:
            ok = False
        if not ok:
            if len(errs) < _MAX_ERRORS:
                errs.append(FieldError(f"{table.path.name}:{i + 2} {name}", rule, raw))
            continue
        out.append(value)
    if own and errs:
        raise InvalidObject(errs, kind="trace", name=table.path.name)
    return out
