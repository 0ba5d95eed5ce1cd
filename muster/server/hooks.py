"""The start-up/shutdown hooks ``muster up`` runs, in order. This list is the one place
where the parts of the control plane join the server process: the defaults first, then the
manager (controllers, scheduler loop, runtime) when a :class:`ManagerConfig` is given."""

from __future__ import annotations

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.scheduling.defaults import create_defaults
from muster.runtime.base import SupportsLogs
from muster.server.app import Hook, ServerContext
from muster.server.logs import use_log_source
from muster.server.views import use_manager

__all__ = ["server_hooks"]


def server_hooks(manager: ManagerConfig | None = None) -> list[Hook]:
    """The hooks of a server; with ``manager`` it also runs pods (``muster up`` does)."""
    hooks = [Hook("defaults", start=_create_defaults)]
    if manager is not None:
        hooks.append(Hook("manager", start=lambda ctx: _start_manager(ctx, manager), stop=_stop_manager))
    return hooks


def _create_defaults(ctx: ServerContext) -> None:
    created = create_defaults(ctx.store)
    ctx.state["defaults_created"] = [f"{r.object['kind']}/{r.object['metadata']['name']}" for r in created]


def _start_manager(ctx: ServerContext, config: ManagerConfig) -> None:
    manager = Manager(ctx.store, config)
    manager.start()
    ctx.state["manager"] = manager
    use_manager(ctx.app, manager)
    ctx.metrics.registry.register(manager.ctx.metrics)
    if isinstance(manager.runtime, SupportsLogs):
        use_log_source(ctx.app, manager.runtime)  # pod logs come from the runtime that runs the pods


def _stop_manager(ctx: ServerContext) -> None:
    use_log_source(ctx.app, None)
    use_manager(ctx.app, None)
    manager = ctx.state.pop("manager", None)
    if manager is not None:
        ctx.metrics.registry.unregister(manager.ctx.metrics)
        manager.stop()
