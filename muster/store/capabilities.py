"""Optional abilities a Store may have beyond the protocol; callers check with isinstance.

They exist for speed only: a caller must work (more slowly) with a store that lacks them.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from muster.store.base import LabelSelector

__all__ = ["JsonListing"]


@runtime_checkable
class JsonListing(Protocol):
    """Lists objects as the JSON text they are stored as, so a server can send a list
    without decoding and re-encoding every object."""

    def list_json(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> tuple[str, list[str]]:
        """``(resourceVersion, [object JSON, ...])`` with the order and filtering of ``list``."""
        ...
