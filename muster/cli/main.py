"""Entry point of the ``muster`` console script.

Commands load lazily: a call imports the module of its verb only (``muster get`` does not load
the scheduler, the server or the simulator), which is most of what a CLI call costs
(benchmarks/process_cpu.py); :data:`muster.cli.app.COMMANDS` names the module of every verb.

Two more costs of a short call are the interpreter's own: the cycle collector runs again and
again while the imports create their objects (none of which is garbage), and at exit the
interpreter tears every module down one by one. So :func:`main` keeps the collector off until
the verb's own code starts (:func:`muster.cli.app.start_collector` then freezes what the
imports made, so that it is never scanned), and a call that finished with nothing left running
ends the process at once after flushing its output (:func:`exit_now`).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading

__all__ = ["exit_now", "main", "run"]


def main() -> None:
    """The console script: run the command of ``sys.argv``, then end the process."""
    gc.disable()  # started again by muster.cli.app.start_collector once the imports are done
    exit_now(run())


def run() -> int:
    """Run the command of ``sys.argv``; its exit status."""
    from muster.cli.app import app

    try:
        app()
    except SystemExit as exc:
        return _status(exc.code)
    except Exception as exc:
        if not _bad_setting(exc):
            raise
        return 2  # EXIT_BAD_INPUT (not imported: every call would pay for it)
    finally:
        gc.enable()  # a call that stopped before the verb's code (--help, a bad option)
    return 0


def _bad_setting(exc: Exception) -> bool:
    """Print what is wrong with the ``MUSTER_*`` settings ``exc`` complains of (a validation
    error of :class:`muster.config.Settings`), naming each variable; False for other errors."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or exc.title != "Settings":
        return False
    for error in exc.errors():
        name = "MUSTER_" + "_".join(str(part) for part in error["loc"]).upper()
        print(f"muster: {name}={error['input']!r}: {error['msg']}; set it right or unset it", file=sys.stderr)
    return True


def exit_now(status: int) -> None:
    """End the process with ``status``, skipping the interpreter's teardown when nothing needs
    it: no other thread runs and no exit handler is registered (else exit the ordinary way,
    which waits for them)."""
    if threading.active_count() > 1 or atexit._ncallbacks():
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`muster get | head`): exit 120, as Python
            status = status or 120
    os._exit(status)


def _status(code: object) -> int:
    # sys.exit's conventions: None is success, an int the status, anything else is printed.
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    main()
