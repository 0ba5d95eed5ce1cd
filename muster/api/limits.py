"""What any document must be before its kind's rules apply: plain JSON a client in any language
reads back as it was written.

* Nested at most :data:`MAX_DEPTH` levels: a manifest needs about fifteen, and a deeper one
  would take Python's recursion (copying, validating, encoding) past its limit.
* Numbers are finite: Python's JSON parser takes ``NaN`` and ``Infinity``, which JSON has not,
  and which would be stored as something else (``null``) or not read back at all.
* Integers fit in 64 bits, as kube-apiserver's (Go) decoder requires: a larger one is not an
  integer that Go, Java or JavaScript clients can hold.
* Strings, keys included, are Unicode text: Python's JSON parser turns an escaped lone UTF-16
  surrogate (``"\ud800"``) into a string that no UTF-8 text can hold, so it could be neither
  stored nor sent back.
"""

from __future__ import annotations

import math
from typing import Any

from muster.api.errors import FieldError, format_path

__all__ = ["MAX_DEPTH", "MAX_INT", "MIN_INT", "document_errors", "shown"]

MAX_DEPTH = 64
MAX_INT = 2**63 - 1
MIN_INT = -(2**63)


def document_errors(doc: Any, limit: int = 20) -> list[FieldError]:
    """Where ``doc`` is not plain JSON of bounded depth (at most ``limit`` errors); walked with
    a stack of its own, so a deep document cannot exhaust Python's."""
    errors: list[FieldError] = []
    # Each value carries where it is as a chain (parent's chain, its key or index): the path
    # is spelled out only for an error, not for every value of every valid document.
    stack: list[tuple[Any, _At, int]] = [(doc, None, 0)]
    while stack and len(errors) < limit:
        value, at, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                errors.append(FieldError(_path(at), f"is nested more than {MAX_DEPTH} levels deep"))
                continue
            if isinstance(value, dict):
                children = []
                for key, item in value.items():
                    name = key if isinstance(key, str) else str(key)
                    if not _is_text(name):
                        name = shown(name)
                        errors.append(FieldError(_path((at, name)), _NOT_TEXT))
                    children.append((item, (at, name), depth + 1))
            else:
                children = [(item, (at, i), depth + 1) for i, item in enumerate(value)]
            stack.extend(reversed(children))  # popped in document order
        elif isinstance(value, str):
            if not _is_text(value):
                errors.append(FieldError(_path(at), _NOT_TEXT))
        elif isinstance(value, float):
            if not math.isfinite(value):
                errors.append(FieldError(_path(at), "must be a finite number (JSON has no NaN or Infinity)"))
        elif isinstance(value, int) and not MIN_INT <= value <= MAX_INT:  # bool is within
            errors.append(
                FieldError(_path(at), f"must fit in a 64-bit integer ({MIN_INT} to {MAX_INT})", value)
            )
    return errors[:limit]


_At = tuple[Any, str | int] | None  # (the parent's _At, this value's key or index); None: the root


def _path(at: _At) -> str:
    parts: list[str | int] = []
    while at is not None:
        at, part = at
        parts.append(part)
    return format_path(parts[::-1])


_NOT_TEXT = (
    "must be Unicode text: it holds a lone UTF-16 surrogate escape (such as \\ud800), which no "
    "UTF-8 text can hold; write the character itself, or both halves of its surrogate pair"
)


def _is_text(value: str) -> bool:
    if value.isascii():  # nearly every string: no encoding needed to know
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def shown(value: str) -> str:
    """``value`` as text an error message can carry (a lone surrogate written as its escape)."""
    return value if _is_text(value) else value.encode("utf-8", "backslashreplace").decode()
