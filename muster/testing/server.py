"""An API server in a thread of the test process, on a free loopback port.

For tests that need real HTTP (streaming watches, the SDK client) without the cost of a
subprocess; end-to-end tests start ``muster up`` as a process instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from muster.sdk.client import Client
from muster.server import Hook, create_app
from muster.store import Store
from muster.testing import free_port, wait_for

__all__ = ["RunningServer", "serve"]


@dataclass(frozen=True)
class RunningServer:
    url: str
    token: str

    def client(self, token: str | None = None) -> Client:
        return Client(self.url, self.token if token is None else token)


@contextmanager
def serve(store: Store, token: str = "test-token", hooks: Sequence[Hook] = ()) -> Iterator[RunningServer]:
    """Serve ``store`` until the block ends; the store stays open (the caller owns it)."""
    port = free_port()
    config = uvicorn.Config(
        create_app(store, [token], hooks=hooks),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"muster-test-server-{port}", daemon=True)
    thread.start()
    try:
        wait_for(
            lambda: server.started or not thread.is_alive(), timeout=30, what="the test API server to start"
        )
        if not server.started:
            raise RuntimeError("the test API server failed to start (see the log above)")
        yield RunningServer(url=f"http://127.0.0.1:{port}", token=token)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
