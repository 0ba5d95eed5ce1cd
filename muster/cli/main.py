"""Entry point of the ``muster`` console script."""

from __future__ import annotations

# Command modules register on `app` when imported; keep this list sorted.
from muster.cli import sched, sim, version  # noqa: F401
from muster.cli.app import app


def main() -> None:
    app()


if __name__ == "__main__":
    main()
