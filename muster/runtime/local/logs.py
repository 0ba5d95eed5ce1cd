"""Container log files: where they live, how an incarnation's log is kept, how they are read.

``$MUSTER_HOME/logs/<ns>/<pod>/<container>.log`` holds the output (stdout and stderr,
interleaved as written) of the current incarnation of a pod; starting a new incarnation
(same namespace and name, e.g. a restarted replica) first renames it to
``<container>.log.1``, replacing the one before, so exactly one previous log is kept, as
``kubectl logs --previous`` offers. Logs outlive the pod's records (``release``) and the
server; deleting them is left to the operator.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["FOLLOW_INTERVAL", "container_log", "follow_lines", "log_dir", "rotate"]

# How often a followed log is checked for new output (no inotify in the standard library).
FOLLOW_INTERVAL = 0.1
_CHUNK = 64 * 1024


def log_dir(home: Path, namespace: str, name: str) -> Path:
    return home / "logs" / namespace / name


def container_log(home: Path, namespace: str, name: str, container: str, previous: bool = False) -> Path:
    path = log_dir(home, namespace, name) / f"{container}.log"
    return path.with_name(path.name + ".1") if previous else path


def rotate(path: Path) -> None:
    """Keep the current log as the previous one; the next incarnation starts a fresh file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        os.replace(path, path.with_name(path.name + ".1"))


def follow_lines(path: Path, still_writing: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yield the lines of ``path`` (newline kept); with ``still_writing``, keep yielding what
    is appended until it returns False, then drain the file and stop.

    Bytes are decoded as UTF-8 incrementally (a character split across reads is kept whole;
    invalid bytes become U+FFFD). A last line without a newline is yielded at the end.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if chunk:
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                for line in lines:
                    yield line + "\n"
                continue
            if still_writing is not None and still_writing():
                time.sleep(FOLLOW_INTERVAL)
                continue
            # The writer is done; one more read catches what it wrote just before it ended.
            rest = decoder.decode(f.read(), final=True)
            pending += rest
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line + "\n"
            if pending:
                yield pending
            return
