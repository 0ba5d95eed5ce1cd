"""The SQL implementation of :class:`muster.store.base.Store` (SQLite and PostgreSQL).

Every write transaction takes the write lock (see :mod:`muster.store.engine`), reads the
revision counter, changes ``objects``, appends to ``changes`` and stores the new revision
(:mod:`muster.store.tx`); a :class:`SqlBatch` puts many writes into one such transaction.
Watchers of this process are woken right after COMMIT. Watchers of other processes are woken
by PostgreSQL's NOTIFY (:mod:`muster.store.listen`); on SQLite they find the change on their
next poll.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Engine, Select, cast, func, select, tuple_
from sqlalchemy.dialects.postgresql import JSONB

from muster.store import schema
from muster.store.audit import AuditQuery, append_audit, prune_audit, query_audit
from muster.store.base import (
    DEFAULT_MAX_OBJECT_BYTES,
    ApplyResult,
    Known,
    LabelSelector,
    ListResult,
    NotFound,
    Obj,
    WatchEvent,
)
from muster.store.capabilities import JsonPage, Replica
from muster.store.codec import loads
from muster.store.engine import WriteTransaction, is_postgres, read_transaction, upgrade
from muster.store.listen import CHANNEL, Listener
from muster.store.objects import merge_status, merge_update
from muster.store.tx import Tx, load, not_found
from muster.store.watch import Notifier, SqlWatch

__all__ = ["SqlBatch", "SqlStore", "decode_all"]

T = TypeVar("T")
# With notifications flowing, a PostgreSQL watcher still looks this often (a safety net).
_LISTENING_POLL = 5.0
# Rows a page reads per query: at first the page and one more (to know whether more follow),
# then twice as many each time (when rows were refused), at most this.
_PAGE_BATCH_MAX = 5_000


class SqlStore:
    """A Store over one SQLAlchemy engine. Thread-safe; one instance per process and database.

    ``poll_interval`` bounds how late a watcher sees a write made by another process;
    ``retention`` is how many revisions of change log are kept for watches to resume from;
    ``max_object_bytes`` is the largest object (its JSON) a write may store.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        poll_interval: float = 0.5,
        retention: int = 100_000,
        max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES,
    ) -> None:
        if retention < 1:
            raise ValueError("retention must be at least 1 revision")
        if max_object_bytes < 1:
            raise ValueError("max_object_bytes must be at least 1")
        self.engine = engine
        self.poll_interval = poll_interval
        self.retention = retention
        self.max_object_bytes = max_object_bytes
        self.notifier = Notifier()
        # SQLite serialises writers anyway; doing it in-process first spares them the busy
        # handler's sleep-and-retry. PostgreSQL writers queue on the revision row lock.
        self._write_lock: Any = nullcontext() if is_postgres(engine) else threading.Lock()
        self._notify_channel = CHANNEL if is_postgres(engine) else None
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()
        upgrade(engine)

    # -- reads -------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        with read_transaction(self.engine) as conn:
            found = load(conn, kind, name, namespace)
        if found is None:
            raise NotFound(not_found(kind, name, namespace))
        return found

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: LabelSelector | None = None,
    ) -> ListResult:
        revision, texts = self.list_json(kind, namespace, selector)
        return ListResult(items=decode_all(texts), resource_version=revision)

    def list_json(
        self, kind: str, namespace: str | None = None, selector: LabelSelector | None = None
    ) -> tuple[str, list[str]]:
        """Like :meth:`list`, with each object as its stored JSON text (see JsonListing)."""
        with read_transaction(self.engine) as conn:
            revision = schema.current_revision(conn)[0]
            rows = conn.execute(self._select(kind, namespace, selector)).all()
        # Sorted here, not by the database, so that both databases order names bytewise
        # whatever collation a PostgreSQL database was created with.
        rows.sort(key=lambda r: (r[0], r[1]))
        texts = [
            data for _ns, _name, labels, data in rows if selector is None or selector.matches(loads(labels))
        ]
        return str(revision), texts

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
        """See :class:`muster.store.capabilities.PagedListing`. The page is read in one snapshot,
        a batch of rows at a time in primary-key order from ``after`` on (a keyset scan of the
        ``(kind, namespace, name)`` key), until it has one match more than ``limit`` (so it
        knows more follow) or the rows end: rows the selector or ``accept`` refuse cost a
        further batch, never an empty page with a ``last``.

        Unlike :meth:`list_json`, the order is the database's: ORDER BY and the keyset
        comparison must agree, and both are the database's collation (bytewise on SQLite and on
        a PostgreSQL database created with the C or C.UTF-8 locale, as Muster's own is). Sorting
        in Python instead would need every row read; a ``COLLATE "C"`` in the query would keep
        a database of another locale from using the index. Names are DNS-1123 names, so only in a
        database of another locale do pages list some (``a-b``, ``ab``) in another order than
        the whole list.
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1")
        if namespace is not None and after is not None and after[0] != namespace:
            raise ValueError(f"a page of namespace {namespace!r} cannot follow a key of {after[0]!r}")
        o = schema.objects.c
        query = self._select(kind, namespace, selector).order_by(o.namespace, o.name)
        batch = _PAGE_BATCH_MAX if limit is None else min(limit + 1, _PAGE_BATCH_MAX)
        texts: list[str] = []
        last = ("", "")
        with read_transaction(self.engine) as conn:
            revision = str(schema.current_revision(conn)[0])
            while True:
                q = query
                # Written so that both databases scan the primary key's index from the key on
                # (checked with EXPLAIN on SQLite 3.40 and PostgreSQL 15): with the namespace
                # fixed, a row value would narrow only to the namespace on SQLite.
                if after is not None and namespace is not None:
                    q = q.where(o.name > after[1])
                elif after is not None:
                    q = q.where(tuple_(o.namespace, o.name) > tuple_(*after))
                rows = conn.execute(q.limit(batch)).all()
                for ns, name, labels, data in rows:
                    if selector is not None and not selector.matches(loads(labels)):
                        continue
                    if accept is not None and not accept(data):
                        continue
                    if len(texts) == limit:
                        return JsonPage(revision, texts, last)
                    texts.append(data)
                    last = (ns, name)
                if len(rows) < batch:
                    return JsonPage(revision, texts, None)
                after = (rows[-1][0], rows[-1][1])
                # Rows were refused: read further in larger steps (a caller who may see one
                # namespace of many pages past the others' rows in few queries).
                batch = min(2 * batch, _PAGE_BATCH_MAX)

    def _select(self, kind: str, namespace: str | None, selector: LabelSelector | None) -> Select[Any]:
        """The key, labels and JSON of the objects of ``kind`` (in ``namespace``) that may match."""
        o = schema.objects.c
        q = select(o.namespace, o.name, o.labels, o.data).where(o.kind == kind)
        if namespace is not None:
            q = q.where(o.namespace == namespace)
        if selector is not None:
            # The selective requirements narrow the rows in the database; the whole selector
            # is still checked by the caller, so this only has to never drop a match.
            for key, value in selector.equals.items():
                q = q.where(self._label(key) == value)
            for key, values in selector.in_.items():
                q = q.where(self._label(key).in_(sorted(values)))
        return q

    def _label(self, key: str) -> ColumnElement[Any]:
        """The value of label ``key`` as SQL text (NULL when absent)."""
        labels = schema.objects.c.labels
        if is_postgres(self.engine):
            return func.jsonb_extract_path_text(cast(labels, JSONB), key)
        # Label keys cannot contain a double quote, so the JSON path needs no escaping.
        return func.json_extract(labels, f'$."{key}"')

    def revision(self) -> int:
        with read_transaction(self.engine) as conn:
            return schema.current_revision(conn)[0]

    def counts(self) -> dict[str, int]:
        q = select(schema.objects.c.kind, func.count()).group_by(schema.objects.c.kind)
        with read_transaction(self.engine) as conn:
            return {kind: int(n) for kind, n in conn.execute(q).all()}

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
        self._listen()
        return SqlWatch(
            self,
            kind=kind,
            namespace=namespace,
            since=since,
            timeout=timeout,
            kinds=kinds,
            bookmarks=bookmarks,
            known=known,
            floor=floor,
        )

    def watch_poll_interval(self) -> float:
        """How long a watcher may wait for a wake-up before it looks at the database itself."""
        listener = self._listener
        if listener is not None and listener.listening:
            return max(self.poll_interval, _LISTENING_POLL)
        return self.poll_interval

    def _listen(self) -> None:
        """Start listening for other processes' writes (PostgreSQL; once, at the first watch)."""
        if self._notify_channel is None or self._listener is not None:
            return
        with self._listener_lock:
            if self._listener is None and not self.notifier.closed:
                self._listener = Listener(self.engine, self.notifier, self.revision)

    # -- writes ------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.create(obj))

    def update(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.modify(obj, merge_update))

    def update_status(self, obj: Obj) -> Obj:
        return self._write(lambda tx: tx.modify(obj, merge_status))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> Obj:
        return self._write(lambda tx: tx.delete(kind, name, namespace, resource_version))

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        return self._write(lambda tx: tx.apply(objs))

    def append_audit(self, records: Sequence[Mapping[str, Any]]) -> None:
        append_audit(self.engine, records)

    def query_audit(self, query: AuditQuery) -> list[dict[str, Any]]:
        return query_audit(self.engine, query)

    def prune_audit(self, before: float) -> int:
        return prune_audit(self.engine, before)

    def batch(self, replica: Replica | None = None) -> SqlBatch:
        return SqlBatch(self, replica)

    def close(self) -> None:
        self.notifier.close()
        if self._listener is not None:
            self._listener.close()
        self.engine.dispose()

    def _write(self, op: Callable[[Tx], T]) -> T:
        with self.batch() as batch:
            return op(batch.tx())


class SqlBatch:
    """Writes of one :class:`SqlStore` in one transaction (see :class:`muster.store.capabilities.Batching`).

    The transaction (and with it the store's write lock) begins at the first write, so a
    batch that writes nothing costs nothing; :meth:`commit` ends it and the batch may be used
    again. Not thread-safe: one thread writes through a batch.
    """

    def __init__(self, store: SqlStore, replica: Replica | None = None) -> None:
        self._store = store
        self._replica = replica
        self._open: WriteTransaction | None = None
        self._tx: Tx | None = None

    @property
    def writes(self) -> int:
        """Writes made since the transaction began (0 when none is open)."""
        return 0 if self._tx is None else self._tx.writes

    def tx(self) -> Tx:
        """The open transaction (begun now if none is)."""
        if self._tx is None:
            store = self._store
            opened = WriteTransaction(store.engine, store._write_lock)
            try:
                self._tx = Tx(opened.conn, store.retention, store._notify_channel, store.max_object_bytes)
                if self._replica is not None:
                    self._tx.replica = self._replica.at(self._tx.revision)
            except BaseException:
                opened.end(commit=False)
                raise
            self._open = opened
        return self._tx

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        if self._tx is None:
            return self._store.get(kind, name, namespace)
        found = self._tx.get(kind, name, namespace)
        if found is None:
            raise NotFound(not_found(kind, name, namespace))
        return found

    def create(self, obj: Obj) -> Obj:
        return self.tx().create(obj)

    def prefetch(self, keys: Sequence[tuple[str, str, str | None]]) -> None:
        """Read ``(kind, name, namespace)`` of objects about to be written, in one query or a
        few rather than one each (Events, which no replica holds)."""
        self.tx().prefetch(keys)

    def update(self, obj: Obj) -> Obj:
        return self.tx().modify(obj, merge_update)

    def update_status(self, obj: Obj) -> Obj:
        return self.tx().modify(obj, merge_status)

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> Obj:
        return self.tx().delete(kind, name, namespace, resource_version)

    def apply(self, objs: Sequence[Obj]) -> list[ApplyResult]:
        return self.tx().apply(objs)

    def commit(self) -> int:
        """Store every write of the batch; the store's revision after it (0: nothing written)."""
        tx, opened = self._tx, self._open
        if tx is None or opened is None:
            return 0
        self._tx = self._open = None
        try:
            tx.flush()
        except BaseException:
            opened.end(commit=False)
            raise
        opened.end(commit=True)
        if not tx.changed:
            return 0
        if self._replica is not None:
            self._replica.committed(tx.began, tx.revision, tx.committed())
        self._store.notifier.notify(tx.revision, tx.kinds())
        return tx.revision

    def rollback(self) -> None:
        """Forget every write of the batch."""
        opened = self._open
        self._tx = self._open = None
        if opened is not None:
            opened.end(commit=False)

    def __enter__(self) -> SqlBatch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()


def decode_all(texts: Sequence[str]) -> list[Obj]:
    """Decode stored JSON texts. The decoder shares equal short strings ("metadata", "name",
    a queue's name, ...) across documents, so 100,000 stored jobs hold one copy of each key
    rather than one per object."""
    return [loads(text) for text in texts]
