"""``muster version``."""

from __future__ import annotations

from muster import __version__
from muster.cli.app import app, console


@app.command()
def version() -> None:
    """Print Muster's version."""
    console.print(f"muster {__version__}")
