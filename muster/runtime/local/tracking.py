"""What the local runtime knows about each pod and container, and how it learns more.

A container moves ``waiting -> running -> terminated`` (never back), each step read from a
file its shim wrote (state.json, status.json) or concluded from a process that vanished
without writing one. A pod's phase is derived from its containers and follows
:data:`POD_TRANSITIONS`; the reason of a final phase is classified here, in one place.

Process identity is always (pid, start time): a pid alone may have been reused by an
unrelated process while the server was down.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from muster.runtime.base import (
    STOP_REASONS,
    ContainerStatus,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
    iso_from_epoch,
)
from muster.runtime.local.files import ContainerFiles, read_json

if TYPE_CHECKING:
    from muster.runtime.local.spawner import ShimProcess

__all__ = [
    "LAUNCH_TIMEOUT",
    "POD_TRANSITIONS",
    "CState",
    "ContainerRecord",
    "PodRecord",
    "classify",
    "derived_phase",
    "load_state",
    "lost",
    "mark_lost",
    "observe",
    "pod_status",
    "process_alive",
    "summarize",
    "take_change",
    "update_phase",
]

# A container with a spec but no record of its shim after this long was never launched (the
# runtime died between writing the spec and starting the shim).
LAUNCH_TIMEOUT = 30.0
_CTIME_TOLERANCE = 0.05  # start times come from clock ticks (10 ms); allow a few


class CState(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"


# Every legal pod phase change, with why it happens. Phases never go back.
POD_TRANSITIONS: dict[tuple[PodPhase, PodPhase], str] = {
    # every container's shim has started its process
    (PodPhase.PENDING, PodPhase.RUNNING): "started",
    # every container started and exited 0 between two observations
    (PodPhase.PENDING, PodPhase.SUCCEEDED): "ran to completion",
    # a container could not be executed, was stopped before it started, or its shim was lost,
    # and every container has ended
    (PodPhase.PENDING, PodPhase.FAILED): "failed to start",
    # every container exited 0 on its own
    (PodPhase.RUNNING, PodPhase.SUCCEEDED): "completed",
    # every container has ended and one failed, was stopped, OOM-killed or lost
    (PodPhase.RUNNING, PodPhase.FAILED): "failed",
}

# When containers disagree, the pod's reason is the first of these that any container has.
_REASON_ORDER = (
    *sorted(STOP_REASONS),
    PodReason.GANG_START_FAILED,  # a runtime that starts gangs as one unit could not place it
    PodReason.OOM_KILLED,
    PodReason.NODE_LOST,
    PodReason.ERROR,
    PodReason.COMPLETED,
)


@dataclass
class ContainerRecord:
    name: str
    files: ContainerFiles
    spec_time: float  # when the spec was written (epoch)
    popen: subprocess.Popen[bytes] | ShimProcess | None = None  # the shim, when this runtime started it
    shim_pid: int | None = None
    shim_ctime: float | None = None
    pid: int | None = None
    ctime: float | None = None
    started_at: float | None = None
    cgroup: str | None = None
    cgroup_version: int = 0
    state: CState = CState.WAITING
    final: ContainerStatus | None = None
    # The shim died while the process lives on: the runtime watches (and stops) it directly.
    orphan: bool = False
    orphan_kill_at: float | None = None  # monotonic deadline of the SIGKILL after a stop
    watch_fd: int | None = None  # readable when something happened (notify pipe or pidfd)
    watch_pipe: bool = False  # watch_fd is the shim's notify pipe (else a pidfd)
    watch_fired: bool = True  # liveness must be checked (the watch fd fired, or there is none)
    limit: int | None = None  # memory limit, for messages
    # Its shim's start was asked of the spawner and its result not yet collected: the result
    # always comes (a shim, or why none), however long a burst keeps the spawner busy.
    spawning: bool = False

    def status(self) -> ContainerStatus:
        if self.final is not None:
            return self.final
        return ContainerStatus(
            name=self.name,
            state=self.state.value,  # type: ignore[arg-type]
            started_at=iso_from_epoch(self.started_at) if self.started_at else None,
            pid=self.pid,
        )


@dataclass
class PodRecord:
    ref: PodRef
    dir: Path
    grace: float
    containers: list[ContainerRecord]
    phase: PodPhase = PodPhase.PENDING
    reported: PodPhase | None = PodPhase.PENDING  # None: never reported (adopted)
    stop: dict[str, Any] | None = None  # stop.json: reason, grace_seconds, requested_at
    labels: dict[str, str] = field(default_factory=dict)
    node: str = ""  # the node it was bound to (a virtual node's name, or this machine's)

    @property
    def stop_reason(self) -> PodReason:
        return PodReason(self.stop["reason"]) if self.stop else PodReason.STOPPED


def process_alive(pid: int | None, ctime: float | None) -> bool:
    """True if ``pid`` is a live (not zombie) process started at ``ctime``."""
    if pid is None or ctime is None:
        return False
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - ctime) < _CTIME_TOLERANCE and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def observe(c: ContainerRecord, pod: PodRecord) -> None:
    """Bring ``c`` up to date with its files and processes (cheap: a few stats, no waiting)."""
    if c.state is CState.TERMINATED:
        return
    if _read_status(c, pod):
        return
    if c.state is CState.WAITING:
        state = read_json(c.files.state)
        if state is not None:
            load_state(c, state)
    if c.orphan:
        if not process_alive(c.pid, c.ctime):
            _killpg(c.pid, signal.SIGKILL)  # what the process left in its group ends with it
            mark_lost(
                c,
                pod,
                f"its shim (pid {c.shim_pid}) died; the process ran on unwatched, exit status unknown",
            )
        return
    if not c.watch_fired or _shim_alive(c):
        return
    # The shim is gone. It writes the status just before it exits, so look once more.
    if _read_status(c, pod):
        return
    if c.shim_pid is None and c.popen is None:
        if c.spawning:  # the spawner's result says how it went: nothing to read meanwhile
            return
        launch = read_json(c.files.launch)
        if launch is not None:  # an adopted shim that recorded itself after the adoption
            c.shim_pid, c.shim_ctime = launch["shim_pid"], launch["shim_create_time"]
        elif time.time() - c.spec_time > LAUNCH_TIMEOUT:
            mark_lost(c, pod, "the runtime stopped before it started the shim")
        return
    if c.state is CState.RUNNING and process_alive(c.pid, c.ctime):
        c.orphan = True
        return
    where = _shim_tail(c.files.shim_log)
    if c.state is CState.RUNNING:
        mark_lost(
            c,
            pod,
            f"its shim (pid {c.shim_pid}) died and the process is gone; the exit status is unknown{where}",
        )
    elif pod.stop:  # the stop's SIGTERM reached the shim before it could handle signals
        mark_lost(c, pod, "stopped before the process started")
    else:
        mark_lost(c, pod, f"its shim (pid {c.shim_pid}) exited before starting the process{where}")


def pod_status(pod: PodRecord) -> PodStatusChange:
    """The pod's current status as the runtime reports it."""
    started = [c.started_at for c in pod.containers if c.started_at]
    return summarize(pod.ref, pod.phase, [c.status() for c in pod.containers], min(started, default=None))


def summarize(
    ref: PodRef, phase: PodPhase, statuses: Sequence[ContainerStatus], started_at: float | None
) -> PodStatusChange:
    """A pod's status from its containers' (any runtime whose containers run under the shim):
    a final phase takes the first reason of :data:`_REASON_ORDER` any container has."""
    statuses = tuple(statuses)
    started = iso_from_epoch(started_at) if started_at else None
    if phase in (PodPhase.PENDING, PodPhase.RUNNING):
        return PodStatusChange(ref, phase, containers=statuses, started_at=started)
    reason = next(r for r in _REASON_ORDER if any(s.reason == r for s in statuses))
    culprit = next(s for s in statuses if s.reason == reason)
    finished = [s.finished_at for s in statuses if s.finished_at]
    message = "" if reason is PodReason.COMPLETED else f"container {culprit.name!r}: {culprit.message}"
    return PodStatusChange(
        ref,
        phase,
        reason=reason,
        message=message,
        exit_code=culprit.exit_code,
        containers=statuses,
        started_at=started,
        finished_at=max(finished) if finished else None,
    )


def update_phase(pod: PodRecord) -> None:
    """Move the pod to the phase its containers imply, through a legal transition only."""
    new = _derived_phase(pod)
    if new != pod.phase:
        if (pod.phase, new) not in POD_TRANSITIONS:
            raise AssertionError(f"pod {pod.ref}: illegal phase change {pod.phase} -> {new}")
        pod.phase = new


def take_change(pod: PodRecord) -> PodStatusChange | None:
    """The pod's status if its phase was not reported yet (Pending is never reported: the
    caller created the pod Pending); marks it reported."""
    if pod.phase == pod.reported or pod.phase is PodPhase.PENDING:
        return None
    pod.reported = pod.phase
    return pod_status(pod)


def _derived_phase(pod: PodRecord) -> PodPhase:
    return derived_phase([c.status() for c in pod.containers])


def derived_phase(statuses: Sequence[ContainerStatus]) -> PodPhase:
    """The phase the containers imply: final once all ended (Succeeded when every one
    completed), Running once none waits, else Pending."""
    states = [s.state for s in statuses]
    if all(s == CState.TERMINATED for s in states):
        ok = all(s.reason is PodReason.COMPLETED for s in statuses)
        return PodPhase.SUCCEEDED if ok else PodPhase.FAILED
    if all(s != CState.WAITING for s in states):
        return PodPhase.RUNNING
    return PodPhase.PENDING


def load_state(c: ContainerRecord, state: dict[str, Any]) -> None:
    """Take in what the shim recorded once it started the process."""
    c.state = CState.RUNNING
    c.pid, c.ctime, c.started_at = state["pid"], state["create_time"], state["started_at"]
    c.shim_pid, c.shim_ctime = state["shim_pid"], state["shim_create_time"]
    c.cgroup = state.get("cgroup")
    mode = state.get("memory_enforcement") or ""
    c.cgroup_version = int(mode[-1]) if c.cgroup and mode.startswith("cgroup") else 0


def _read_status(c: ContainerRecord, pod: PodRecord) -> bool:
    status = read_json(c.files.status)
    if status is None:
        return False
    if c.state is CState.WAITING:
        state = read_json(c.files.state)
        if state is not None:
            load_state(c, state)
    c.final = _classify(c, pod, status)
    c.state = CState.TERMINATED
    return True


def _classify(c: ContainerRecord, pod: PodRecord, status: dict[str, Any]) -> ContainerStatus:
    return classify(c.name, status, pod.stop, started_at=c.started_at, pid=c.pid, limit=c.limit)


def classify(
    name: str,
    status: dict[str, Any],
    stop: dict[str, Any] | None,
    *,
    started_at: float | None,
    pid: int | None = None,
    limit: int | None = None,
) -> ContainerStatus:
    """A container's final status from the shim's ``status.json`` and the pod's stop request
    (``stop.json``: reason, grace), with its classified reason and a message."""
    code, sig = status["exit_code"], status["signal"]
    stop_reason = PodReason(stop["reason"]) if stop else PodReason.STOPPED
    if status["oom_killed"]:
        of = f" of {limit} bytes" if limit else ""
        reason, message = PodReason.OOM_KILLED, f"memory limit{of} exceeded; killed (exit code {code})"
    elif status["stop_signalled_at"] is not None or (not status["started"] and stop):
        reason = stop_reason
        if not status["started"]:
            message = "stopped before the process started"
        elif status["killed_after_grace"]:
            message = f"still running {stop.get('grace_seconds') if stop else '?'}s after SIGTERM; killed"
        else:
            message = f"exited with code {code} after SIGTERM"
    elif code == 0:
        reason, message = PodReason.COMPLETED, ""
    else:
        reason = PodReason.ERROR
        if status.get("message"):
            message = status["message"]
        elif sig:
            message = f"killed by signal {_signal_name(sig)} (exit code {code})"
        else:
            message = f"exited with code {code}"
    return ContainerStatus(
        name=name,
        state="terminated",
        exit_code=code,
        signal=sig,
        reason=reason,
        message=message,
        started_at=iso_from_epoch(started_at) if started_at else None,
        finished_at=iso_from_epoch(status["finished_at"]),
        pid=pid,
    )


def mark_lost(c: ContainerRecord, pod: PodRecord, message: str) -> None:
    """End ``c`` without a status from its shim: NodeLost, or the stop reason if one was asked."""
    c.final = lost(c.name, pod.stop, message, started_at=c.started_at, pid=c.pid)
    c.state = CState.TERMINATED


def lost(
    name: str, stop: dict[str, Any] | None, message: str, *, started_at: float | None, pid: int | None = None
) -> ContainerStatus:
    """A container that ended without a status: NodeLost, or the stop's reason when one was asked."""
    return ContainerStatus(
        name=name,
        state="terminated",
        reason=PodReason(stop["reason"]) if stop else PodReason.NODE_LOST,
        message=message,
        started_at=iso_from_epoch(started_at) if started_at else None,
        finished_at=iso_from_epoch(time.time()),
        pid=pid,
    )


def _shim_alive(c: ContainerRecord) -> bool:
    if c.popen is not None:
        return c.popen.poll() is None  # also reaps our own child
    return process_alive(c.shim_pid, c.shim_ctime)


def _shim_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f" (shim said: {lines[-1][:300]})" if lines else ""


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _killpg(pgid: int | None, sig: int) -> None:
    if pgid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
