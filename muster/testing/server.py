"""An API server in a thread of the test process, on a free loopback port.

For tests that need real HTTP (streaming watches, the SDK client) without the cost of a
subprocess; end-to-end tests start ``muster up`` as a process instead (:mod:`muster.testing.up`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from muster.sdk.client import Client
from muster.server import Hook
from muster.server.embedded import serve_in_thread
from muster.store import Store

__all__ = ["RunningServer", "serve"]


@dataclass(frozen=True)
class RunningServer:
    url: str
    token: str

    def client(self, token: str | None = None) -> Client:
        return Client(self.url, self.token if token is None else token)


@contextmanager
def serve(store: Store, token: str = "test-token", hooks: Sequence[Hook] = ()) -> Iterator[RunningServer]:
    """Serve ``store`` with one token until the block ends."""
    with serve_in_thread(store, [token], hooks) as url:
        yield RunningServer(url=url, token=token)
