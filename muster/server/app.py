"""The FastAPI application and its lifecycle.

:func:`create_app` wires the store into thin routers (one generated per kind), the error
shape, authentication, authorization (one guard every route passes, :mod:`muster.server.access`),
the audit log and metrics. Start-up work is a list of :class:`Hook`\\ s run in order by
the app's lifespan and stopped in reverse order at shutdown: creating the defaults is the
first; the manager (controllers, scheduler loop, runtime) registers its own hook in
:func:`muster.server.hooks.server_hooks`, so everything runs in the one ``muster up``
process. ``/readyz`` answers 200 only once every hook has started.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from starlette.routing import BaseRoute

from muster import __version__
from muster.api import registry
from muster.config import settings
from muster.server import dashboard
from muster.server.access.audit import AuditMiddleware, AuditWriter
from muster.server.access.bootstrap import ensure_builtin
from muster.server.access.guard import guard
from muster.server.access.policy import AccessControl
from muster.server.auth import BearerAuth
from muster.server.errors import install_error_handlers
from muster.server.limits import BodyLimit
from muster.server.metrics import MetricsMiddleware, ServerMetrics
from muster.server.negotiation import check_request
from muster.server.routes import access as access_routes
from muster.server.routes import actions, apply, capacity, faults, insight, logs, system
from muster.server.routes.objects import add_kind_routes
from muster.server.services.objects import ObjectService
from muster.store import Store

__all__ = ["Hook", "ServerContext", "create_app"]

log = logging.getLogger(__name__)

HookFn = Callable[["ServerContext"], Awaitable[None] | None]


@dataclass
class ServerContext:
    """What start-up hooks get: the store, the metrics registry, the app and a place to keep
    what they started (threads, loops) until their stop runs."""

    store: Store
    metrics: ServerMetrics
    app: FastAPI
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hook:
    """A named piece of the server's lifecycle. ``start`` runs before the server is ready;
    ``stop`` (if any) runs at shutdown, after the hooks started later were stopped. Either
    may be a plain function or a coroutine function."""

    name: str
    start: HookFn
    stop: HookFn | None = None


def create_app(
    store: Store,
    tokens: Collection[str],
    hooks: Sequence[Hook] = (),
    home: Path | None = None,
    max_request_bytes: int | None = None,
) -> FastAPI:
    """The API server over ``store``; ``tokens`` are the bootstrap admin tokens (other
    identities hold tokens made by ``muster token create``). Every route is authorized by
    :func:`muster.server.access.guard.guard`. ``home`` is the ``MUSTER_HOME`` whose pod logs it
    serves until a runtime registers itself (default: the settings' home);
    ``max_request_bytes`` the largest request body it reads (default: the settings', 3 MiB)."""
    metrics = ServerMetrics(store)
    access = AccessControl(store, tokens)
    audit = AuditWriter(store, settings().audit_retention_days)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx = ServerContext(store=store, metrics=metrics, app=app)
        started: list[Hook] = []
        access.start()
        ensure_builtin(store)
        audit.start()
        try:
            for hook in hooks:
                log.info("starting %s", hook.name)
                await _call(hook.start, ctx)
                started.append(hook)
            app.state.ready = True
            yield
        finally:
            app.state.ready = False
            for hook in reversed(started):
                if hook.stop is not None:
                    try:
                        await _call(hook.stop, ctx)
                    except Exception:  # stop the others anyway
                        log.exception("stopping %s failed", hook.name)
            audit.stop()
            access.stop()

    app = FastAPI(
        title="Muster",
        version=__version__,
        description="GPU-aware orchestration of ML jobs: quotas, gangs, preemption, pipelines.",
        lifespan=lifespan,
        # Every route, now or added later, is authorized first; then 400 (unknown query), 406 and
        # 415 before any route acts.
        dependencies=_guards(),
        docs_url=None,  # a browser cannot send the bearer token the docs page would need
        redoc_url=None,
        # One schema per model, as validated: the serialization one of a kind is empty (its
        # serializer is a function), which left the OpenAPI document without the kinds' fields.
        separate_input_output_schemas=False,
    )
    app.state.store = store
    app.state.objects = ObjectService(store, observe=access.observe, forget=access.forget)
    app.state.metrics = metrics
    app.state.ready = False
    app.state.home = home if home is not None else settings().home
    app.state.log_source = None  # muster.server.logs.use_log_source
    app.state.access = access  # who a token is and what it may do (the guard, the sign-in)
    app.state.audit = audit
    app.state.manager = None  # muster.server.views.use_manager
    app.state.gateway = None  # the serving gateway of muster.server.hooks, when it runs
    install_error_handlers(app)
    app.router.routes.extend(_routes())
    dashboard.mount_static(app)
    # Outermost last: metrics see every request, audit every write, including those auth turns
    # away; the body limit counts only what an authenticated client sends.
    app.add_middleware(BodyLimit, max_bytes=max_request_bytes or settings().max_request_bytes)
    app.add_middleware(BearerAuth, access=access)
    app.add_middleware(AuditMiddleware, writer=audit)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def _guards() -> list[Any]:
    return [Depends(guard), Depends(check_request)]


@functools.cache
def _routes() -> tuple[BaseRoute, ...]:
    """Every route of the API and the dashboard, built once per process.

    FastAPI builds a pydantic adapter for each parameter of each of the ~260 routes, once when
    a route is added and, for an included router's, again (lazily, at the first request) for
    the app that includes it: that was about 1.7 s of CPU per app. The built routes hold
    nothing of an app (they reach the store through ``request.app.state``), so every app of
    the process shares them: the test suite, which makes hundreds of apps, pays it once. They
    carry the guards themselves, as the app's own routes would."""
    api = APIRouter(dependencies=_guards())
    for router in (
        system.router,
        apply.router,
        logs.router,
        insight.router,
        faults.router,
        capacity.router,
        actions.router,
        access_routes.router,
    ):
        api.include_router(router)
    for info in registry.kinds():
        add_kind_routes(api, info)
    for router in dashboard.ROUTERS:
        api.include_router(router)
    return tuple(api.routes)


async def _call(fn: HookFn, ctx: ServerContext) -> None:
    result = fn(ctx)
    if inspect.isawaitable(result):
        await result
