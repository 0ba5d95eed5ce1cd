"""The one HTTP client of the Muster REST API; the CLI, the Python SDK and the tests use it.

Kinds are named the way users type them (``TrainingJob``, ``trainingjobs``, ``tj``) and
resolved through :func:`muster.api.kinds.lookup`. Objects are wire dicts. Error answers
raise the typed errors of :mod:`muster.sdk.errors`; no server at the URL raises
:class:`~muster.sdk.errors.ApiUnavailable`.

Where the server and token come from (:func:`discover`), first match wins: explicit
arguments (``--server``/``--token``), ``MUSTER_SERVER``/``MUSTER_TOKEN``, the context of the
config file (``$MUSTER_CONTEXT`` or its current-context, :mod:`muster.sdk.contexts`), then the
``server.json`` and ``credentials`` a ``muster up`` wrote into ``$MUSTER_HOME``.
"""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import SplitResult, urlsplit

from muster.api.kinds import API_VERSION, Kind, lookup
from muster.home import CREDENTIALS, SERVER_FILE, home_dir, read_credentials, read_server_file
from muster.sdk.contexts import current_context
from muster.sdk.errors import ApiUnavailable, InvalidServerUrl, error_from_response
from muster.sdk.http import Http, Response, Stream, TransportError

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_SERVER",
    "Client",
    "LogStream",
    "WatchStream",
    "discover",
    "server_url",
]

DEFAULT_SERVER = "http://127.0.0.1:7070"
# Objects per list request, as kubectl's --chunk-size.
DEFAULT_CHUNK_SIZE = 500
_PREFIX = f"/apis/{API_VERSION}"
_CONNECT_TIMEOUT = 30.0  # for a stream; its reads wait as long as what it follows stays quiet
T = TypeVar("T")


def discover(
    server: str | None = None, token: str | None = None, home: str | Path | None = None
) -> tuple[str, str | None]:
    """``(server URL, token)`` by the discovery order above; the URL defaults to
    :data:`DEFAULT_SERVER` and the token to None when nothing names one."""
    # The environment is read here directly, not through muster.config's settings: every CLI
    # call discovers, and the settings machinery costs more than the rest of a short call.
    where = home_dir(home)
    context = current_context(where)
    url, source = server or os.environ.get("MUSTER_SERVER"), "--server" if server else "MUSTER_SERVER"
    if not url and context:
        url, source = context.server, "the current context"
    if not url:
        written = read_server_file(where)
        url, source = (written.get("url") if written else None), str(where / SERVER_FILE)
    tok = token or os.environ.get("MUSTER_TOKEN") or (context.token if context else None)
    if not tok:
        creds = read_credentials(where / CREDENTIALS)
        tok = creds["token"] if creds else None
    return server_url(url or DEFAULT_SERVER, source), tok


def server_url(text: str, source: str = "the server address") -> str:
    """``text`` as a base URL: ``HOST:PORT`` (how people often write it) is taken as
    ``http://HOST:PORT``; any scheme but http and https raises :class:`InvalidServerUrl`
    naming ``source``."""
    url = text.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}"
    parts = _split(url)
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidServerUrl(
            f"{source} {text!r} is not a server address; write http://HOST:PORT "
            f"(e.g. {DEFAULT_SERVER}) or HOST:PORT"
        )
    return url


def _split(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        return None
    return parts


class Client:
    """A connection to one server. Thread-safe for requests; close it (or use ``with``)."""

    def __init__(self, server: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.server = server_url(server, "server")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            self._http = Http(self.server, headers, timeout)
        except ValueError as exc:
            raise ApiUnavailable(self.server, f"{exc}; give the server as http://HOST:PORT") from None

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

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> dict[str, Any]:
        """The whole ``{Kind}List`` (``items`` and ``metadata.resourceVersion``); for a
        namespaced kind, ``namespace=None`` lists every namespace.

        It is fetched ``chunk_size`` objects per request (as kubectl's ``--chunk-size``; 0: in
        one request), so the server never builds, nor this client parses, one huge response.
        Pages are not one snapshot (docs/rest-api.md, "Paged lists"): the list holds every
        object that existed throughout, once, and its ``metadata.resourceVersion`` is the
        first page's, so a watch from it replays every change made while the pages were read."""
        if chunk_size < 0:
            raise ValueError("chunk_size must be 0 (one request) or more")
        pages = self.list_pages(kind, namespace, selector, limit=chunk_size or None)
        whole = next(pages)
        for page in pages:
            whole["items"].extend(page["items"])
        whole["metadata"].pop("continue", None)
        return whole

    def list_pages(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        *,
        limit: int | None = DEFAULT_CHUNK_SIZE,
    ) -> Iterator[dict[str, Any]]:
        """The ``{Kind}List`` a page of at most ``limit`` objects at a time (``None``: one page
        of everything), in order of namespace and name; each page is fetched when the previous
        one has been taken, so a caller that handles a page before the next holds one at a time.
        Each page's ``metadata.resourceVersion`` is the revision it was read at."""
        if limit is not None and limit < 1:
            raise ValueError("limit must be at least 1 (or None: everything in one page)")
        path = _collection_path(lookup(kind), namespace)
        params: dict[str, Any] = {"labelSelector": selector} if selector else {}
        if limit is not None:
            params["limit"] = limit
        return self._pages(path, params)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        info = lookup(obj.get("kind", ""))
        return self._request("POST", _collection_path(info, _namespace_of(info, obj)), json_body=obj)

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        info, name, ns = self._key(obj)
        return self._request("PUT", _object_path(info, name, ns), json_body=obj)

    def update_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        info, name, ns = self._key(obj)
        return self._request("PUT", _object_path(info, name, ns) + "/status", json_body=obj)

    def delete(
        self, kind: str, name: str, namespace: str | None = None, resource_version: str | None = None
    ) -> dict[str, Any]:
        info = lookup(kind)
        params = {"resourceVersion": resource_version} if resource_version else None
        return self._request("DELETE", _object_path(info, name, namespace), params=params)

    def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        """Apply a JSON merge patch (``{"spec": {"runPolicy": {"suspend": true}}}``; ``None``
        removes a field); the object as stored."""
        info = lookup(kind)
        headers = {"Content-Type": "application/merge-patch+json"}
        return self._request("PATCH", _object_path(info, name, namespace), json_body=patch, headers=headers)

    def delete_collection(
        self, kind: str, namespace: str | None = None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Delete every object of ``kind`` in ``namespace`` (matching ``selector``); what was deleted."""
        info = lookup(kind)
        params = {"labelSelector": selector} if selector else None
        path = _collection_path(info, (namespace or "default") if info.namespaced else None)
        return self._request("DELETE", path, params=params)["items"]

    def apply(self, documents: Sequence[Any], dry_run: bool = False) -> list[dict[str, Any]]:
        """Create or update every document, all or none; one result dict per document
        (kind, namespace, name, action, warnings). A bad document raises Invalid whose
        ``errors[].document`` is its 0-based index."""
        body = {"documents": list(documents), "dryRun": dry_run}
        return self._request("POST", f"{_PREFIX}/apply", json_body=body)["results"]

    def apply_sources(
        self, sources: Sequence[tuple[str, str]], dry_run: bool = False
    ) -> list[dict[str, Any]]:
        """:meth:`apply` of the documents in ``(name, text)`` sources (multi-document YAML, or
        JSON where the name ends in ``.json``), parsed by the server. Every error of an Invalid
        raised also says ``where`` (``job.yaml[1]``)."""
        body = {"sources": [{"name": name, "text": text} for name, text in sources], "dryRun": dry_run}
        return self._request("POST", f"{_PREFIX}/apply", json_body=body)["results"]

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
        return WatchStream(
            self._http.stream("GET", _collection_path(info, namespace), params=params), self.server
        )

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
        return LogStream(
            self._http.stream("GET", path, params=params, headers={"Accept": "text/plain"}), self.server
        )

    # -- server --------------------------------------------------------------------------

    def view(self, path: str, **params: Any) -> Any:
        """A read-only view under ``/api/v1`` (``why/...``, ``doctor``, ``gpus``, ``queues/usage``,
        ``nodes/usage``; docs/rest-api.md); ``params`` are its query parameters."""
        query = {k: v for k, v in params.items() if v is not None}
        return self._request("GET", f"/api/v1/{path.lstrip('/')}", params=query or None)

    def inject_fault(self, node: str, fault: dict[str, Any]) -> dict[str, Any]:
        """Testing only: make a fake GPU of ``node`` fail (``{"gpu": 1, "xid": 79}``, ``lost``,
        ``clear``) or report readings; the GPU as the node now reports it."""
        return self._request("POST", f"{_PREFIX}/nodes/{node}/fault-injection", json_body=fault)

    def interrupt_node(self, node: str, notice: dict[str, Any] | None = None) -> dict[str, Any]:
        """Testing and drills: a spot interruption notice for a pool node (``{"inSeconds": 120}``,
        or ``{"time": RFC 3339, "action": "terminate"}``); the node's NodeClaim as it is now."""
        return self._request("POST", f"{_PREFIX}/nodes/{node}/interruption", json_body=notice or {})

    def retry_workflow(self, name: str, namespace: str | None = None) -> list[str]:
        """Retry a failed workflow (``muster retry``); the tasks that run again. A workflow that
        did not fail is refused (:class:`ObjectConflict`)."""
        path = f"{_PREFIX}/namespaces/{namespace or 'default'}/workflows/{name}/retry"
        return self._request("POST", path)["tasks"]

    def resubmit_workflow(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Run a workflow again from the start as a new Workflow (``muster resubmit``, Argo's
        resubmit); the new object, named ``<name>-<5 letters or digits>``."""
        path = f"{_PREFIX}/namespaces/{namespace or 'default'}/workflows/{name}/resubmit"
        return self._request("POST", path)

    # -- identities and access ------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """The caller's identity: ``username``, ``groups`` and ``extra`` (token id and expiry)."""
        review = self._request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json_body={})
        return review["status"]["userInfo"]

    def can_i(
        self,
        verb: str,
        resource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        *,
        subresource: str | None = None,
        group: str | None = None,
        path: str | None = None,
        as_user: str | None = None,
        as_groups: Sequence[str] = (),
    ) -> tuple[bool, str]:
        """May the caller (or ``as_user``, which needs ``create subjectaccessreviews``) do it?
        ``(allowed, reason)``, as ``kubectl auth can-i``; ``path`` asks about a non-resource URL."""
        if path is not None:
            spec: dict[str, Any] = {"nonResourceAttributes": {"verb": verb, "path": path}}
        else:
            attrs = {"verb": verb, "resource": resource, "namespace": namespace or "", "name": name or ""}
            attrs.update({k: v for k, v in (("subresource", subresource), ("group", group)) if v})
            spec = {"resourceAttributes": attrs}
        review = "selfsubjectaccessreviews"
        if as_user:
            spec.update(user=as_user, groups=list(as_groups))
            review = "subjectaccessreviews"
        answer = self._request("POST", f"/apis/authorization.k8s.io/v1/{review}", json_body={"spec": spec})
        status = answer["status"]
        return bool(status.get("allowed")), str(status.get("reason") or "")

    def rules(self, namespace: str | None = None) -> dict[str, Any]:
        """Every rule that applies to the caller in ``namespace``: ``resourceRules`` and
        ``nonResourceRules`` (``muster auth can-i --list``)."""
        body = {"spec": {"namespace": namespace or ""}}
        return self._request("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json_body=body)[
            "status"
        ]

    def create_token(
        self,
        user: str | None = None,
        groups: Sequence[str] = (),
        *,
        service_account: tuple[str, str] | None = None,
        expiration_seconds: int | None = None,
        description: str = "",
    ) -> dict[str, Any]:
        """A new token for ``user`` (with ``groups``) or ``service_account`` (namespace, name);
        the token itself is in ``status.token``, shown this once."""
        body: dict[str, Any] = {"expirationSeconds": expiration_seconds, "description": description}
        if service_account is not None:
            ns, name = service_account
            return self._request(
                "POST", f"{_PREFIX}/namespaces/{ns}/serviceaccounts/{name}/token", json_body=body
            )
        body.update(user=user, groups=list(groups))
        return self._request("POST", f"{_PREFIX}/tokens", json_body=body)

    def tokens(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """The tokens the caller may list (never a token itself): a namespace's ServiceAccount
        tokens, or every token (``namespace=None``)."""
        path = f"{_PREFIX}/namespaces/{namespace}/tokens" if namespace else f"{_PREFIX}/tokens"
        return self._request("GET", path)["items"]

    def revoke_token(self, token_id: str, namespace: str | None = None) -> dict[str, Any]:
        """Revoke a token by id (a ServiceAccount's lives in its namespace)."""
        path = (
            f"{_PREFIX}/namespaces/{namespace}/tokens/{token_id}"
            if namespace
            else f"{_PREFIX}/tokens/{token_id}"
        )
        return self._request("DELETE", path)

    def audit(self, namespace: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        """Audit records, newest first: ``since``/``until`` (RFC 3339 or 30m, 2h, 7d), ``user``,
        ``verb``, ``resource``, ``name``, ``failed``, ``limit``; one namespace or all."""
        path = f"{_PREFIX}/namespaces/{namespace}/auditevents" if namespace else f"{_PREFIX}/auditevents"
        return self._request("GET", path, params=filters)["items"]

    def health(self) -> bool:
        """True when a server answers ``/healthz`` (no token needed)."""
        try:
            return self._http.request("GET", "/healthz", timeout=5.0).status_code == 200
        except TransportError:
            return False

    def version(self) -> dict[str, Any]:
        return self._request("GET", "/version")

    def metrics(self) -> str:
        resp = self._send("GET", "/metrics", headers={"Accept": "text/plain"})
        return resp.text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    def _key(self, obj: dict[str, Any]) -> tuple[Kind, str, str | None]:
        info = lookup(obj.get("kind", ""))
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            raise ValueError("the object needs metadata.name")
        return info, name, _namespace_of(info, obj)

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        while True:
            page = self._request("GET", path, params=params or None)
            yield page
            token = page["metadata"].get("continue")
            if not token:
                return
            params = {**params, "continue": token}

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._send(method, path, **kwargs).json()

    def _send(self, method: str, path: str, **kwargs: Any) -> Response:
        try:
            resp = self._http.request(method, path, **kwargs)
        except TransportError as exc:
            raise ApiUnavailable(self.server, _cause(exc)) from exc
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, _json_or_text(resp))
        return resp


class _Stream(Iterator[T]):
    """A streaming response read item by item; the request is sent on the first ``next()``.
    Subclasses say how the body turns into items (:meth:`_parse`)."""

    def __init__(self, stream: Stream, server: str) -> None:
        self._stream = stream
        self._server = server
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
        except TransportError as exc:
            if self._closed:
                raise StopIteration from None
            self.close()
            raise ApiUnavailable(self._server, _cause(exc)) from exc
        finally:
            self._reading = False
            if self._closed:
                self._stream.close()

    def open(self) -> None:
        """Send the request now, so an error answer (404, ...) raises here, not on ``next()``."""
        if self._items is None and not self._closed:
            try:
                self._open()
            except TransportError as exc:
                self.close()
                raise ApiUnavailable(self._server, _cause(exc)) from exc

    def close(self) -> None:
        """End the stream; a ``next()`` blocked in another thread then stops."""
        self._closed = True
        if self._reading:
            # Another thread is blocked reading: closing the socket would not wake it;
            # shutting it down does, and that thread closes it.
            self._stream.shutdown()
        else:
            self._stream.close()

    def __enter__(self) -> _Stream[T]:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _open(self) -> None:
        self._stream.open(_CONNECT_TIMEOUT)
        if self._stream.status_code >= 400:
            answer = self._stream.read()
            self.close()
            raise error_from_response(answer.status_code, _json_or_text(answer))
        self._items = self._parse(self._stream)

    def _next(self) -> T:
        if self._items is None:
            self._open()
        assert self._items is not None
        for item in self._items:
            return item
        self.close()
        raise StopIteration

    def _parse(self, stream: Stream) -> Iterator[T]:
        raise NotImplementedError


class WatchStream(_Stream[dict[str, Any]]):
    """The events of one watch request."""

    def _parse(self, stream: Stream) -> Iterator[dict[str, Any]]:
        for line in stream.lines():
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

    def _parse(self, stream: Stream) -> Iterator[str]:
        # Split on "\n" only: a progress bar's "\r" stays inside its line, as in the file.
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        for data in stream.chunks():
            pending += decoder.decode(data)
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line + "\n"
        pending += decoder.decode(b"", final=True)
        if pending:
            yield pending


def _collection_path(info: Kind, namespace: str | None) -> str:
    if info.namespaced and namespace:
        return f"{_PREFIX}/namespaces/{namespace}/{info.plural}"
    return f"{_PREFIX}/{info.plural}"


def _object_path(info: Kind, name: str, namespace: str | None) -> str:
    ns = (namespace or "default") if info.namespaced else None
    return f"{_collection_path(info, ns)}/{name}"


def _namespace_of(info: Kind, obj: dict[str, Any]) -> str | None:
    if not info.namespaced:
        return None
    return (obj.get("metadata") or {}).get("namespace") or "default"


def _json_or_text(resp: Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return resp.text


def _cause(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
