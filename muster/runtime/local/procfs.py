"""What the shim needs to know about processes, read from Linux's /proc with the standard
library only: start times (exactly as psutil computes them, so the runtime's psutil readings
and the shim's agree), zombies, and the resident memory of a process tree.

psutil would do all of this, but importing it costs a container start more than the rest of
the shim together; elsewhere than Linux the shim falls back to psutil (and starts with site).
"""

from __future__ import annotations

import os

__all__ = ["available", "create_time", "is_zombie", "tree_rss"]

_PROC = "/proc"
_boot_time: float | None = None


def available() -> bool:
    """Whether /proc answers the questions below (Linux)."""
    return os.path.exists(f"{_PROC}/self/stat")


def create_time(pid: int) -> float | None:
    """When ``pid`` started, in epoch seconds (psutil's ``create_time()``); None if it is gone."""
    fields = _stat(pid)
    if fields is None:
        return None
    return float(fields[19]) / os.sysconf("SC_CLK_TCK") + _boot()


def is_zombie(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] == "Z"


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (processes that vanish count as 0)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir(_PROC):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry))
    page = os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, ()))
        try:
            with open(f"{_PROC}/{current}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        with open(f"{_PROC}/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _boot() -> float:
    global _boot_time
    if _boot_time is None:
        with open(f"{_PROC}/stat", encoding="ascii") as f:
            _boot_time = next(float(line.split()[1]) for line in f if line.startswith("btime"))
    return _boot_time
