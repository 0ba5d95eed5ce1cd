"""Entry point of the ``muster`` console script.

Commands load lazily: a call imports the module of its verb only (``muster get`` does not load
the scheduler, the server or the simulator), which is most of what a CLI call costs
(benchmarks/process_cpu.py); :data:`muster.cli.app.COMMANDS` names the module of every verb.
"""

from __future__ import annotations

from muster.cli.app import app

__all__ = ["main"]


def main() -> None:
    app()


if __name__ == "__main__":
    main()
