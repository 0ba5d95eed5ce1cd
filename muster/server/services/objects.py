"""CRUD of any kind: request bodies checked against the URL, validated by muster.api,
written through the store with the server-owned-field rules.

``status`` is the server's: create and replace drop it (validation does), and only the
status subresource writes it, where everything but ``status`` and the precondition
``metadata.resourceVersion`` is taken from the stored object.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.registry import KindInfo
from muster.server.encoding import dumps
from muster.server.errors import ApiError
from muster.server.services.paging import ListOf, read_page
from muster.store import Conflict, NotFound, Store, WatchEvent, parse_selector
from muster.store.base import Obj
from muster.store.capabilities import JsonListing
from muster.store.watch import parse_revision

__all__ = ["ObjectService", "merge_patch"]

_PATCH_ATTEMPTS = 5
# ServiceAccount token records (muster.server.access.tokens) live in their namespace too.
NAMESPACED_INTERNAL_KIND = "Token"


class ObjectService:
    """``observe`` and ``forget`` see every object written and deleted (the access policy
    follows writes of its kinds at once)."""

    def __init__(
        self,
        store: Store,
        observe: Callable[[Obj], None] = lambda _obj: None,
        forget: Callable[[Obj], None] = lambda _obj: None,
    ) -> None:
        self.store = store
        self.observe = observe
        self.forget = forget

    def list(
        self,
        info: KindInfo,
        namespace: str | None,
        label_selector: str | None,
        keep: Callable[[Obj], bool] | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> bytes:
        """The ``{Kind}List`` as encoded JSON (objects are spliced in as stored when the store
        can give them so: a 10k-item list is then neither decoded nor re-encoded); ``keep``
        narrows it to what the caller may see. With ``limit`` or ``continue_token``, one page
        of it (:mod:`muster.server.services.paging`), with ``metadata.continue`` when more follow."""
        selector = parse_selector(label_selector)
        meta: dict[str, str] = {}
        if limit is not None or continue_token:
            of = ListOf(info.kind, namespace, label_selector or None)
            version, items, more = read_page(self.store, of, selector, limit, continue_token, keep)
            if more is not None:
                meta["continue"] = more
        elif keep is not None:
            result = self.store.list(info.kind, namespace, selector)
            version, items = result.resource_version, dumps([o for o in result.items if keep(o)])
        elif isinstance(self.store, JsonListing):
            version, texts = self.store.list_json(info.kind, namespace, selector)
            items = ("[" + ",".join(texts) + "]").encode()
        else:
            result = self.store.list(info.kind, namespace, selector)
            version, items = result.resource_version, dumps(result.items)
        head = dumps(
            {
                "apiVersion": API_VERSION,
                "kind": f"{info.kind}List",
                "metadata": {"resourceVersion": version, **meta},
            }
        )
        return head[:-1] + b',"items":' + items + b"}"

    def get(self, info: KindInfo, namespace: str | None, name: str) -> Obj:
        return self.store.get(info.kind, name, namespace)

    def create(self, info: KindInfo, namespace: str | None, body: Any) -> Obj:
        return self._seen(self.store.create(_validated(info, namespace, None, body)))

    def replace(self, info: KindInfo, namespace: str | None, name: str, body: Any) -> Obj:
        return self._seen(self.store.update(_validated(info, namespace, name, body)))

    def replace_status(self, info: KindInfo, namespace: str | None, name: str, body: Any) -> Obj:
        doc = _checked_body(info, namespace, name, body)
        stored = self.store.get(info.kind, name, namespace)
        merged = copy.deepcopy(stored)
        merged["status"] = doc.get("status")
        if merged["status"] is None:
            merged.pop("status")
        obj = _validate(merged, info, keep_status=True)
        # The caller's precondition, not the stored version: a stale status write must conflict.
        obj["metadata"]["resourceVersion"] = doc["metadata"].get("resourceVersion")
        return self._seen(self.store.update_status(obj))

    def patch(self, info: KindInfo, namespace: str | None, name: str, patch: Any) -> Obj:
        """Apply a JSON merge patch (RFC 7386) to the stored object and replace it with the
        result, validated like a PUT. A patch that names ``metadata.resourceVersion`` is a
        precondition; otherwise a concurrent change is merged into, as Kubernetes does."""
        if not isinstance(patch, dict):
            raise ApiError(400, f"a merge patch must be a JSON object (a partial {info.kind})")
        pinned = (
            (patch.get("metadata") or {}).get("resourceVersion")
            if isinstance(patch.get("metadata"), dict)
            else None
        )
        for _ in range(_PATCH_ATTEMPTS):
            stored = self.store.get(info.kind, name, namespace)
            merged = merge_patch({k: v for k, v in stored.items() if k != "status"}, patch)
            if not isinstance(merged.get("metadata"), dict):
                raise ApiError(400, "metadata cannot be removed by a patch")
            merged["metadata"]["resourceVersion"] = pinned or stored["metadata"]["resourceVersion"]
            try:
                return self._seen(self.store.update(_validated(info, namespace, name, merged)))
            except Conflict:
                if pinned:
                    raise
        raise ApiError(409, f"{info.kind} {name} kept changing; try again", "Conflict")

    def delete_collection(self, info: KindInfo, namespace: str | None, label_selector: str | None) -> bytes:
        """Delete every object of the collection (matching ``label_selector``); answers the
        ``{Kind}List`` of what was deleted (each in its last state)."""
        selector = parse_selector(label_selector)
        deleted = []
        for obj in self.store.list(info.kind, namespace, selector).items:
            meta = obj["metadata"]
            try:
                deleted.append(self.delete(info, meta.get("namespace"), meta["name"], None))
            except NotFound:
                continue  # gone meanwhile
        head = dumps({"apiVersion": API_VERSION, "kind": f"{info.kind}List", "metadata": {}})
        return head[:-1] + b',"items":' + dumps(deleted) + b"}"

    def delete(self, info: KindInfo, namespace: str | None, name: str, resource_version: str | None) -> Obj:
        _parsed(resource_version)  # a malformed precondition is a 400, not a failed one (409)
        if info.kind == "Namespace":
            self.store.get("Namespace", name)  # 404 before anything goes
            self._empty_namespace(name)
        deleted = self.store.delete(info.kind, name, namespace, resource_version=resource_version or None)
        self.forget(deleted)
        return deleted

    def _empty_namespace(self, namespace: str) -> None:
        """Delete what lives in ``namespace`` (its Namespace goes last): every object but the pods
        and Workloads that have an owner, which the garbage collector stops and deletes with
        their owners (a running pod must be stopped, not forgotten)."""
        for info in registry.kinds():
            if not info.namespaced:
                continue
            for obj in self.store.list(info.kind, namespace).items:
                if info.kind in ("Pod", "Workload") and obj["metadata"].get("ownerReferences"):
                    continue
                try:
                    self.forget(self.store.delete(info.kind, obj["metadata"]["name"], namespace))
                except NotFound:
                    continue
        for token in self.store.list(NAMESPACED_INTERNAL_KIND, namespace).items:
            with contextlib.suppress(NotFound):
                self.forget(self.store.delete(NAMESPACED_INTERNAL_KIND, token["metadata"]["name"], namespace))

    def watch(
        self, info: KindInfo, namespace: str | None, resource_version: str | None, timeout: float | None
    ) -> Iterator[WatchEvent]:
        """Open a watch; raises now (not after the response started) for a ``resource_version``
        beyond the store's head (400, as kube-apiserver's "Too large resource version": no such
        revision was ever written, so waiting for it could only hang) or compacted away (410)."""
        since = self.check_revision(resource_version)
        if since is not None:
            probe = self.store.watch(info.kind, namespace, since, timeout=0)
            try:
                next(probe, None)
            finally:
                getattr(probe, "close", lambda: None)()
        return self.store.watch(info.kind, namespace, since, timeout=timeout)

    def check_revision(self, resource_version: str | None) -> int | None:
        """``resource_version`` as a revision (None when not given); 400 when it is not a
        revision or is newer than anything the store has written."""
        since = _parsed(resource_version)
        if since is not None:
            head = self.store.revision()
            if since > head:
                raise ApiError(
                    400,
                    f"Too large resource version: {since}, current: {head}; list again and watch from "
                    "the list's metadata.resourceVersion",
                    reason="ResourceVersionTooLarge",
                    errors=[
                        {"path": "resourceVersion", "rule": f"must be <= {head}", "got": resource_version}
                    ],
                )
        return since

    def _seen(self, obj: Obj) -> Obj:
        self.observe(obj)
        return obj


def _parsed(resource_version: str | None) -> int | None:
    try:
        return parse_revision(resource_version)
    except ValueError as exc:
        raise ApiError(
            400, str(exc), errors=[{"path": "resourceVersion", "rule": "must be a decimal revision number"}]
        ) from None


def _validated(info: KindInfo, namespace: str | None, name: str | None, body: Any) -> Obj:
    return _validate(_checked_body(info, namespace, name, body), info, keep_status=False)


def _checked_body(info: KindInfo, namespace: str | None, name: str | None, body: Any) -> dict[str, Any]:
    """The body with apiVersion, kind, namespace and name filled from the URL where absent;
    400 where they contradict it."""
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object (a {info.kind})")
    doc = dict(body)
    doc.setdefault("apiVersion", API_VERSION)
    doc.setdefault("kind", info.kind)
    if doc["apiVersion"] != API_VERSION or doc["kind"] != info.kind:
        raise ApiError(
            400,
            f"this endpoint takes {API_VERSION} {info.kind}, got {doc['apiVersion']} {doc['kind']}; "
            "send other kinds (including converted ones) to POST /apis/muster.dev/v1/apply",
        )
    meta = doc.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ApiError(400, "metadata must be a JSON object")
    meta = doc["metadata"] = dict(meta)
    if info.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(
                400,
                f"metadata.namespace {meta['namespace']!r} does not match the URL's namespace {namespace!r}",
            )
        meta["namespace"] = namespace
    if name is not None:
        if meta.get("name") and meta["name"] != name:
            raise ApiError(400, f"metadata.name {meta['name']!r} does not match the name in the URL {name!r}")
        meta["name"] = name
    return doc


def _validate(doc: dict[str, Any], info: KindInfo, keep_status: bool) -> Obj:
    validated = registry.validate(doc, keep_status=keep_status)
    assert validated.obj is not None and validated.info == info  # native kind, checked above
    return validated.obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
