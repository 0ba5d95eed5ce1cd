"""Shared helpers for the api tests: validate a document and read its errors and warnings."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api.errors import InvalidObject
from muster.api.registry import validate


def errors_of(doc: dict[str, Any]) -> list[str]:
    """The error lines validation reports for ``doc`` (which must be invalid)."""
    with pytest.raises(InvalidObject) as info:
        validate(doc)
    return [str(e) for e in info.value.errors]


def paths_of(doc: dict[str, Any]) -> list[str]:
    """The field paths of the errors validation reports for ``doc``."""
    with pytest.raises(InvalidObject) as info:
        validate(doc)
    return [e.path for e in info.value.errors]


def obj(kind: str, name: str = "x", **top: Any) -> dict[str, Any]:
    """A native document of ``kind`` with ``top`` as its top-level fields."""
    return {"apiVersion": "muster.dev/v1", "kind": kind, "metadata": {"name": name}, **top}
