"""Where the local runtime keeps its state under ``$MUSTER_HOME``, and how it writes it.

Standard library only: the shim imports this module and must start fast.

Layout (see docs/runtime-local.md)::

    run/local/lock                          held by the live runtime (one per MUSTER_HOME)
    run/local/pods/<ns>/<pod>/<uid>/
        pod.json                            the launch, written last of it, before anything starts
        stop.json                           a stop request: reason, grace (runtime writes)
        <container>.spec.json               argv, env, cwd, log, memory limit (runtime writes)
        <container>.lock                    flock-ed by the container's shim for as long as it lives
        <container>.launch.json             shim pid + start time (shim writes, holding the lock)
        <container>.state.json              process pid, pgid, start time (shim writes)
        <container>.status.json             exit code, signal, OOM, stop (shim writes, last)
        <container>.shim.log                the shim's own diagnostics
    logs/<ns>/<pod>/<container>.log         the container's stdout+stderr, this incarnation
    logs/<ns>/<pod>/<container>.log.1       the previous incarnation's (``logs --previous``)

Every JSON file is written whole to a temporary name and renamed into place, so a reader
(or a runtime restarted after a crash) sees either nothing or a complete record.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the shim imports this module: no typing at run time
    from typing import Any

__all__ = ["ContainerFiles", "claim", "claimed", "read_json", "runtime_dir", "write_json"]


def runtime_dir(home: Path) -> Path:
    """The local runtime's private state directory under ``$MUSTER_HOME``."""
    return home / "run" / "local"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` atomically: a crash leaves the old file or the new one, never half of one.

    No fsync: the failures these records must survive are process deaths (the server's or a
    shim's), after which the page cache still holds every completed write. A power loss takes
    the processes with it, so there is nothing left to re-adopt (the pods become NodeLost).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = json.dumps(data, separators=(",", ":"))  # dump() would encode in Python, chunk by chunk
    # Plain descriptor calls: open() adds a stat, a tty check and two seeks, and on the control
    # plane's thread every system call is a hand-over of the GIL (a pod's launch writes three).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
    try:
        view = memoryview(text.encode())
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path``, or None when the file does not exist (yet)."""
    if not os.path.exists(path):  # the common case on every poll: cheaper than a failed open
        return None
    # Plain descriptor calls, as in write_json: open() adds a stat, a tty check and a seek.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return json.loads(b"".join(chunks))


class ContainerFiles:
    """The files of one container in its pod's state directory (paths computed once: the
    runtime looks at them on every poll)."""

    __slots__ = ("container", "launch", "lock", "pod_dir", "shim_log", "spec", "state", "status", "stop")

    def __init__(self, pod_dir: Path, container: str) -> None:
        self.pod_dir = pod_dir
        self.container = container
        self.spec = pod_dir / f"{container}.spec.json"
        self.launch = pod_dir / f"{container}.launch.json"
        self.lock = pod_dir / f"{container}.lock"
        self.state = pod_dir / f"{container}.state.json"
        self.status = pod_dir / f"{container}.status.json"
        self.shim_log = pod_dir / f"{container}.shim.log"
        self.stop = pod_dir / "stop.json"  # pod-wide: one stop request covers every container


def claim(files: ContainerFiles) -> int | None:
    """Take the container's lock for this shim's lifetime: the descriptor to keep open (closed
    on exec, so the container's process does not hold it), or None when another shim holds it.

    The lock, not a pid, is what says "a shim runs this container": a shim forked by the zygote
    cannot be found by its command line, and a runtime restarted right after starting one
    must not start a second (the container would run twice)."""
    fd = os.open(files.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def claimed(files: ContainerFiles) -> bool:
    """Whether a live shim holds the container's lock (:func:`claim`)."""
    try:
        fd = os.open(files.lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock, if it was granted
    return False
