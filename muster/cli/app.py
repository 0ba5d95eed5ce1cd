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
    # `muster --install-completion` (bash, zsh, fish, PowerShell), as kubectl completion.
    add_completion=True,
    pretty_exceptions_enable=False,
)

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root() -> None:
    """Muster: quotas, gang scheduling and pipelines for shared GPUs."""
