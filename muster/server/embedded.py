"""The API server in a thread of the calling process, on a loopback port.

``muster up`` runs uvicorn in the foreground instead; this is for ``muster demo``, the SDK
(:func:`embedded_control_plane`: a workflow run with no server to send it to) and tests,
which need a real HTTP server next to their own code.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from muster.server.app import Hook, create_app
from muster.store import Store
from muster.util import free_port, wait_for

__all__ = ["embedded_control_plane", "serve_in_thread"]


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


@contextmanager
def embedded_control_plane(home: Path, fake_gpus: str | None = None) -> Iterator[tuple[str, str]]:
    """What ``muster up`` runs (the API server with the defaults and the manager: controllers,
    scheduler, local runtime) on ``home``, in this process until the block ends; yields the
    URL and the admin token. Pods still running at the end are left to the next server."""
    from muster.config import settings
    from muster.controllers.manager import ManagerConfig
    from muster.server.auth import load_or_create_credentials
    from muster.server.hooks import server_hooks
    from muster.store import open_store

    s = settings(home=home)
    s.home.mkdir(parents=True, exist_ok=True)
    creds = load_or_create_credentials(s.credentials_path)
    store = open_store(s.store_url, max_object_bytes=s.max_object_bytes)
    try:
        hooks = server_hooks(ManagerConfig(fake_gpus=fake_gpus, home=s.home))
        with serve_in_thread(store, [creds.token], hooks) as url:
            yield url, creds.token
    finally:
        store.close()
