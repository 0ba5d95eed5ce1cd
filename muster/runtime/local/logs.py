"""Container log files: where they live, how an incarnation's log is kept, how they are read.

``$MUSTER_HOME/logs/<ns>/<pod>/<container>.log`` holds the output (stdout and stderr,
interleaved as written) of the current incarnation of a pod; starting a new incarnation
(same namespace and name, e.g. a restarted replica) first renames it to
``<container>.log.1``, replacing the one before, so exactly one previous log is kept, as
``kubectl logs --previous`` offers. Beside each log, ``<container>.log.owner`` (and
``.log.1.owner``) records whom that incarnation ran for (:func:`muster.api.base.controller_ref`:
the pod's TrainingJob or Workflow, or the pod itself), so a reader can tell a restarted
replica's previous log from the log of a deleted job whose successor reuses the pod names.
Logs outlive the pod's records (``release``) and the server; deleting them is left to the
operator.

:class:`LogFiles` reads them for anyone on the same ``MUSTER_HOME``: the runtime's own
``logs()`` and a server that has no runtime handle both go through it, so there is one way
of naming containers, finding the previous log and knowing when a followed log has ended.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from muster.runtime.base import PodNotFound, PodRef, SupportsLogs
from muster.runtime.local.files import ContainerFiles, read_json, runtime_dir, write_json
from muster.runtime.local.tracking import LAUNCH_TIMEOUT, process_alive

__all__ = [
    "FOLLOW_INTERVAL",
    "LogFiles",
    "begin_log",
    "container_log",
    "follow_lines",
    "log_dir",
    "rotate",
    "writer_alive",
]

# How often a followed log is checked for new output (no inotify in the standard library).
FOLLOW_INTERVAL = 0.1
_CHUNK = 64 * 1024


def log_dir(home: Path, namespace: str, name: str) -> Path:
    return home / "logs" / namespace / name


def container_log(home: Path, namespace: str, name: str, container: str, previous: bool = False) -> Path:
    path = log_dir(home, namespace, name) / f"{container}.log"
    return path.with_name(path.name + ".1") if previous else path


def rotate(path: Path) -> None:
    """Keep the current log (and the owner it was written for) as the previous one; the next
    incarnation starts a fresh file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = path.with_name(path.name + ".1")
    try:  # rather than a look first: a call fewer on the control plane's thread
        os.replace(path, previous)
    except FileNotFoundError:
        return
    try:
        os.replace(_owner_file(path), _owner_file(previous))
    except FileNotFoundError:
        # A log written before owners were recorded: its predecessor's owner is not its own.
        _owner_file(previous).unlink(missing_ok=True)


def begin_log(path: Path, owner: Mapping[str, str]) -> None:
    """Start a new incarnation's log at ``path``: the current one becomes the previous one
    (:func:`rotate`), a fresh empty log is created and ``owner`` ({kind, name, uid}) recorded
    as whom it is written for."""
    rotate(path)
    # Gone after the rotation: created as it is (touch() would first try to update its time).
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666))
    write_json(_owner_file(path), dict(owner))


def _owner_file(log: Path) -> Path:
    return log.with_name(log.name + ".owner")


class LogFiles(SupportsLogs):
    """The container logs kept under ``home``, read from the files alone.

    Whether a followed log may still grow is learnt from the runtime's records of the pod's
    latest incarnation (``run/local/pods/<ns>/<pod>/<uid>/``): no final status yet and its
    process (or, before it started, its shim) alive. A pod whose records were released has
    ended, so its log is read to the end and the stream stops.
    """

    def __init__(self, home: Path) -> None:
        self.home = Path(home)

    def logs(
        self,
        pod: PodRef,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        # Checked now, not on the first next(): a caller (the server) answers 404 before it
        # starts a response.
        container, path = self._log_path(pod, container, previous)
        writing = self._writer(pod, container) if follow and not previous else None
        if writing is None:
            return follow_lines(path)
        alive = writing

        def still_writing() -> bool:
            return not (cancel is not None and cancel.is_set()) and alive()

        return follow_lines(path, still_writing)

    def log_owner(
        self, pod: PodRef, container: str | None = None, *, previous: bool = False
    ) -> dict[str, str] | None:
        try:
            _, path = self._log_path(pod, container, previous)
        except PodNotFound:
            return None
        owner = read_json(_owner_file(path))
        return {str(k): str(v) for k, v in owner.items()} if owner else None

    def _log_path(self, pod: PodRef, container: str | None, previous: bool) -> tuple[str, Path]:
        """The container's name and its log file; PodNotFound naming what exists when there is none."""
        if not all(_one_component(part) for part in (pod.namespace, pod.name)):
            # "..", "." or a separator would lead out of the pod's own directory of logs.
            raise PodNotFound(f"no logs for pod {pod}: not a pod name")
        directory = log_dir(self.home, pod.namespace, pod.name)
        names = sorted(p.name[: -len(".log")] for p in directory.glob("*.log")) if directory.is_dir() else []
        if not names:
            raise PodNotFound(f"no logs for pod {pod} on this node")
        if container is None:
            if len(names) > 1:
                raise PodNotFound(f"pod {pod} has several containers; name one of: {', '.join(names)}")
            container = names[0]
        if container not in names:
            raise PodNotFound(f"pod {pod} has no container {container!r} (containers: {', '.join(names)})")
        path = container_log(self.home, pod.namespace, pod.name, container, previous=previous)
        if not path.exists():
            raise PodNotFound(f"container {container!r} of pod {pod} has no previous log")
        return container, path

    def _writer(self, pod: PodRef, container: str) -> Callable[[], bool] | None:
        """Whether the container may still append to its log (asked while following), or None
        when nothing will: here, from the local runtime's records of its newest incarnation."""
        files = self._latest_files(pod, container)
        return None if files is None else (lambda: writer_alive(files))

    def _latest_files(self, pod: PodRef, container: str) -> ContainerFiles | None:
        """The files of ``container`` in the pod's newest recorded incarnation, if any."""
        newest: tuple[float, Path] | None = None
        for pod_json in (runtime_dir(self.home) / "pods" / pod.namespace / pod.name).glob("*/pod.json"):
            doc = read_json(pod_json)
            if doc is not None and (newest is None or doc["created_at"] > newest[0]):
                newest = (doc["created_at"], pod_json.parent)
        return ContainerFiles(newest[1], container) if newest is not None else None


def writer_alive(files: ContainerFiles) -> bool:
    """Whether a container may still append to its log: no final status yet and its process
    (or, before it started, its shim) is alive."""
    if files.status.exists():
        return False
    state = read_json(files.state)
    if state is not None:
        return process_alive(state["pid"], state["create_time"]) or process_alive(
            state["shim_pid"], state["shim_create_time"]
        )
    launch = read_json(files.launch)
    if launch is None:
        # Launched, and its shim is being started (on the runtime's spawner thread).
        with contextlib.suppress(OSError):
            return time.time() - files.spec.stat().st_mtime < LAUNCH_TIMEOUT
        return False
    return process_alive(launch["shim_pid"], launch["shim_create_time"])


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


def _one_component(part: str) -> bool:
    return part not in ("", ".", "..") and not any(c in part for c in "/\\\0")
