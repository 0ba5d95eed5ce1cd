"""The SDK's HTTP/1.1 transport (muster.sdk.http): kept-alive connections, a request sent again
when the server had closed the idle one, errors of the connection, and streams."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from muster.sdk.http import Http, TransportError
from muster.util import free_port


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: list[int] = []
    close_after_answer = False

    def do_GET(self) -> None:
        if self.path.startswith("/lines"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n in range(3):
                data = json.dumps({"n": n}).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        body = json.dumps({"path": self.path, "conn": id(self.connection)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        # A server that drops an idle kept-alive connection without saying so.
        self.close_connection = type(self).close_after_answer

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"connections": [], "close_after_answer": False})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


def test_requests_reuse_one_kept_alive_connection(server):
    url, _ = server
    client = Http(url, {"Accept": "application/json"}, timeout=5)
    first = client.request("GET", "/a", params={"x": "1", "flag": True}).json()
    second = client.request("GET", "/b").json()
    assert first["path"] == "/a?x=1&flag=true"
    assert first["conn"] == second["conn"]
    client.close()


def test_a_connection_the_server_dropped_is_replaced_and_the_request_sent_again(server):
    url, handler = server
    handler.close_after_answer = True
    client = Http(url, {}, timeout=5)
    first = client.request("GET", "/a").json()
    second = client.request("GET", "/b").json()  # the pooled connection is dead: sent again
    assert second["path"] == "/b" and second["conn"] != first["conn"]


def test_no_server_is_a_transport_error():
    client = Http(f"http://127.0.0.1:{free_port()}", {}, timeout=2)
    with pytest.raises(TransportError):
        client.request("GET", "/")


def test_a_url_without_a_scheme_is_refused():
    with pytest.raises(ValueError, match="not an http"):
        Http("127.0.0.1:7070", {}, timeout=2)


def test_a_chunked_stream_is_read_line_by_line(server):
    url, _ = server
    stream = Http(url, {}, timeout=5).stream("GET", "/lines")
    stream.open(connect_timeout=5)
    assert stream.status_code == 200
    assert [json.loads(line)["n"] for line in stream.lines()] == [0, 1, 2]
    stream.close()
