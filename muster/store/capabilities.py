"""Optional abilities a Store may have beyond the protocol; callers check with isinstance.

They exist for speed, or for records that are not objects (the audit log): a caller must work
with a store that lacks them (more slowly, or without that record).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from muster.store.base import ApplyResult, LabelSelector, Obj, Writer

if TYPE_CHECKING:
    from muster.store.audit import AuditQuery

__all__ = [
    "UNKNOWN",
    "AuditLog",
    "Batch",
    "Batching",
    "Committed",
    "JsonListing",
    "JsonPage",
    "Lookup",
    "PagedListing",
    "Replica",
]

# A committed change as a replica takes it: (type, kind, namespace or "", name, revision, JSON).
Committed = tuple[str, str, str, str, int, str]
# What a replica's lookup answers for an object it does not follow (the batch reads the store).
UNKNOWN: Any = object()
# A replica's lookup: (kind, name, namespace) -> the object, None when absent, or UNKNOWN.
Lookup = Callable[[str, str, str | None], Obj | None]


@runtime_checkable
class JsonListing(Protocol):
    """Lists objects as the JSON text they are stored as, so a server can send a list
    without decoding and re-encoding every object."""

    def list_json(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> tuple[str, list[str]]:
        """``(resourceVersion, [object JSON, ...])`` with the order and filtering of ``list``."""
        ...


@dataclass(frozen=True)
class JsonPage:
    """One page of a list: ``texts`` (the objects' stored JSON) were read in one snapshot, at
    revision ``resource_version``; ``last`` is the ``(namespace, name)`` key of the last of
    them when more objects follow it (None: the list ends here)."""

    resource_version: str
    texts: list[str]
    last: tuple[str, str] | None


@runtime_checkable
class PagedListing(Protocol):
    """Lists objects a page at a time, in key order, each page after the previous one's last key
    (Kubernetes' ``limit``/``continue``), so a large list is never read or held whole."""

    def list_page(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
        *,
        limit: int | None,
        after: tuple[str, str] | None = None,
        accept: Callable[[str], bool] | None = None,
    ) -> JsonPage:
        """At most ``limit`` objects of the kind (in ``namespace``, matching ``selector`` and
        ``accept``, which is given each candidate's JSON) whose ``(namespace, name)`` comes
        after ``after`` (cluster-scoped objects have namespace ``""``); ``limit`` None: all of them."""
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


@runtime_checkable
class Batch(Writer, Protocol):
    """Writes that go to the store in one transaction, with the Store's write rules.

    Each write is checked and answered at once, as by the Store (the stored object, or
    Conflict, NotFound, AlreadyExists, which leave the batch usable); ``get`` sees the batch's
    own writes. Nothing is visible to anyone else, nor durable, until :meth:`commit`; the
    batch holds the store's write lock from its first write until then, so a batch is kept
    short. :meth:`rollback` forgets every write. After either, the batch may be used again.
    Successive writes of one object in a batch may reach watchers as one change (its last
    state): a watcher sees every object's latest state, not every intermediate one. An
    object a batch write returns is the caller's to read, not to edit (copy it first).
    """

    @property
    def writes(self) -> int:
        """Writes made since the batch's transaction began (0: none open)."""
        ...

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]: ...

    def prefetch(self, keys: Sequence[tuple[str, str, str | None]]) -> None:
        """Read ``(kind, name, namespace)`` of objects about to be written, in one query or a
        few rather than one each."""
        ...

    def commit(self) -> int:
        """Store every write; the store's revision after it (0 when nothing was written)."""
        ...

    def rollback(self) -> None: ...


@runtime_checkable
class Batching(Protocol):
    """A store that can put many writes into one transaction (one commit, one fsync): the
    manager writes everything one pass decided in one batch."""

    def batch(self, replica: Replica | None = None) -> Batch:
        """A new, empty batch (it begins its transaction at its first write). With a
        ``replica``, the batch reads what a write changes from the replica rather than the
        database whenever the replica is at the revision the transaction began at."""
        ...


class Replica(Protocol):
    """A copy of the store kept current from its change log (the manager's cache).

    A write changes the stored object (a status merged into it, a version checked against it),
    so a batch reads the object first: a query, and on the control plane's thread a hand-over
    of the interpreter lock while it runs. Under the batch's write lock nothing else commits,
    so a replica that has applied every change up to the transaction's first revision holds
    exactly what the database holds, for the kinds it follows, for the whole transaction."""

    def at(self, revision: int) -> Lookup | None:
        """A lookup ``(kind, name, namespace) -> the object, None when absent, or UNKNOWN for
        a kind not followed``, valid while no change newer than ``revision`` is committed;
        None when the replica has not applied every change up to ``revision`` (soon enough)."""
        ...

    def committed(self, since: int, revision: int, changes: Sequence[Committed]) -> None:
        """A batch whose transaction began at ``since`` committed ``changes``: every change up
        to ``revision`` after ``since`` (it held the write lock). A replica that had applied
        every change up to ``since`` is then at ``revision`` without following the log."""
        ...
