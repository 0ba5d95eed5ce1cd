"""Recording Events: one Event object per (involved object, type, reason, message), counted.

The Event's name is derived from what it aggregates, so a repeat finds the same object and
bumps ``count`` and ``lastTimestamp`` instead of adding one more object (Kubernetes'
event aggregation, without its client-side cache). Concurrent recorders retry on Conflict.
Events about cluster-scoped objects live in namespace ``default``, as in Kubernetes.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Literal

from muster.api.base import API_VERSION, controller_ref, now_iso
from muster.store.base import AlreadyExists, Conflict, NotFound, Obj, Store, Writer

__all__ = [
    "EVENT_NAMESPACE_FOR_CLUSTER_KINDS",
    "about_owned_by",
    "event_name",
    "event_namespace",
    "events_for",
    "last_occurred",
    "record_event",
    "refers_to",
]

EVENT_NAMESPACE_FOR_CLUSTER_KINDS = "default"
_RETRIES = 100


def record_event(
    store: Writer,
    involved: Obj,
    type: Literal["Normal", "Warning"],
    reason: str,
    message: str,
    component: str = "muster",
) -> Obj:
    """Create the Event, or count one more occurrence of it; returns the stored Event."""
    meta = involved["metadata"]
    namespace = event_namespace(involved)
    name = event_name(involved, type, reason, message)
    for attempt in range(_RETRIES):
        if attempt:
            # Randomised back-off, so recorders that keep colliding spread out.
            time.sleep(random.uniform(0, min(0.05, 0.001 * attempt)))
        now = now_iso()
        try:
            current = store.get("Event", name, namespace)
        except NotFound:
            try:
                return store.create(
                    _new_event(involved, name, namespace, type, reason, message, component, now)
                )
            except AlreadyExists:
                continue  # another recorder created it first: count on top of theirs
        current["count"] = int(current.get("count") or 1) + 1
        current["lastTimestamp"] = now
        try:
            return store.update(current)
        except Conflict:
            continue
        except NotFound:
            continue  # deleted meanwhile (e.g. by garbage collection): start a new one
    raise Conflict(
        f"could not record event {reason} for {involved['kind']} {meta['name']}: too much contention"
    )


def event_name(involved: Obj, type: str, reason: str, message: str) -> str:
    """``<object name>.<digest of what the event aggregates>``, at most 253 characters."""
    meta = involved["metadata"]
    key = "\x00".join(
        [
            involved["kind"],
            meta.get("namespace") or "",
            meta["name"],
            meta.get("uid") or "",
            type,
            reason,
            message,
        ]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{meta['name'][:236]}.{digest}"


def events_for(store: Store, involved: Obj) -> list[Obj]:
    """The Events about ``involved`` (same kind, name and uid), oldest last occurrence first."""
    candidates = store.list("Event", namespace=event_namespace(involved)).items
    found = [ev for ev in candidates if refers_to(ev, involved)]
    return sorted(found, key=lambda ev: ev.get("lastTimestamp") or "")


def last_occurred(event: Obj) -> str:
    """When ``event`` last occurred (RFC 3339, so it sorts as text; its first time when it
    carries no last)."""
    return event.get("lastTimestamp") or event.get("firstTimestamp") or ""


def event_namespace(obj: Obj) -> str:
    """Where the events about ``obj`` live: its namespace, or ``default`` for a cluster kind."""
    return obj["metadata"].get("namespace") or EVENT_NAMESPACE_FOR_CLUSTER_KINDS


def refers_to(event: Obj, obj: Obj) -> bool:
    """Whether ``event`` is about ``obj`` (same kind and name, and same uid when both have one,
    so a re-created object does not inherit the events of the one it replaced)."""
    ref = event.get("involvedObject") or {}
    meta = obj["metadata"]
    if ref.get("kind") != obj["kind"] or ref.get("name") != meta["name"]:
        return False
    return not ref.get("uid") or not meta.get("uid") or ref["uid"] == meta["uid"]


def about_owned_by(event: Obj, owner: Obj) -> bool:
    """Whether ``event`` is about an object that ``owner`` controls (its ``related`` reference
    names ``owner``, same uid): a job's pods of every run, not those of an earlier job of the
    same name."""
    ref = event.get("related") or {}
    meta = owner["metadata"]
    return (
        ref.get("kind") == owner["kind"]
        and ref.get("name") == meta["name"]
        and bool(ref.get("uid"))
        and ref.get("uid") == meta.get("uid")
    )


def _new_event(
    involved: Obj,
    name: str,
    namespace: str,
    type: str,
    reason: str,
    message: str,
    component: str,
    now: str,
) -> Obj:
    meta = involved["metadata"]
    ref = {
        "apiVersion": involved.get("apiVersion") or API_VERSION,
        "kind": involved["kind"],
        "name": meta["name"],
    }
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("uid"):
        ref["uid"] = meta["uid"]
    related = _related(involved)
    event: Obj = {
        "apiVersion": API_VERSION,
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": ref,
        "type": type,
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": component},
    }
    if related is not None:
        event["related"] = related
    return event


def _related(involved: Obj) -> Obj | None:
    """The reference to the controller of ``involved`` (None when nothing owns it)."""
    if not involved["metadata"].get("ownerReferences"):
        return None
    owner = controller_ref(involved)
    ref: Obj = {"apiVersion": API_VERSION, "kind": owner["kind"], "name": owner["name"]}
    if involved["metadata"].get("namespace"):
        ref["namespace"] = involved["metadata"]["namespace"]
    if owner["uid"]:
        ref["uid"] = owner["uid"]
    return ref
