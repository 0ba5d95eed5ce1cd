"""Entry point of the ``muster`` console script."""

from __future__ import annotations

# Command modules register on `app` when imported; keep this list sorted.
from muster.cli import (  # noqa: F401
    apply,
    cost,
    delete,
    demo,
    describe,
    doctor,
    get,
    logs,
    node,
    retry,
    sched,
    sim,
    suspend,
    top,
    up,
    version,
    why,
)
from muster.cli.app import app


def main() -> None:
    app()


if __name__ == "__main__":
    main()
