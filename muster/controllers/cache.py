"""An informer: the objects the controllers read, kept current from the store's watch.

The controllers read the cache, never the store, so a pass costs no queries; they write to the
store and put what the store returned into the cache at once (:meth:`Cache.observe`), so the
rest of the pass sees its own writes. A background thread follows the store's change log and
applies every change newer than what the cache holds (an object's resourceVersion orders
its versions), remembers which objects changed (:meth:`Cache.take_changes`) and wakes the
manager (:meth:`Cache.wait`). A watch that fell behind the retained log re-lists everything.
A list reports what is in play as changed at once and settled objects (finished jobs, a
long-running server's bulk) a slice per pass (:meth:`Cache.drip`), so that a restart over
100,000 finished jobs runs a new one after its first, small, pass.

Cached objects are shared: treat them as read-only and copy one (``muster.store.codec.copy``)
before editing. What the manager writes becomes the cached object itself, so an object handed
to a write is not to be edited afterwards either. With ``check_mutations`` (the setting
``MUSTER_CACHE_MUTATION_DETECTOR``, on in Muster's tests, as client-go's
``KUBE_CACHE_MUTATION_DETECTOR``) the cache keeps each object's JSON and reports an object
changed in place, or one that is not plain JSON, when it is replaced, removed or the cache stops.
"""

from __future__ import annotations

import gc
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from muster.store.base import NotFound, Obj, Store, TooOld, WatchEvent
from muster.store.capabilities import UNKNOWN, Committed, Lookup
from muster.store.codec import dumps, loads
from muster.util import paused_gc

__all__ = ["MUTATION_REPORT", "WATCHED_KINDS", "Cache", "Key"]

log = logging.getLogger(__name__)

# (kind, namespace or "", name)
Key = tuple[str, str, str]

WATCHED_KINDS = (
    "Namespace",
    "ResourceQuota",
    "Node",
    "GPUSharing",
    "ResourceFlavor",
    "Topology",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "PriorityClass",
    "TrainingJob",
    "Workflow",
    "InferenceService",
    "Workload",
    "Pod",
    "NodePool",
    "NodeClaim",
    "Experiment",
    "Trial",
    "RayCluster",
    "RayJob",
)
# How each report of the mutation check begins (tests look for it in logs).
MUTATION_REPORT = "cache mutation detected"
# Labels the cache indexes Pods by, so a job's or a workload's pods are found without a scan.
_POD_INDEX_LABELS = ("muster.dev/workload", "muster.dev/job-name", "ray.io/cluster", "muster.dev/rayjob")
_TOMBSTONES = 1000
# How long a batch waits for the follower to apply the changes before its transaction, rather
# than reading each object it writes from the database (seconds).
_REPLICA_WAIT = 0.02


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace") or "", meta["name"]


def _rv(obj: Obj) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


class Cache:
    """Objects of :data:`WATCHED_KINDS` by kind and key, plus an index of Pods by label."""

    def __init__(
        self,
        store: Store,
        kinds: Iterable[str] = WATCHED_KINDS,
        live: Mapping[str, Callable[[Obj], bool]] | None = None,
        freeze: bool = False,
        check_mutations: bool = False,
    ) -> None:
        self.store = store
        # key -> the JSON of the object held, when mutations are checked (see the docstring)
        self._shadow: dict[Key, str] | None = {} if check_mutations else None
        self.mutations: list[str] = []  # what the check found (each also logged as an error)
        # Exempt what a (re)list loaded from the cycle collector (gc.freeze) until stop().
        self._freeze = freeze
        self.kinds = tuple(kinds)
        self._objects: dict[str, dict[Key, Obj]] = {k: {} for k in self.kinds}
        # kind -> the test of an object still in play (a Workload not finished): list_live()
        # answers those without a scan over every object a long-running server keeps
        self._live_test = dict(live or {})
        self._live: dict[str, dict[Key, Obj]] = {k: {} for k in self._live_test}
        # Deleted keys and the revision of their deletion: an older replayed ADDED is stale.
        self._gone: dict[Key, int] = {}
        self._gone_limit = _TOMBSTONES
        self._pod_index: dict[tuple[str, str, str], set[Key]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._changed: set[Key] = set()
        self._marked: set[Key] = set()  # asked for by mark(): a look even if unchanged
        self._deleted: dict[Key, Obj] = {}  # last states of objects deleted since take_changes
        # Settled objects a (re)list found (those failing their kind's live test: finished jobs),
        # reported as changed a few at a time by drip(), after everything in play.
        self._backlog: dict[Key, None] = {}
        self._dirty = False
        self._stopped = False
        self._seen = 0  # the revision the cache has applied every change up to
        self._watch: Iterator[WatchEvent] | None = None
        # Called (under the cache's lock: it must be quick) whenever something changes, so a
        # manager waiting elsewhere (on its runtime) wakes up too.
        self.on_change: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None

    # -- life ----------------------------------------------------------------------------

    def start(self) -> None:
        """List every kind, then follow the change log from before the lists in a thread."""
        revision = self._relist()
        self._thread = threading.Thread(
            target=self._follow, args=(revision,), name="muster-cache", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            watch = self._watch
            self._wake.notify_all()
        close = getattr(watch, "close", None)
        if close is not None:
            close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._freeze:
            gc.unfreeze()
        self.verify()

    def verify(self) -> list[str]:
        """With ``check_mutations``: report every held object changed in place since it was
        taken (what was found is also in :attr:`mutations`)."""
        if self._shadow is None:
            return []
        with self._lock:
            found: list[str] = []
            for table in self._objects.values():
                for key, obj in table.items():
                    found += self._check(key, obj)
            return found

    # -- reads ---------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        with self._lock:
            return self._objects[kind].get((kind, namespace or "", name))

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            objs = list(self._objects[kind].values())
        if namespace is not None:
            objs = [o for o in objs if (o["metadata"].get("namespace") or "") == namespace]
        return objs

    def present(self, keys: Iterable[Key]) -> set[Key]:
        """Those of ``keys`` the cache holds (one lock for all: callers check many at once)."""
        with self._lock:
            objects = self._objects
            return {k for k in keys if k in objects.get(k[0], ())}

    def list_live(self, kind: str) -> list[Obj]:
        """The objects of ``kind`` that pass its ``live`` test (a kind without one: all)."""
        with self._lock:
            table = self._live.get(kind)
            return list((table if table is not None else self._objects[kind]).values())

    def pods_labelled(self, label: str, value: str, namespace: str) -> list[Obj]:
        """Pods of ``namespace`` whose ``label`` (an indexed one) equals ``value``."""
        with self._lock:
            keys = self._pod_index.get((label, namespace, value), set())
            pods = self._objects["Pod"]
            return [pods[k] for k in sorted(keys) if k in pods]

    # -- writes seen -----------------------------------------------------------------------

    def observe(self, obj: Obj) -> None:
        """Take an object the store just returned from a write (newer versions only)."""
        with self._lock:
            self._put(obj)

    def forget(self, obj: Obj) -> None:
        """Drop an object the store just deleted (``obj`` is what ``delete`` returned)."""
        with self._lock:
            self._remove(obj)

    def reload(self, keys: Iterable[Key]) -> None:
        """Replace what is cached of ``keys`` with what the store holds now, whatever the
        versions (writes that were taken back: their revisions will be handed out again)."""
        # Under the lock, so that a change the watch skipped meanwhile (older than the taken
        # back version) is in what the store answers here.
        with self._lock:
            for key in keys:
                kind, ns, name = key
                table = self._objects.get(kind)
                if table is None:
                    continue
                try:
                    obj: Obj | None = self.store.get(kind, name, ns or None)
                except NotFound:
                    obj = None
                current = table.pop(key, None)
                if current is not None:
                    self._unindex(key, current)
                self._gone.pop(key, None)
                if obj is not None:
                    self._put(obj)
                self._note(key)

    def mark(self, keys: Iterable[Key]) -> None:
        """Ask for another look at ``keys`` (a write that conflicted, a timer that fired), even
        by a controller that has seen their current version."""
        keys = list(keys)
        with self._lock:
            self._changed.update(keys)
            self._marked.update(keys)
            self._dirty = True
            self._signal()

    def requeue(self, changes: dict[Key, Obj | None]) -> None:
        """Report ``changes`` (what :meth:`take_changes` gave) as changed again on the next
        :meth:`take_changes`: changes a pass took early for its later steps, which its earlier
        steps have not looked at yet. A deleted object comes back with its last state, as it
        was taken: without it, nothing would tell whose it was (a pod's owner)."""
        with self._lock:
            self._changed.update(changes)
            for key, obj in changes.items():
                if obj is not None and key not in self._deleted and key not in self._objects.get(key[0], ()):
                    self._deleted[key] = obj
            self._dirty = True
            self._signal()

    # -- change tracking --------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Whether something changed since the last :meth:`take_changes`, or the backlog
        still holds objects for :meth:`drip`."""
        with self._lock:
            return self._pending()

    def wait(self, timeout: float) -> bool:
        """Wait until something changed (or ``timeout``); True when something did."""
        with self._lock:
            self._wake.wait_for(lambda: self._pending() or self._stopped, timeout)
            return self._pending()

    def drip(self, count: int) -> int:
        """Report up to ``count`` objects of the backlog as changed (oldest listed first); the
        number left. A restart over 100,000 finished jobs thus looks at what is in play in its
        first pass, and at the finished ones a slice per pass after it."""
        with self._lock:
            if not self._backlog:
                return 0
            keys = list(itertools.islice(self._backlog, count))
            for key in keys:
                del self._backlog[key]
            present = [k for k in keys if k in self._objects[k[0]]]
            self._changed.update(present)
            self._dirty = self._dirty or bool(present)
            return len(self._backlog)

    def backlog(self) -> set[Key]:
        """The keys waiting in the backlog (not reported as changed since the last list)."""
        with self._lock:
            return set(self._backlog)

    def caught_up(self, revision: int, timeout: float) -> bool:
        """Wait until the watch has applied every change up to ``revision`` (tests and tools
        that wrote to the store and want the cache to show it); False on timeout."""
        with self._lock:
            return self._wake.wait_for(lambda: self._seen >= revision or self._stopped, timeout)

    def at(self, revision: int) -> Lookup | None:
        """The store's batches read the objects a write changes from here rather than the
        database (see :class:`muster.store.capabilities.Replica`) once every change up to
        ``revision`` is applied: the follower is woken by the commit before, and most often has
        only passed over that commit's own writes, so a short wait saves a query per object."""
        if self._thread is not None:  # a cache nobody follows the log for never catches up
            self.caught_up(revision, _REPLICA_WAIT)
        with self._lock:
            return self._stored if self._seen >= revision and not self._stopped else None

    def committed(self, since: int, revision: int, changes: Sequence[Committed]) -> None:
        """Take a batch's committed changes (see :class:`muster.store.capabilities.Replica`):
        those of the kinds held that the cache does not hold yet (the manager observes its own
        writes as it makes them, so mostly none) are applied, and a cache that had applied every
        change up to ``since`` counts the batch's as applied, so the next batch need not wait
        for the follower to pass over them."""
        with self._lock:
            for type_, kind, ns, name, rv, data in changes:
                table = self._objects.get(kind)
                key = (kind, ns, name)
                if table is None or self._as_new(key, table.get(key), rv):
                    continue
                if type_ == "DELETED":
                    self._remove(loads(data))
                else:
                    self._put(loads(data))
            if self._seen >= since:
                self._seen = max(self._seen, revision)
                self._wake.notify_all()

    def take_changes(self, marked: set[Key] | None = None) -> dict[Key, Obj | None]:
        """What changed since the last call (cleared): each key with its current object, or
        with the last state of one deleted meanwhile (None when nothing is known of it).
        ``marked`` receives the keys among them that :meth:`mark` asked for."""
        with self._lock:
            changed, self._changed = self._changed, set()
            if marked is not None:
                marked.update(self._marked)
            self._marked = set()
            deleted, self._deleted = self._deleted, {}
            self._dirty = False
            return {k: self._objects.get(k[0], {}).get(k) or deleted.get(k) for k in changed}

    # -- internals --------------------------------------------------------------------------

    def _relist(self) -> int:
        # Decoding every stored object makes millions of containers and no reference cycle:
        # with the collector on, it would walk them all again and again (half the relist).
        with paused_gc():
            revision = self.store.revision()
            fresh: dict[str, list[Obj]] = {kind: self.store.list(kind).items for kind in self.kinds}
            with self._lock:
                self._seen = max(self._seen, revision)
                self._objects = {k: {} for k in self.kinds}
                if self._shadow is not None:
                    self._shadow.clear()
                self._live = {k: {} for k in self._live_test}
                self._pod_index.clear()
                self._gone.clear()
                for items in fresh.values():
                    for obj in items:
                        self._hold(obj)
                del fresh
                backlog: dict[Key, None] = {}
                for kind, objs in self._objects.items():
                    live = self._live.get(kind)
                    if live is None:
                        self._changed.update(objs)
                    else:  # settled objects (finished jobs) wait their turn: see drip()
                        self._changed.update(live)
                        backlog.update((k, None) for k in objs if k not in live and k not in self._changed)
                self._backlog = backlog
                self._dirty = True
                self._signal()
            if self._freeze:
                # What was just listed lives as long as it is current: the collector need not
                # walk it (one collection would take seconds with 100,000 objects held). Frozen
                # before the collector is back on, or its first collection walks them all.
                gc.freeze()
        return revision

    def _follow(self, revision: int) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                # Only the kinds it holds (Events, half of all changes, are not decoded);
                # bookmarks move `_seen` past the changes skipped, for caught_up().
                self._watch = self.store.watch(
                    since=revision,
                    kinds=self.kinds,
                    bookmarks=True,
                    known=self._holds,
                    floor=self._applied,
                )
                watch = self._watch
            try:
                for event in watch:
                    revision = event.revision
                    with self._lock:
                        # A batch's commit may have moved it further already (committed()).
                        self._seen = max(self._seen, revision)
                        self._wake.notify_all()
                        if event.object.get("kind") not in self._objects:
                            continue
                        if event.type == "DELETED":
                            self._remove(event.object)
                        else:
                            self._put(event.object)
                        if len(self._gone) > self._gone_limit:
                            # Changes up to `revision` were all seen: no older version can come.
                            self._gone = {k: rv for k, rv in self._gone.items() if rv > revision}
                            # Deletions this process made ahead of the watch stay: look again
                            # only once there are twice as many (a mass delete stays linear).
                            self._gone_limit = max(_TOMBSTONES, 2 * len(self._gone))
            except TooOld:
                log.warning("the cache fell behind the change log; listing everything again")
                revision = self._relist()
                continue
            except Exception:  # a lost database connection: keep following from where we were
                log.exception("watching the store failed; retrying")
                with self._lock:
                    self._wake.wait(1.0)
                continue
            return  # the watch ended: closed by stop()

    def _applied(self) -> int:
        """The watch's ``floor``: every change up to ``_seen`` is applied (a batch's commit
        hands its changes over, :meth:`committed`), so the follower does not read them again."""
        with self._lock:
            return self._seen

    def _stored(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        with self._lock:
            table = self._objects.get(kind)
            return UNKNOWN if table is None else table.get((kind, namespace or "", name))

    def _holds(self, kind: str, namespace: str, name: str, revision: int) -> bool:
        """The watch's ``known``: a change :meth:`_hold` would pass over (this process's own
        writes, observed at commit: most of what the follower reads) need not be decoded."""
        key = (kind, namespace, name)
        with self._lock:
            table = self._objects.get(kind)
            return table is not None and self._as_new(key, table.get(key), revision)

    def _as_new(self, key: Key, current: Obj | None, revision: int) -> bool:
        """Under the lock: what is held of ``key`` (``current``, or its deletion) is at least as
        new as ``revision``."""
        return (current is not None and _rv(current) >= revision) or self._gone.get(key, -1) >= revision

    def _put(self, obj: Obj) -> None:
        key = self._hold(obj)
        if key is not None:
            self._note(key)

    def _hold(self, obj: Obj) -> Key | None:
        """Keep ``obj`` unless what is held of it is as new; its key when it was kept."""
        kind = obj.get("kind")
        table = self._objects.get(kind)  # type: ignore[arg-type]
        if table is None:
            return None
        key = key_of(obj)
        current = table.get(key)
        if self._as_new(key, current, _rv(obj)):
            return None
        if current is not None:
            self._unindex(key, current)
        if self._shadow is not None:
            self._take(key, current, obj)
        table[key] = obj
        self._gone.pop(key, None)
        self._index(key, obj)
        return key

    def _remove(self, obj: Obj) -> None:
        key = key_of(obj)
        table = self._objects.get(key[0])
        if table is None:
            return
        rv = _rv(obj)
        current = table.get(key)
        if current is not None and _rv(current) > rv:
            return  # re-created since this deletion
        if current is not None:
            self._unindex(key, current)
            del table[key]
            if self._shadow is not None:
                self._check(key, current)
                self._shadow.pop(key, None)
        self._deleted[key] = obj
        self._gone[key] = max(rv, self._gone.get(key, 0))
        self._note(key)

    def _pending(self) -> bool:
        """Under the lock: a change not taken yet, or backlog left to drip."""
        return self._dirty or bool(self._backlog)

    def _note(self, key: Key) -> None:
        self._changed.add(key)
        self._backlog.pop(key, None)  # changed: looked at now, not in its turn
        self._dirty = True
        self._signal()

    def _signal(self) -> None:
        self._wake.notify_all()
        if self.on_change is not None:
            self.on_change()

    def _index(self, key: Key, obj: Obj) -> None:
        test = self._live_test.get(key[0])
        if test is not None and test(obj):
            self._live[key[0]][key] = obj
        if key[0] != "Pod":
            return
        labels = obj["metadata"].get("labels") or {}
        for label in _POD_INDEX_LABELS:
            if label in labels:
                self._pod_index.setdefault((label, key[1], labels[label]), set()).add(key)

    def _unindex(self, key: Key, obj: Obj) -> None:
        live = self._live.get(key[0])
        if live is not None:
            live.pop(key, None)
        if key[0] != "Pod":
            return
        labels = obj["metadata"].get("labels") or {}
        for label in _POD_INDEX_LABELS:
            if label in labels:
                self._pod_index.get((label, key[1], labels[label]), set()).discard(key)

    def _take(self, key: Key, current: Obj | None, obj: Obj) -> None:
        """Under the lock, checking mutations: check ``current`` and keep ``obj``'s JSON."""
        assert self._shadow is not None
        if current is not None:
            self._check(key, current)
        data = dumps(obj)
        if loads(data) != obj:  # a tuple for a list, a number as a key, ...
            self._report(key, "is not plain JSON (the store holds it as it decodes, not as cached)")
        self._shadow[key] = data

    def _check(self, key: Key, obj: Obj) -> list[str]:
        assert self._shadow is not None
        held = self._shadow.get(key)
        if held is None or held == dumps(obj):
            return []
        return [self._report(key, "was changed in place after the cache took it")]

    def _report(self, key: Key, what: str) -> str:
        kind, ns, name = key
        text = (
            f"{MUTATION_REPORT}: {kind} {ns + '/' if ns else ''}{name} {what}; cached objects "
            "are shared: copy one before editing it, and do not edit an object once written"
        )
        log.error("%s", text)
        self.mutations.append(text)
        return text
