"""``muster version``."""

# No `from __future__ import annotations` here: Typer would evaluate the string annotations of
# the commands again on every call (docs/cli.md, "Start-up").

from muster import __version__
from muster.cli.app import app, console


@app.command()
def version() -> None:
    """Print Muster's version."""
    console.print(f"muster {__version__}")
