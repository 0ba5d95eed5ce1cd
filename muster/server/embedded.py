"""The API server in a thread of the calling process, on a loopback port.

``muster up`` runs uvicorn in the foreground instead; this is for ``muster demo`` and tests,
which need a real HTTP server next to their own code.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

import uvicorn

from muster.server.app import Hook, create_app
from muster.store import Store
from muster.testing import free_port, wait_for

__all__ = ["serve_in_thread"]


@contextmanager
def serve_in_thread(
    store: Store, tokens: Collection[str], hooks: Sequence[Hook] = (), port: int | None = None
) -> Iterator[str]:
    """Serve ``store`` until the block ends and yield the server's URL; the store stays open
    (the caller owns it)."""
    port = port or free_port()
    config = uvicorn.Config(
        create_app(store, tokens, hooks=hooks),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"muster-server-{port}", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started or not thread.is_alive(), timeout=30, what="the API server to start")
        if not server.started:
            raise RuntimeError(f"the API server did not start on 127.0.0.1:{port} (see the log above)")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
