"""CRUD of any kind: request bodies checked against the URL, validated by muster.api,
written through the store with the server-owned-field rules.

``status`` is the server's: create and replace drop it (validation does), and only the
status subresource writes it, where everything but ``status`` and the precondition
``metadata.resourceVersion`` is taken from the stored object.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.registry import KindInfo
from muster.server.encoding import dumps
from muster.server.errors import ApiError
from muster.store import Store, WatchEvent, parse_selector
from muster.store.base import Obj
from muster.store.capabilities import JsonListing
from muster.store.watch import parse_revision

__all__ = ["ObjectService"]


class ObjectService:
    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self, info: KindInfo, namespace: str | None, label_selector: str | None) -> bytes:
        """The ``{Kind}List`` as encoded JSON (objects are spliced in as stored when the store
        can give them so: a 10k-item list is then neither decoded nor re-encoded)."""
        selector = parse_selector(label_selector)
        if isinstance(self.store, JsonListing):
            version, texts = self.store.list_json(info.kind, namespace, selector)
            items = ("[" + ",".join(texts) + "]").encode()
        else:
            result = self.store.list(info.kind, namespace, selector)
            version, items = result.resource_version, dumps(result.items)
        head = dumps(
            {"apiVersion": API_VERSION, "kind": f"{info.kind}List", "metadata": {"resourceVersion": version}}
        )
        return head[:-1] + b',"items":' + items + b"}"

    def get(self, info: KindInfo, namespace: str | None, name: str) -> Obj:
        return self.store.get(info.kind, name, namespace)

    def create(self, info: KindInfo, namespace: str | None, body: Any) -> Obj:
        return self.store.create(_validated(info, namespace, None, body))

    def replace(self, info: KindInfo, namespace: str | None, name: str, body: Any) -> Obj:
        return self.store.update(_validated(info, namespace, name, body))

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
        return self.store.update_status(obj)

    def delete(self, info: KindInfo, namespace: str | None, name: str, resource_version: str | None) -> Obj:
        _parsed(resource_version)  # a malformed precondition is a 400, not a failed one (409)
        return self.store.delete(info.kind, name, namespace, resource_version=resource_version or None)

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
