"""The Store contract: versioned objects, one global revision, watch, events.

Objects travel as plain JSON-able dicts in wire form (``apiVersion``, ``kind``,
``metadata``, ``spec``, ``status``), already validated by :mod:`muster.api`; the store
never interprets ``spec`` or ``status``. Every write bumps one global revision; the new
revision becomes the object's ``metadata.resourceVersion`` (a decimal string) and is the
position of the change in the watch log.

Cluster-scoped kinds are stored with ``namespace=None`` (``metadata.namespace`` absent).
Kinds are addressed by their Kind name (``"TrainingJob"``), never by plural.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

# The errors live apart so that the SDK client can derive from them without loading the store.
from muster.store.errors import AlreadyExists, Conflict, NotFound, StoreError, TooLarge, TooOld

__all__ = [
    "AlreadyExists",
    "ApplyResult",
    "Conflict",
    "Known",
    "ListResult",
    "NotFound",
    "Store",
    "StoreError",
    "TooLarge",
    "TooOld",
    "WatchEvent",
    "Writer",
]

# etcd's default request limit, which bounds a Kubernetes object: the store refuses larger ones.
DEFAULT_MAX_OBJECT_BYTES = 1536 * 1024

Obj = dict[str, Any]
# (kind, namespace ("" when cluster-scoped), name, revision) -> True when the watcher holds that
# change, or a newer version of the object, already: a watch need not decode it.
Known = Callable[[str, str, str, int], bool]


@dataclass(frozen=True)
class WatchEvent:
    """One change: ``type`` is ADDED, MODIFIED or DELETED; ``object`` is the object after the
    change (for DELETED, its last state with the deletion's resourceVersion). A watch asked
    for bookmarks also yields BOOKMARK events: no change, only the revision the watch has
    seen every change up to (Kubernetes' watch bookmarks), with an ``object`` holding nothing
    but that ``metadata.resourceVersion``."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Obj
    revision: int


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    resource_version: str  # the store's revision when the list was read; watch from here


@dataclass(frozen=True)
class ApplyResult:
    object: Obj
    action: Literal["created", "configured", "unchanged"]


@dataclass(frozen=True)
class LabelSelector:
    """Equality-based and set-based label selection, as ``-l`` takes it:
    ``a=b,c!=d,e in (x,y),f notin (z),g,!h``."""

    equals: Mapping[str, str] = field(default_factory=dict)
    not_equals: Mapping[str, str] = field(default_factory=dict)
    in_: Mapping[str, frozenset[str]] = field(default_factory=dict)
    not_in: Mapping[str, frozenset[str]] = field(default_factory=dict)
    exists: frozenset[str] = frozenset()
    not_exists: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (
            all(labels.get(k) == v for k, v in self.equals.items())
            and all(labels.get(k) != v for k, v in self.not_equals.items())
            and all(labels.get(k) in vs for k, vs in self.in_.items())
            and all(labels.get(k) not in vs for k, vs in self.not_in.items())
            and all(k in labels for k in self.exists)
            and all(k not in labels for k in self.not_exists)
        )


@runtime_checkable
class Writer(Protocol):
    """What reads and writes single objects: a :class:`Store`, or a batch of writes
    (:class:`muster.store.capabilities.Batch`) with the same rules.

    A write returns the stored object built from the caller's and the stored one without a
    copy: it shares their nested parts. The caller hands over what it writes (it does not edit
    it afterwards) and treats the answer as read-only, as the control plane's cache shares
    it (``MUSTER_CACHE_MUTATION_DETECTOR`` reports an edit). ``get`` returns a copy of its own."""

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj: ...

    def create(self, obj: Obj) -> Obj: ...

    def update(self, obj: Obj) -> Obj: ...

    def update_status(self, obj: Obj) -> Obj: ...

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> Obj: ...


@runtime_checkable
class Store(Protocol):
    """Persistence of Muster objects. Implementations are thread-safe.

    Write semantics follow the Kubernetes API server:

    * ``create`` assigns ``uid``, ``creationTimestamp``, ``generation=1`` and
      ``resourceVersion``; it ignores any of those the caller sent.
    * ``update`` replaces ``metadata`` (labels, annotations, ownerReferences, finalizers)
      and ``spec`` but keeps ``status``; ``generation`` increments only when ``spec``
      changed; it may set ``metadata.deletionTimestamp`` once (a graceful-deletion request,
      which then stays), never clear it. ``update_status`` replaces only ``status`` and
      never bumps generation.
      Both raise :class:`Conflict` when the caller's ``metadata.resourceVersion`` is set
      and is not current; an absent resourceVersion means "last write wins".
    * ``delete`` removes the object (no finalizer wait in the embedded store) and
      returns its last state; a DELETED watch event is recorded.
    * Every write is one transaction that also appends to the change log (a store that
      offers :class:`muster.store.capabilities.Batching` can put many writes into one).
    * The change log has every committed write's resulting state at its revision, except
      that successive writes of one object in one batch may be logged as one change: the
      last state, at the last write's revision.
    * A write whose object is larger than the store's limit (its JSON, 1.5 MiB by default)
      raises :class:`TooLarge` and stores nothing.
    """

    def create(self, obj: Obj) -> Obj: ...

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        """The object, or :class:`NotFound`."""
        ...

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
    ) -> ListResult:
        """Objects of ``kind``, in one namespace or all (``namespace=None``), ordered by
        (namespace, name)."""
        ...

    def update(self, obj: Obj) -> Obj: ...

    def update_status(self, obj: Obj) -> Obj: ...

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> Obj: ...

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        """Create or update each object, all in one transaction: either every object is
        stored or none is (a Conflict or any error rolls back everything).

        An update that changes neither metadata labels/annotations nor spec is
        ``unchanged`` and does not bump the revision."""
        ...

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        since: str | int | None = None,
        timeout: float | None = None,
        *,
        kinds: Collection[str] | None = None,
        bookmarks: bool = False,
        known: Known | None = None,
        floor: Callable[[], int] | None = None,
    ) -> Iterator[WatchEvent]:
        """Changes after revision ``since`` in revision order, then live ones, until
        ``timeout`` seconds pass without a change (``None``: forever) or the iterator is
        closed. ``since=None`` starts at the current revision. A ``since`` older than the
        retained log raises :class:`TooOld` on the first ``next()``. ``kinds`` keeps only
        changes of those kinds (as ``kind`` keeps one); ``bookmarks`` adds a BOOKMARK event
        whenever changes the filters skipped moved the watch past the last one it yielded.
        ``known`` skips, undecoded, the additions and modifications it answers True for (the
        watcher holds them already), as the filters do; ``floor()``, asked before each read,
        is a revision up to which the watcher holds every change already (its own commits,
        handed to it), which the watch then does not read at all."""
        ...

    def revision(self) -> int:
        """The current global revision."""
        ...

    def counts(self) -> dict[str, int]:
        """The number of stored objects per kind (kinds with none are absent)."""
        ...

    def close(self) -> None: ...
