"""Follow one kind of object of a cluster: a list, then a watch from its resourceVersion.

An :class:`Informer` lists once when started (on the caller's thread, so the caller knows the
cluster before it returns), then watches on a thread of its own and hands every change to a
handler as ``(type, object)`` with ``type`` ADDED, MODIFIED or DELETED and the object as a
wire dict. A watch ends now and then (the server's timeout, a dropped connection): it is
resumed from the last resourceVersion seen. When that version is too old (410 Gone) the kind
is listed again and the differences are handed over as the events that were missed, deletions
included, so the handler's picture never drifts from the cluster's.

Objects are read as JSON, not through the client's typed models: they are faster to parse and
keep fields the client's models do not know.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from muster.runtime.kubernetes.api import close_response, interrupt_response, read_json

__all__ = ["Handler", "Informer", "object_key"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[str, Obj], None]
_GONE = 410


def object_key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


class _Expired(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer:
    """One kind, followed on a thread. ``list_fn`` is a client list call (``core.list_node``,
    ``core.list_pod_for_all_namespaces``); ``handler`` runs on the informer's thread."""

    def __init__(
        self,
        what: str,
        list_fn: Callable[..., Any],
        handler: Handler,
        *,
        label_selector: str | None = None,
        watch_seconds: int = 300,
        retry_seconds: float = 1.0,
    ) -> None:
        self.what = what
        self._list = list_fn
        self._handler = handler
        self._selector = label_selector
        self._watch_seconds = watch_seconds
        self._retry = retry_seconds
        self._objects: dict[tuple[str, str], Obj] = {}
        self._version = ""
        self._stop = threading.Event()
        self._response: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """List (raising the API's error if that fails), then watch on a thread."""
        self._relist()
        self._thread = threading.Thread(target=self._run, name=f"muster-watch-{self.what}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            interrupt_response(response)
        if self._thread is not None:
            self._thread.join(timeout=10)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        expired = False
        while not self._stop.is_set():
            try:
                if expired:
                    self._relist()
                    expired = False
                self._watch()
            except _Expired:
                expired = True
            except Exception as exc:  # a dropped connection, an API server restarting
                if self._stop.is_set():
                    return
                log.warning("watch of %s failed (%s); resuming in %.0fs", self.what, exc, self._retry)
                self._stop.wait(self._retry)

    def _watch(self) -> None:
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": self._version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": self._watch_seconds,
            # A connection silent for longer than the server's own timeout is dead.
            "_request_timeout": (10, self._watch_seconds + 30),
            "_preload_content": False,
        }
        if self._selector:
            kwargs["label_selector"] = self._selector
        response = self._list(**kwargs)
        self._response = response
        try:
            for line in _lines(response):
                if self._stop.is_set():
                    return
                self._event(json.loads(line))
        finally:
            self._response = None
            close_response(response)

    def _event(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == _GONE:
                raise _Expired()
            raise RuntimeError(f"watch error: {obj.get('message') or obj}")
        self._version = (obj.get("metadata") or {}).get("resourceVersion") or self._version
        if kind == "BOOKMARK":
            return
        key = object_key(obj)
        if kind == "DELETED":
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
        self._deliver(str(kind), obj)

    def _relist(self) -> None:
        kwargs: dict[str, Any] = {"_preload_content": False, "_request_timeout": (10, 120)}
        if self._selector:
            kwargs["label_selector"] = self._selector
        body = read_json(self._list(**kwargs))
        fresh = {object_key(o): o for o in body.get("items") or []}
        for key, old in list(self._objects.items()):
            if key not in fresh:
                del self._objects[key]
                self._deliver("DELETED", old)
        for key, obj in fresh.items():
            old = self._objects.get(key)
            self._objects[key] = obj
            if old is None:
                self._deliver("ADDED", obj)
            elif _version(old) != _version(obj):
                self._deliver("MODIFIED", obj)
        self._version = (body.get("metadata") or {}).get("resourceVersion") or ""

    def _deliver(self, kind: str, obj: Obj) -> None:
        try:
            self._handler(kind, obj)
        except Exception:  # a handler's bug must not end the watch
            log.exception("handling %s %s %s failed", kind, self.what, object_key(obj))


def _lines(response: Any) -> Iterator[str]:
    from kubernetes.watch.watch import iter_resp_lines

    yield from iter_resp_lines(response)


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
