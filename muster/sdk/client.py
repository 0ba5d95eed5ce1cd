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

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from muster.api.base import API_VERSION
from muster.api.registry import KindInfo, lookup
from muster.config import read_credentials, read_server_file, settings
from muster.sdk.errors import ApiUnavailable, error_from_response

__all__ = ["DEFAULT_SERVER", "Client", "discover"]

DEFAULT_SERVER = "http://127.0.0.1:7070"
_PREFIX = f"/apis/{API_VERSION}"


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
    ) -> Iterator[dict[str, Any]]:
        """Events ``{"type": ..., "object": ...}`` after ``resource_version`` (default: from
        now), until ``timeout`` quiet seconds (None: until closed). A compacted
        resource_version raises ResourceExpired."""
        info = lookup(kind)
        params: dict[str, Any] = {"watch": "true"}
        if resource_version:
            params["resourceVersion"] = resource_version
        if selector:
            params["labelSelector"] = selector
        if timeout is not None:
            params["timeoutSeconds"] = timeout
        path = _collection_path(info, namespace)
        try:
            with self._http.stream(
                "GET", path, params=params, timeout=httpx.Timeout(30.0, read=None)
            ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise error_from_response(resp.status_code, _json_or_text(resp))
                for line in resp.iter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        err = event.get("object") or {}
                        raise error_from_response(int((err.get("error") or {}).get("code", 500)), err)
                    yield event
        except httpx.TransportError as exc:
            raise ApiUnavailable(self.server, _cause(exc)) from exc

    # -- server --------------------------------------------------------------------------

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


def _cause(exc: httpx.TransportError) -> str:
    return str(exc) or type(exc).__name__
