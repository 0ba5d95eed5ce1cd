"""All-or-nothing apply of many documents (``POST /apis/muster.dev/v1/apply``).

Every document is validated (and converted, for foreign kinds) before anything is written;
one bad document fails the request with 422 and every field error tagged with its 0-based
``document`` index, storing nothing. The valid set is then written in one store
transaction, so a conflict also leaves everything as it was. Queued work applied into a
namespace nobody made creates it in the same transaction, or is refused
(:mod:`muster.server.services.namespaces`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from muster.api import registry
from muster.api.errors import FieldError, InvalidObject
from muster.api.limits import shown
from muster.server.errors import ApiError
from muster.server.services.namespaces import (
    created_warning,
    namespace_object,
    refused_error,
    unknown_namespaces,
)
from muster.store import NotFound, Store
from muster.store.base import Obj
from muster.store.objects import apply_action, check_version, object_key

__all__ = ["apply_documents"]


def apply_documents(
    store: Store,
    documents: Sequence[Any],
    dry_run: bool = False,
    authorize: Callable[[list[tuple[int, Obj]]], None] | None = None,
    observe: Callable[[Obj], None] | None = None,
    namespace_queue: str = "default",
) -> list[dict[str, Any]]:
    """Validate then apply; returns one result per document, in order. ``authorize`` sees
    every valid (document index, object) before anything is written and raises to refuse the
    whole request; ``observe`` sees every object written. ``namespace_queue`` is the
    ClusterQueue a new Namespace's default LocalQueue points at ('' for none: then queued work
    is never applied into a namespace nobody made)."""
    results: list[dict[str, Any]] = []
    objects: list[tuple[int, Obj]] = []
    errors: list[dict[str, Any]] = []
    seen: dict[tuple[str, str, str | None], int] = {}
    for index, doc in enumerate(documents):
        try:
            validated = registry.validate(doc)
        except InvalidObject as exc:
            errors += [_tagged(e, index, doc) for e in exc.errors]
            results.append({})
            continue
        warnings = list(validated.warnings)
        if validated.obj is None:  # accepted, creates nothing (a v1 Namespace)
            results.append(_result(doc, "unchanged", warnings))
            continue
        key = object_key(validated.obj)
        if key in seen:
            errors.append(
                _tagged(
                    FieldError("metadata.name", f"repeats document {seen[key]} (the same object)"), index, doc
                )
            )
        seen[key] = index
        objects.append((index, validated.obj))
        results.append(_result(validated.obj, "", warnings))
    if errors:
        bad = sorted({e["document"] for e in errors})
        raise ApiError(
            422,
            f"{len(errors)} error(s) in document(s) {', '.join(map(str, bad))}; nothing was applied",
            errors=errors,
        )
    created = _new_namespaces(store, objects, results, documents, authorize, namespace_queue)
    if authorize is not None:
        authorize([*created, *objects])
    valid = [obj for _, obj in (*created, *objects)]
    if dry_run:
        actions = _dry_run(store, valid)
    else:
        applied = store.apply(valid)
        if observe is not None:
            for r in applied:
                observe(r.object)
        actions = [r.action for r in applied]
    for (index, _obj), action in zip(objects, actions[len(created) :], strict=True):
        results[index]["action"] = action
    return results


def _new_namespaces(
    store: Store,
    objects: list[tuple[int, Obj]],
    results: list[dict[str, Any]],
    documents: Sequence[Any],
    authorize: Callable[[list[tuple[int, Obj]]], None] | None,
    queue: str,
) -> list[tuple[int, Obj]]:
    """The Namespaces to create with ``objects`` (each with the document that needs it), the
    warning added to that document's result; 422 naming each one the applier may not create."""
    missing = unknown_namespaces(store, objects)
    created = [(index, namespace_object(ns)) for ns, index in missing.items()]
    if not created:
        return []
    refused = []
    for (index, obj), ns in zip(created, missing, strict=True):
        if not queue:
            why = "new namespaces get no default LocalQueue here: MUSTER_NAMESPACE_DEFAULT_QUEUE is empty"
            refused.append(_tagged(refused_error(ns, why), index, documents[index]))
            continue
        try:
            if authorize is not None:
                authorize([(index, obj)])
        except ApiError as exc:
            if exc.code != 403:
                raise
            refused.append(_tagged(refused_error(ns, "no create on namespaces"), index, documents[index]))
    if refused:
        raise ApiError(
            422,
            f"{len(refused)} error(s) in document(s) {', '.join(str(e['document']) for e in refused)}; "
            "nothing was applied",
            errors=refused,
        )
    for ns, index in missing.items():
        results[index]["warnings"].append(created_warning(ns))
    return created


def _dry_run(store: Store, objects: list[Obj]) -> list[str]:
    """The actions apply would take, checking the same preconditions, writing nothing."""
    actions = []
    for obj in objects:
        kind, name, ns = object_key(obj)
        try:
            stored: Obj | None = store.get(kind, name, ns)
        except NotFound:
            stored = None
        if stored is not None:
            check_version(stored, obj["metadata"].get("resourceVersion"))
        actions.append(apply_action(stored, obj))
    return actions


def _result(obj: Any, action: str, warnings: list[str]) -> dict[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    return {
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace"),
        "name": meta.get("name", ""),
        "action": action,
        "warnings": warnings,
    }


def _tagged(error: FieldError, index: int, doc: Any) -> dict[str, Any]:
    out = error.to_dict()
    out["document"] = index
    if isinstance(doc, dict):
        out["kind"] = shown(str(doc.get("kind", "")))
        meta = doc.get("metadata")
        if isinstance(meta, dict) and meta.get("name"):
            out["name"] = shown(str(meta["name"]))
    return out
