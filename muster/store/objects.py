"""How a write turns the stored object and the caller's object into the next stored object.

These are the Kubernetes API-server rules of :class:`muster.store.base.Store`, as pure
functions over wire dicts, so the SQL store and the server's dry-run agree exactly. The
*body* of an object is every top-level field but ``apiVersion``, ``kind``, ``metadata`` and
``status`` (``spec`` for most kinds, ``value`` for a PriorityClass): the store never looks
inside it, it only compares it.

The objects these functions build share nested parts with their inputs (nothing is copied
here). The store serialises what it keeps at once and returns the object built, unchanged:
a writer does not edit what it wrote, nor an answer (:class:`muster.store.base.Writer`).
"""

from __future__ import annotations

from typing import Any, Literal

from muster.api.base import now_iso
from muster.store.base import Conflict, Obj

__all__ = [
    "USER_META",
    "apply_action",
    "body",
    "check_version",
    "merge_apply",
    "merge_status",
    "merge_update",
    "new_object",
    "object_key",
    "with_revision",
]

# Metadata a client owns and writes; the rest (uid, resourceVersion, generation, timestamps)
# is the server's and survives every update unchanged.
USER_META = ("labels", "annotations", "ownerReferences", "finalizers")
_ENVELOPE = ("apiVersion", "kind", "metadata", "status")
_META_ORDER = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    *USER_META,
)


def object_key(obj: Obj) -> tuple[str, str, str | None]:
    """``(kind, name, namespace)`` of a wire dict; a missing name is a caller bug."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not obj.get("kind") or not name:
        raise ValueError("an object needs kind and metadata.name to be stored")
    return obj["kind"], name, meta.get("namespace") or None


def body(obj: Obj) -> dict[str, Any]:
    """The user-owned top-level fields: everything but the envelope and status."""
    return {k: v for k, v in obj.items() if k not in _ENVELOPE}


def check_version(stored: Obj, wanted: str | None) -> None:
    """Raise Conflict when the caller named a resourceVersion that is no longer current."""
    if wanted in (None, ""):
        return
    current = stored["metadata"]["resourceVersion"]
    if str(wanted) != current:
        kind, name, ns = object_key(stored)
        where = f"{ns}/{name}" if ns else name
        raise Conflict(
            f"{kind} {where} was modified (resourceVersion {wanted} is stale, current is {current}); "
            "read it again and retry"
        )


def new_object(obj: Obj, revision: int, uid: str) -> Obj:
    """The stored form of a created object: server fields assigned, caller's ones ignored."""
    meta = obj.get("metadata") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace") if meta.get(k)}
    out_meta.update(uid=uid, resourceVersion=str(revision), generation=1, creationTimestamp=now_iso())
    out_meta.update({k: meta[k] for k in USER_META if meta.get(k)})
    return _assemble(obj, out_meta, body(obj), obj.get("status"))


def merge_update(stored: Obj, new: Obj) -> Obj | None:
    """``update``: new user metadata and body, stored status. None when nothing changed.

    ``metadata.deletionTimestamp`` may be set once (a graceful-deletion request: the owner of
    the object, e.g. a pod's executor, finishes it and deletes the object); once set it stays,
    whatever later updates carry.
    """
    meta = new.get("metadata") or {}
    user_meta = {k: meta[k] for k in USER_META if meta.get(k)}
    deleting = meta.get("deletionTimestamp")
    if deleting and not stored["metadata"].get("deletionTimestamp"):
        return _merged(stored, user_meta, body(new), deletion=str(deleting))
    return _merged(stored, user_meta, body(new))


def merge_apply(stored: Obj, new: Obj) -> Obj | None:
    """``apply``: like update, except that ownerReferences and finalizers a document does not
    mention are kept (controllers own them; a re-applied manifest must not strip them)."""
    meta = new.get("metadata") or {}
    user_meta = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    for key in ("ownerReferences", "finalizers"):
        value = meta[key] if key in meta else stored["metadata"].get(key)
        if value:
            user_meta[key] = value
    return _merged(stored, user_meta, body(new))


def merge_status(stored: Obj, new: Obj) -> Obj | None:
    """``update_status``: only status changes; None when it is equal to the stored one."""
    status = new.get("status")
    if status == stored.get("status"):
        return None
    return _assemble(stored, dict(stored["metadata"]), body(stored), status)


def apply_action(stored: Obj | None, new: Obj) -> Literal["created", "configured", "unchanged"]:
    """What ``apply`` of ``new`` does to ``stored`` (None: absent)."""
    if stored is None:
        return "created"
    return "unchanged" if merge_apply(stored, new) is None else "configured"


def with_revision(obj: Obj, revision: int) -> Obj:
    """Stamp ``obj`` (in place) with the write's revision and return it."""
    obj["metadata"]["resourceVersion"] = str(revision)
    return obj


def _merged(
    stored: Obj, user_meta: dict[str, Any], new_body: dict[str, Any], deletion: str | None = None
) -> Obj | None:
    old_meta = stored["metadata"]
    old_user = {k: old_meta[k] for k in USER_META if old_meta.get(k)}
    old_body = body(stored)
    if user_meta == old_user and new_body == old_body and deletion is None:
        return None
    meta = {k: v for k, v in old_meta.items() if k not in USER_META}
    meta.update(user_meta)
    if deletion is not None:
        meta["deletionTimestamp"] = deletion
    if new_body != old_body:
        meta["generation"] = int(old_meta.get("generation") or 0) + 1
    return _assemble(stored, meta, new_body, stored.get("status"))


def _assemble(template: Obj, meta: dict[str, Any], body_: dict[str, Any], status: Any) -> Obj:
    out: Obj = {"apiVersion": template.get("apiVersion"), "kind": template["kind"]}
    out["metadata"] = {k: meta[k] for k in _META_ORDER if k in meta}
    out.update(body_)
    if status is not None:
        out["status"] = status
    return out
