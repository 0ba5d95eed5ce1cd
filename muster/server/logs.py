"""Pod logs over HTTP: which log source the server reads, and ``tailLines``.

The server reads logs through the runtime's :class:`~muster.runtime.base.SupportsLogs`
capability. The manager registers its runtime with :func:`use_log_source` when it starts;
until then (or when the runtime runs in another process on the same ``MUSTER_HOME``) the
server reads the local runtime's files directly with
:class:`~muster.runtime.local.logs.LogFiles`, the same class the local runtime's own
``logs()`` uses, so both paths name containers, keep the previous log and end a follow the
same way.

Logs outlive their Pod objects (a preempted pod is deleted once stopped, and
``--previous`` is most useful then), so a log is served whether or not the Pod exists, but
not once another object holds the name of the one it was written for
(``SupportsLogs.log_owner``: the pod's TrainingJob or Workflow, compared by uid): a job
deleted and applied again reuses its pod names, and the new job must not show the old
one's output as its own or as ``--previous``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from fastapi import FastAPI

from muster.runtime.base import PodNotFound, PodRef, SupportsLogs
from muster.runtime.local.logs import LogFiles
from muster.server.errors import ApiError
from muster.store import NotFound, Store

__all__ = ["LogRequest", "log_source", "open_log", "use_log_source"]


def use_log_source(app: FastAPI, source: SupportsLogs | None) -> None:
    """Serve logs from ``source`` (a runtime); None goes back to reading the files."""
    app.state.log_source = source


def log_source(app: FastAPI) -> SupportsLogs:
    source = getattr(app.state, "log_source", None)
    if source is not None:
        return source
    return LogFiles(Path(app.state.home))


class LogRequest:
    """One ``GET .../pods/{name}/log`` request."""

    def __init__(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        follow: bool = False,
        previous: bool = False,
        tail_lines: int | None = None,
    ) -> None:
        if follow and previous:
            raise ApiError(400, "follow and previous cannot be combined: a previous log no longer grows")
        self.ref = PodRef(namespace, name, "")
        self.container = container or None
        self.follow = follow
        self.previous = previous
        self.tail_lines = tail_lines


def open_log(source: SupportsLogs, store: Store, req: LogRequest, cancel: threading.Event) -> Iterator[str]:
    """The lines to send. Errors are raised here, before the response starts: 404 when there
    is no such log, 400 when the pod exists but has not started (nothing to show yet)."""
    try:
        _check_owner(source, store, req)
        if req.tail_lines is None:
            return _lines(source, req, req.follow, cancel)
        return _tail(source, req, req.tail_lines, cancel)
    except PodNotFound as exc:
        raise _no_log(store, req, exc) from None


def _check_owner(source: SupportsLogs, store: Store, req: LogRequest) -> None:
    """PodNotFound when the log was written for an object that was deleted and whose name
    another object of its kind holds now (a job applied again reuses its pods' names)."""
    owner = source.log_owner(req.ref, req.container, previous=req.previous)
    if not owner or not owner.get("uid") or not owner.get("kind"):
        return  # unknown (a log from before owners were recorded, or a runtime that keeps none)
    try:
        current = store.get(owner["kind"], owner["name"], req.ref.namespace)
    except (NotFound, KeyError, ValueError):
        return  # its owner is gone and nothing took the name: the log is still only its own
    if current["metadata"].get("uid") == owner["uid"]:
        return
    which = "previous log" if req.previous else "log"
    raise PodNotFound(
        f"pod {req.ref} has no {which} of its own: the one kept belongs to "
        f"{owner['kind'].lower()}/{owner['name']} (uid {owner['uid']}), deleted since"
    )


def _lines(source: SupportsLogs, req: LogRequest, follow: bool, cancel: threading.Event) -> Iterator[str]:
    return source.logs(req.ref, req.container, follow=follow, previous=req.previous, cancel=cancel)


def _tail(source: SupportsLogs, req: LogRequest, n: int, cancel: threading.Event) -> Iterator[str]:
    """The last ``n`` lines, then (following) what comes after them.

    Reads the log once to find them; a follow then re-reads it and skips the complete lines
    already counted, so lines written between the two reads are neither lost nor repeated.
    An unfinished last line is left to the follow, which yields it once it is complete.
    """
    last: deque[str] = deque(maxlen=n)
    complete = 0
    for line in _lines(source, req, False, cancel):
        if line.endswith("\n"):
            complete += 1
            last.append(line)
        elif not req.follow:
            last.append(line)
    if not req.follow:
        return iter(last)
    return _chain(last, _skip(_lines(source, req, True, cancel), complete))


def _skip(lines: Iterator[str], count: int) -> Iterator[str]:
    for i, line in enumerate(lines):
        if i >= count:
            yield line


def _chain(first: deque[str], rest: Iterator[str]) -> Iterator[str]:
    yield from first
    yield from rest


def _no_log(store: Store, req: LogRequest, exc: PodNotFound) -> ApiError:
    ref = req.ref
    try:
        pod = store.get("Pod", ref.name, ref.namespace)
    except NotFound:
        return ApiError(404, f"{exc}; no pod {ref.name} in namespace {ref.namespace} either")
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    if phase == "Pending" and not req.previous:
        return ApiError(
            400,
            f"pod {ref} is Pending: its containers have not started yet (see `muster why pod/{ref.name}`)",
            reason="PodPending",
        )
    return ApiError(404, str(exc))
