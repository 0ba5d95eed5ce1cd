"""Optional abilities a Store may have beyond the protocol; callers check with isinstance.

They exist for speed, or for records that are not objects (the audit log): a caller must work
with a store that lacks them (more slowly, or without that record).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from muster.store.base import LabelSelector

if TYPE_CHECKING:
    from muster.store.audit import AuditQuery

__all__ = ["AuditLog", "JsonListing"]


@runtime_checkable
class JsonListing(Protocol):
    """Lists objects as the JSON text they are stored as, so a server can send a list
    without decoding and re-encoding every object."""

    def list_json(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> tuple[str, list[str]]:
        """``(resourceVersion, [object JSON, ...])`` with the order and filtering of ``list``."""
        ...


@runtime_checkable
class AuditLog(Protocol):
    """Keeps the API server's audit records (:mod:`muster.store.audit`)."""

    def append_audit(self, records: Sequence[Mapping[str, Any]]) -> None: ...

    def query_audit(self, query: AuditQuery) -> list[dict[str, Any]]:
        """Matching records, newest first."""
        ...

    def prune_audit(self, before: float) -> int:
        """Delete records older than ``before`` (epoch seconds); how many went."""
        ...
