"""HTTP/1.1 for the SDK client, on the standard library's :mod:`http.client`.

The client runs in every ``muster`` command, where import time is most of what a call costs;
httpx (with the click, rich and email modules it loads) alone cost more than the rest of a
short call, and the client needs only plain HTTP/1.1 against one server: JSON requests on
keep-alive connections, and streamed responses read line by line. Errors of the connection
are :class:`TransportError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

__all__ = ["Http", "Response", "Stream", "TransportError"]

_CHUNK = 65536
# Failures of a kept-alive connection that the server closed meanwhile: the request never
# reached it, so sending it again on a new connection is safe.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)


class TransportError(Exception):
    """The server could not be reached, or the connection broke."""


class Response:
    """A whole response: status, headers and body."""

    def __init__(self, status_code: int, headers: Mapping[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Http:
    """Requests to one server (``base_url``), thread-safe: each request takes a kept-alive
    connection from a small pool (or opens one) and gives it back when done."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._base_path = parts.path.rstrip("/")
        self.headers = dict(headers)
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        body, all_headers = self._prepare(json_body, headers)
        url = self._url(path, params)
        for attempt in range(2):
            conn, reused = self._take(timeout)
            try:
                conn.request(method, url, body=body, headers=all_headers)
                raw = conn.getresponse()
                content = raw.read()
            except _STALE as exc:
                conn.close()
                if reused and attempt == 0:
                    continue
                raise TransportError(_cause(exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise TransportError(_cause(exc)) from exc
            response = Response(raw.status, dict(raw.getheaders()), content)
            if raw.will_close:
                conn.close()
            else:
                self._give(conn)
            return response
        raise AssertionError("unreachable")

    def stream(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Stream:
        """A request whose response is read as it arrives, on a connection of its own; it is
        sent by :meth:`Stream.open`."""
        return Stream(self, method, self._url(path, params), {**self.headers, **(headers or {})})

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def connect(self, timeout: float | None) -> http.client.HTTPConnection:
        """A new connection (not yet open)."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self.timeout if timeout is None else timeout)

    def _take(self, timeout: float | None) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return self.connect(timeout), False
        conn.timeout = self.timeout if timeout is None else timeout
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        return conn, True

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def _prepare(self, json_body: Any, headers: Mapping[str, str] | None) -> tuple[bytes | None, dict]:
        all_headers = {**self.headers, **(headers or {})}
        if json_body is None:
            return None, all_headers
        all_headers["Content-Type"] = "application/json"
        return json.dumps(json_body, separators=(",", ":")).encode(), all_headers

    def _url(self, path: str, params: Mapping[str, Any] | None) -> str:
        url = self._base_path + path
        if params:
            url += "?" + urlencode({k: _param(v) for k, v in params.items() if v is not None})
        return url


class Stream:
    """One streamed response: :meth:`open` sends the request and reads the status and headers;
    :meth:`lines` and :meth:`chunks` read the body. :meth:`close` may be called from another
    thread, and wakes a reader blocked on the socket."""

    def __init__(self, http_: Http, method: str, url: str, headers: dict[str, str]) -> None:
        self._http = http_
        self._method = method
        self._url = url
        self._headers = headers
        self._conn: http.client.HTTPConnection | None = None
        self._raw: http.client.HTTPResponse | None = None
        self.status_code = 0

    def open(self, connect_timeout: float) -> None:
        conn = self._conn = self._http.connect(connect_timeout)
        try:
            conn.request(self._method, self._url, headers=self._headers)
            if conn.sock is not None:
                conn.sock.settimeout(None)  # a stream may stay quiet as long as what it follows does
            self._raw = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise TransportError(_cause(exc)) from exc
        self.status_code = self._raw.status

    def read(self) -> Response:
        """The whole (error) body."""
        assert self._raw is not None
        try:
            content = self._raw.read()
        except (OSError, http.client.HTTPException) as exc:
            raise TransportError(_cause(exc)) from exc
        return Response(self.status_code, dict(self._raw.getheaders()), content)

    def lines(self) -> Iterator[bytes]:
        assert self._raw is not None
        while True:
            try:
                line = self._raw.readline()
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise TransportError(_cause(exc)) from exc
            if not line:
                return
            yield line

    def chunks(self) -> Iterator[bytes]:
        assert self._raw is not None
        while True:
            try:
                data = self._raw.read1(_CHUNK)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise TransportError(_cause(exc)) from exc
            if not data:
                return
            yield data

    def shutdown(self) -> None:
        """Wake a reader blocked in another thread (it then sees the end of the stream)."""
        sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cause(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
