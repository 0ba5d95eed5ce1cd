"""The start-up/shutdown hooks ``muster up`` runs, in order. This list is the one place
where the parts of the control plane join the server process: the manager (controllers,
scheduler loop, runtime) adds its Hook here, after the defaults exist."""

from __future__ import annotations

from muster.controllers.defaults import create_defaults
from muster.server.app import Hook, ServerContext

__all__ = ["server_hooks"]


def server_hooks() -> list[Hook]:
    return [Hook("defaults", start=_create_defaults)]


def _create_defaults(ctx: ServerContext) -> None:
    created = create_defaults(ctx.store)
    ctx.state["defaults_created"] = [f"{r.object['kind']}/{r.object['metadata']['name']}" for r in created]
