"""The one HTTP client of the Muster REST API; the CLI, the Python SDK and the tests use it.

Kinds are named the way users type them (``TrainingJob``, ``trainingjobs``, ``tj``) and
resolved through :func:`muster.api.registry.lookup`. Objects are wire dicts. Error answers
raise the typed errors of :mod:`muster.sdk.errors`; no server at the URL raises
:class:`~muster.sdk.errors.ApiUnavailable`.

Where the server and token come from (:func:`discover`), first match wins: explicit
arguments (``--server``/``--token``), ``MUSTER_SERVER``/``MUSTER_TOKEN``, then the
``server.json`` and ``credentials`` a ``muster up`` wrote into ``$MUSTER_HOME``.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from muster.api.base import API_VERSION
from muster.api.registry import KindInfo, lookup
from muster.config import read_credentials, read_server_file, settings
from muster.sdk.errors import ApiUnavailable, error_from_response

__all__ = ["DEFAULT_SERVER", "Client", "LogStream", "WatchStream", "discover"]

DEFAULT_SERVER = "http://127.0.0.1:7070"
_PREFIX = f"/apis/{API_VERSION}"
# A stream may stay quiet for as long as what it follows does.
_STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)
T = TypeVar("T")


def discover(
    server: str | None = None, token: str | None = None, home: str | Path | None = None
) -> tuple[str, str | None]:
    """``(server URL, token)`` by the discovery order above; the URL defaults to
    :data:`DEFAULT_SERVER` and the token to None when nothing names one."""
    s = settings(home=home, server=server, token=token)
    url = s.server
    if url is None:
        written = read_server_file(s)
        url = written.get("url") if written else None
    tok = s.token
    if tok is None:
        creds = read_credentials(s.credentials_path)
        tok = creds["token"] if creds else None
    return (url or DEFAULT_SERVER).rstrip("/"), tok


class Client:
    """A connection to one server. Thread-safe for requests; close it (or use ``with``)."""

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.server, headers=headers, timeout=timeout)

    @classmethod
    def from_env(
        cls, server: str | None = None, token: str | None = None, home: str | Path | None = None
    ) -> Client:
        """A client for the server :func:`discover` finds."""
        url, tok = discover(server, token, home)
        return cls(url, tok)

    # -- objects -------------------------------------------------------------------------

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        info = lookup(kind)
        return self._request("GET", _object_path(info, name, namespace))

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> dict[str, Any]:
        """The ``{Kind}List`` (``items`` and ``metadata.resourceVersion``); for a namespaced
        kind, ``namespace=None`` lists every namespace."""
        info = lookup(kind)
        params = {"labelSelector": selector} if selector else None
        return self._request("GET", _collection_path(info, namespace), params=params)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        info = lookup(obj.get("kind", ""))
        return self._request("POST", _collection_path(info, _namespace_of(info, obj)), json=obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        info, name, ns = self._key(obj)
        return self._request("PUT", _object_path(info, name, ns), json=obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        info, name, ns = self._key(obj)
        return self._request("PUT", _object_path(info, name, ns) + "/status", json=obj)

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> dict[str, Any]:
        info = lookup(kind)
        params = {"resourceVersion": resource_version} if resource_version else None
        return self._request("DELETE", _object_path(info, name, namespace), params=params)

    def apply(self, documents: Sequence[Any], dry_run: bool = False) -> list[dict[str, Any]]:
        """Create or update every document, all or none; one result dict per document
        (kind, namespace, name, action, warnings). A bad document raises Invalid whose
        ``errors[].document`` is its 0-based index."""
        body = {"documents": list(documents), "dryRun": dry_run}
        return self._request("POST", f"{_PREFIX}/apply", json=body)["results"]

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        selector: str | None = None,
        timeout: float | None = None,
    ) -> WatchStream:
        """Events ``{"type": ..., "object": ...}`` after ``resource_version`` (default: from
        now), until ``timeout`` quiet seconds (None: until closed). A compacted
        resource_version raises ResourceExpired. The stream may be closed from any thread."""
        info = lookup(kind)
        params: dict[str, Any] = {"watch": "true"}
        if resource_version:
            params["resourceVersion"] = resource_version
        if selector:
            params["labelSelector"] = selector
        if timeout is not None:
            params["timeoutSeconds"] = timeout
        request = self._http.build_request(
            "GET", _collection_path(info, namespace), params=params, timeout=_STREAM_TIMEOUT
        )
        return WatchStream(self._http, request, self.server)

    def logs(
        self,
        name: str,
        namespace: str | None = None,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        tail_lines: int | None = None,
    ) -> LogStream:
        """A pod container's output, line by line (newline kept). ``follow`` streams new
        output until the container ends; ``previous`` reads the incarnation before the
        current one; ``tail_lines`` starts at the last N lines. Logs outlive their pods.
        No such log raises ApiNotFound; a pod that has not started yet raises an ApiError
        with reason ``PodPending`` (both on the first ``next()``, or on ``open()``). The
        stream may be closed from any thread."""
        params: dict[str, Any] = {}
        if container:
            params["container"] = container
        if follow:
            params["follow"] = "true"
        if previous:
            params["previous"] = "true"
        if tail_lines is not None:
            params["tailLines"] = tail_lines
        path = f"{_collection_path(lookup('Pod'), namespace or 'default')}/{name}/log"
        request = self._http.build_request(
            "GET", path, params=params, headers={"Accept": "text/plain"}, timeout=_STREAM_TIMEOUT
        )
        return LogStream(self._http, request, self.server)

    # -- server --------------------------------------------------------------------------

    def view(self, path: str, **params: Any) -> Any:
        """A read-only view under ``/api/v1`` (``why/...``, ``doctor``, ``gpus``, ``queues/usage``,
        ``nodes/usage``; docs/rest-api.md); ``params`` are its query parameters."""
        query = {k: v for k, v in params.items() if v is not None}
        return self._request("GET", f"/api/v1/{path.lstrip('/')}", params=query or None)

    def inject_fault(self, node: str, fault: dict[str, Any]) -> dict[str, Any]:
        """Testing only: make a fake GPU of ``node`` fail (``{"gpu": 1, "xid": 79}``, ``lost``,
        ``clear``) or report readings; the GPU as the node now reports it."""
        return self._request("POST", f"{_PREFIX}/nodes/{node}/fault-injection", json=fault)

    def interrupt_node(self, node: str, notice: dict[str, Any] | None = None) -> dict[str, Any]:
        """Testing and drills: a spot interruption notice for a pool node (``{"inSeconds": 120}``,
        or ``{"time": RFC 3339, "action": "terminate"}``); the node's NodeClaim as it is now."""
        return self._request("POST", f"{_PREFIX}/nodes/{node}/interruption", json=notice or {})

    def retry_workflow(self, name: str, namespace: str | None = None) -> list[str]:
        """Retry a failed workflow (``muster retry``); the tasks that run again. A workflow that
        did not fail is refused (:class:`ObjectConflict`)."""
        path = f"{_PREFIX}/namespaces/{namespace or 'default'}/workflows/{name}/retry"
        return self._request("POST", path)["tasks"]

    def health(self) -> bool:
        """True when a server answers ``/healthz`` (no token needed)."""
        try:
            return self._http.get("/healthz", timeout=5.0).status_code == 200
        except httpx.TransportError:
            return False

    def version(self) -> dict[str, Any]:
        return self._request("GET", "/version")

    def metrics(self) -> str:
        resp = self._send("GET", "/metrics")
        return resp.text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    def _key(self, obj: dict[str, Any]) -> tuple[KindInfo, str, str | None]:
        info = lookup(obj.get("kind", ""))
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("the object needs metadata.name")
        return info, name, _namespace_of(info, obj)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiUnavailable(self.server, _cause(exc)) from exc
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, _json_or_text(resp))
        return resp


class _Stream(Iterator[T]):
    """A streaming response read item by item; the request is sent on the first ``next()``.
    Subclasses say how the body turns into items (:meth:`_items`)."""

    def __init__(self, http: httpx.Client, request: httpx.Request, server: str) -> None:
        self._http = http
        self._request = request
        self._server = server
        self._response: httpx.Response | None = None
        self._items: Iterator[T] | None = None
        self._closed = False  # by close(): the reader stops quietly, whatever the socket says
        self._reading = False

    def __iter__(self) -> _Stream[T]:
        return self

    def __next__(self) -> T:
        if self._closed:
            raise StopIteration
        self._reading = True
        try:
            return self._next()
        except (httpx.TransportError, httpx.StreamError) as exc:
            if self._closed:
                raise StopIteration from None
            self.close()
            raise ApiUnavailable(self._server, _cause(exc)) from exc
        finally:
            self._reading = False
            if self._closed and self._response is not None:
                self._response.close()

    def open(self) -> None:
        """Send the request now, so an error answer (404, ...) raises here, not on ``next()``."""
        if self._items is None and not self._closed:
            try:
                self._open()
            except (httpx.TransportError, httpx.StreamError) as exc:
                self.close()
                raise ApiUnavailable(self._server, _cause(exc)) from exc

    def close(self) -> None:
        """End the stream; a ``next()`` blocked in another thread then stops."""
        self._closed = True
        if self._response is None:
            return
        if self._reading:
            # Another thread is blocked reading: closing the socket would not wake it (and the
            # connection's locks are its); shutting the socket down does, and it cleans up.
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        else:
            self._response.close()

    def __enter__(self) -> _Stream[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _open(self) -> None:
        self._response = self._http.send(self._request, stream=True)
        if self._response.status_code >= 400:
            self._response.read()
            self.close()
            raise error_from_response(self._response.status_code, _json_or_text(self._response))
        self._items = self._parse(self._response)

    def _next(self) -> T:
        if self._items is None:
            self._open()
        assert self._items is not None
        for item in self._items:
            return item
        self.close()
        raise StopIteration

    def _parse(self, response: httpx.Response) -> Iterator[T]:
        raise NotImplementedError


class WatchStream(_Stream[dict[str, Any]]):
    """The events of one watch request."""

    def _parse(self, response: httpx.Response) -> Iterator[dict[str, Any]]:
        for line in response.iter_lines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("type") == "ERROR":
                err = event.get("object") or {}
                self.close()
                raise error_from_response(int((err.get("error") or {}).get("code", 500)), err)
            yield event


class LogStream(_Stream[str]):
    """The lines of one pod log request, newline kept (a last line may lack it)."""

    def _parse(self, response: httpx.Response) -> Iterator[str]:
        # Split on "\n" only: a progress bar's "\r" stays inside its line, as in the file.
        pending = ""
        for text in response.iter_text():
            pending += text
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line + "\n"
        if pending:
            yield pending


def _collection_path(info: KindInfo, namespace: str | None) -> str:
    if info.namespaced and namespace:
        return f"{_PREFIX}/namespaces/{namespace}/{info.plural}"
    return f"{_PREFIX}/{info.plural}"


def _object_path(info: KindInfo, name: str, namespace: str | None) -> str:
    ns = (namespace or "default") if info.namespaced else None
    return f"{_collection_path(info, ns)}/{name}"


def _namespace_of(info: KindInfo, obj: dict[str, Any]) -> str | None:
    if not info.namespaced:
        return None
    return (obj.get("metadata") or {}).get("namespace") or "default"


def _json_or_text(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _cause(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
