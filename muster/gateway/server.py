"""Serving the gateway on a port of its own, on a thread and event loop of its own, inside the
process that runs the control plane (``muster up``).

A separate loop keeps the data path off the API server's loop (a slow API request never
delays a completion), and uvicorn with httptools and uvloop (when installed) keeps each
request to a few tens of microseconds of the gateway's own work.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import socket
import threading

import uvicorn

__all__ = ["GatewayServer"]

log = logging.getLogger(__name__)


class GatewayServer:
    """``app`` (the gateway, wrapped in the API's auth) on ``host:port`` in a thread."""

    def __init__(self, app: object, host: str = "127.0.0.1", port: int = 7071) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.url = ""

    def bind(self) -> None:
        """Take the port now, so a conflict fails ``muster up`` at start rather than later."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.listen(2048)
        sock.set_inheritable(True)
        self._sock = sock
        self.port = sock.getsockname()[1]
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        self.url = f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        if self._sock is None:
            self.bind()
        config = uvicorn.Config(
            self.app,  # type: ignore[arg-type]
            log_level="warning",
            access_log=False,
            lifespan="on",
            http="httptools" if importlib.util.find_spec("httptools") else "h11",
            loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
            server_header=False,
            date_header=False,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=5,
            backlog=2048,
        )
        self._server = uvicorn.Server(config)
        started = threading.Event()
        server = self._server

        async def serve() -> None:
            await server.serve(sockets=[self._sock] if self._sock else None)

        def run() -> None:
            loop_factory = config.get_loop_factory()
            runner = asyncio.Runner(loop_factory=loop_factory) if loop_factory else asyncio.Runner()
            with runner:
                runner.run(serve())

        self._thread = threading.Thread(target=run, name="muster-gateway", daemon=True)
        self._thread.start()
        deadline = timeout
        while not server.started and self._thread.is_alive() and deadline > 0:
            started.wait(0.01)
            deadline -= 0.01
        if not server.started:
            raise RuntimeError(f"the gateway did not start on {self.host}:{self.port}")
        log.info("gateway at %s", self.url)

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
