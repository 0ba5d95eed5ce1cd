"""The start-up/shutdown hooks ``muster up`` runs, in order. This list is the one place
where the parts of the control plane join the server process: the defaults first, then the
manager (controllers, scheduler loop, runtime) when a :class:`ManagerConfig` is given, then the
serving gateway on a port of its own when a :class:`GatewayConfig` is given too."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import Scope

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.scheduling.defaults import create_defaults
from muster.runtime.base import SupportsLogs
from muster.server.app import Hook, ServerContext
from muster.server.logs import use_log_source
from muster.server.views import use_manager

__all__ = ["GatewayConfig", "server_hooks"]


@dataclass(frozen=True)
class GatewayConfig:
    """Where ``muster up`` serves the gateway (its ``--gateway-host`` and ``--gateway-port``)."""

    host: str = "127.0.0.1"
    port: int = 7071


def server_hooks(manager: ManagerConfig | None = None, gateway: GatewayConfig | None = None) -> list[Hook]:
    """The hooks of a server; with ``manager`` it also runs pods (``muster up`` does), and with
    ``gateway`` too it serves the InferenceServices' OpenAI-compatible gateway."""
    hooks = [Hook("defaults", start=_create_defaults)]
    if manager is not None:
        hooks.append(Hook("manager", start=lambda ctx: _start_manager(ctx, manager), stop=_stop_manager))
        if gateway is not None:
            hooks.append(Hook("gateway", start=lambda ctx: _start_gateway(ctx, gateway), stop=_stop_gateway))
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


def _start_gateway(ctx: ServerContext, config: GatewayConfig) -> None:
    from muster.api.base import GROUP
    from muster.gateway.gateway import Gateway
    from muster.gateway.server import GatewayServer
    from muster.server.access.attributes import Attributes
    from muster.server.auth import BearerAuth

    manager: Manager = ctx.state["manager"]
    key = "InferenceService"
    control = ctx.app.state.access

    def authorize(scope: Scope, namespace: str, name: str) -> bool:
        # Calling a model is `create inferenceservices/proxy` on its service, as a Kubernetes
        # user calls a Service through `services/proxy`.
        user = scope.get("state", {}).get("user")
        attrs = Attributes("create", "inferenceservices", "proxy", namespace, name, GROUP)
        return user is not None and control.authorize(user, attrs).allowed

    gateway = Gateway(poke=lambda ns, name: manager.ctx.cache.mark([(key, ns, name)]), authorize=authorize)
    # The API's own authentication (any valid identity), in front of every gateway path but /healthz.
    app = BearerAuth(gateway, access=ctx.app.state.access, public_paths={"/healthz"}, page_paths=())
    server = GatewayServer(app, config.host, config.port)
    server.start()
    ctx.state["gateway"] = server
    ctx.app.state.gateway = gateway
    ctx.metrics.registry.register(gateway.metrics)
    manager.serving.attach(gateway, server.url)
    manager.ctx.cache.mark(
        [
            (key, s["metadata"].get("namespace") or "", s["metadata"]["name"])
            for s in manager.ctx.cache.list(key)
        ]
    )


def _stop_gateway(ctx: ServerContext) -> None:
    server = ctx.state.pop("gateway", None)
    gateway = getattr(ctx.app.state, "gateway", None)
    if gateway is not None:
        ctx.metrics.registry.unregister(gateway.metrics)
        ctx.app.state.gateway = None
    if server is not None:
        server.stop()


def _stop_manager(ctx: ServerContext) -> None:
    use_log_source(ctx.app, None)
    use_manager(ctx.app, None)
    manager = ctx.state.pop("manager", None)
    if manager is not None:
        ctx.metrics.registry.unregister(manager.ctx.metrics)
        manager.stop()
