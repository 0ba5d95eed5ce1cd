"""The root Typer application and what every command module shares.

Command modules register themselves on :data:`app` (or add a sub-app) at import time;
:mod:`muster.cli.main` imports them all. One module per verb group.
"""

from __future__ import annotations

import typer
from rich.console import Console

__all__ = ["app", "console", "err_console"]

app = typer.Typer(
    name="muster",
    help="Muster: quotas, gang scheduling and pipelines for shared GPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root(ctx: typer.Context) -> None:
    """Muster: quotas, gang scheduling and pipelines for shared GPUs."""
    # The namespace of the context in use (muster config) is every command's default -n.
    from muster.sdk.contexts import context_namespace

    namespace = context_namespace()
    if namespace:
        ctx.default_map = _namespace_defaults(ctx.command, namespace)


def _namespace_defaults(command: object, namespace: str) -> dict:
    """Click's default_map giving every command that has a ``namespace`` option ``namespace``."""
    out: dict = {}
    for name, sub in (getattr(command, "commands", None) or {}).items():
        if getattr(sub, "commands", None):
            out[name] = _namespace_defaults(sub, namespace)
        elif any(p.name == "namespace" for p in sub.params):
            out[name] = {"namespace": namespace}
    return out
