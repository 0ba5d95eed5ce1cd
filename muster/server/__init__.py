"""The API server: FastAPI app, auth, metrics, watch streaming, start-up hooks."""

from muster.server.app import Hook, ServerContext, create_app

__all__ = ["Hook", "ServerContext", "create_app"]
