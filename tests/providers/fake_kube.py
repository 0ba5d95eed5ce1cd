"""A minimal Kubernetes API for the kubernetes provider's tests: PodTemplates and
ProvisioningRequests in memory, over HTTP, reached by the real ``kubernetes`` client.

(The test cluster's kube-apiserver 1.20, built with a newer Go, crashes encoding custom
resources, so the provider's round trip is tested against this instead.)"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/?]+)"
    r"(?:/(?P<name>[^/?]+))?(?P<status>/status)?"
)


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (plural, ns, name)
        self.lock = threading.Lock()


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> re.Match[str] | None:
            return _PATH.match(self.path.split("?")[0])

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self) -> None:
            m = self._route()
            if m is None:
                return self._send(404, {"kind": "Status", "code": 404})
            with kube.lock:
                if m["name"]:
                    obj = kube.objects.get((m["plural"], m["ns"], m["name"]))
                    return self._send(200, obj) if obj else self._send(404, {"kind": "Status", "code": 404})
                items = [o for (p, ns, _), o in kube.objects.items() if p == m["plural"] and ns == m["ns"]]
            return self._send(200, {"kind": "List", "items": items})

        def do_POST(self) -> None:
            m = self._route()
            body = self._body()
            key = (m["plural"], m["ns"], body["metadata"]["name"])  # type: ignore[index]
            with kube.lock:
                if key in kube.objects:
                    return self._send(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})
                kube.objects[key] = body
            return self._send(201, body)

        def do_PUT(self) -> None:
            m = self._route()
            body = self._body()
            with kube.lock:
                kube.objects[(m["plural"], m["ns"], m["name"])] = body  # type: ignore[index]
            return self._send(200, body)

        def do_DELETE(self) -> None:
            m = self._route()
            with kube.lock:
                gone = kube.objects.pop((m["plural"], m["ns"], m["name"]), None)  # type: ignore[index]
            return (
                self._send(200, {"kind": "Status"})
                if gone
                else self._send(404, {"kind": "Status", "code": 404})
            )

    return Handler


@contextmanager
def fake_kube(workdir: Path) -> Iterator[tuple[FakeKube, Path]]:
    """The fake API on a free port and a kubeconfig reaching it."""
    kube = FakeKube()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(kube))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = workdir / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "users": [{"name": "fake", "user": {"token": "t"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
                "current-context": "fake",
            }
        )
    )
    try:
        yield kube, config
    finally:
        server.shutdown()
        server.server_close()
