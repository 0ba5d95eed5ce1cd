"""What the Ray runtime knows of each pod, driver side, and how the actor's reports move it.

A container moves ``waiting -> running -> terminated`` from the records its shim writes on the
node (state, then status), which the pod's actor relays; its output is appended to the
driver's log file (``$MUSTER_HOME/logs/<ns>/<pod>/<container>.log``, the local runtime's
layout, so ``muster logs`` reads both alike). The pod's phase and final reason are derived as
on the local runtime (:mod:`muster.runtime.local.tracking`); a pod that ends without its
shims' word (its actor or node died, its gang was never placed) gets the reason of that end
for every container still open.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.runtime.base import (
    ContainerStatus,
    DeviceBinding,
    PodLaunch,
    PodPhase,
    PodReason,
    PodStatusChange,
    iso_from_epoch,
)
from muster.runtime.local.launch import LaunchPlan
from muster.runtime.local.tracking import classify, derived_phase, lost, summarize

__all__ = ["RayContainer", "RayPod"]


@dataclass
class RayContainer:
    name: str
    log: Path  # the driver's copy of its output
    limit: int | None = None  # memory limit, for messages
    state: str = "waiting"  # waiting | running | terminated
    started_at: float | None = None
    pid: int | None = None
    offset: int = 0  # bytes of output received so far
    final: ContainerStatus | None = None

    def status(self) -> ContainerStatus:
        if self.final is not None:
            return self.final
        return ContainerStatus(
            name=self.name,
            state=self.state,  # type: ignore[arg-type]
            started_at=iso_from_epoch(self.started_at) if self.started_at else None,
            pid=self.pid,
        )


@dataclass
class RayPod:
    """One pod: its launch, where Muster placed it, its actor and what it reported."""

    launch: PodLaunch
    devices: DeviceBinding
    node: str  # Muster's node name
    node_id: str  # the Ray node it must run on
    plan: LaunchPlan
    gang: str  # the key of its gang
    bundle: int  # its bundle in the gang's placement group
    containers: list[RayContainer]
    phase: PodPhase = PodPhase.PENDING
    reported: PodPhase = PodPhase.PENDING
    stop: dict[str, Any] | None = None  # reason, grace_seconds, requested_at (as stop.json)
    actor: Any = None
    call: Any = None  # the outstanding start() or wait() ObjectRef
    where: dict[str, Any] = field(default_factory=dict)  # what start() said: node id, host, pid

    @property
    def final(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    def known(self) -> dict[str, str]:
        return {c.name: c.state for c in self.containers}

    def offsets(self) -> dict[str, int]:
        return {c.name: c.offset for c in self.containers}

    def take(self, answer: dict[str, Any]) -> None:
        """Apply one ``PodActor.wait`` answer: output, starts, exits, lost shims."""
        by_name = {c.name: c for c in self.containers}
        for name, chunk in answer["logs"].items():
            c = by_name[name]
            with open(c.log, "ab") as f:
                f.write(chunk)
            c.offset += len(chunk)
        for name, state in answer["states"].items():
            c = by_name[name]
            if c.state == "waiting":
                c.state, c.pid, c.started_at = "running", state["pid"], state["started_at"]
        for name, status in answer["statuses"].items():
            c = by_name[name]
            if c.final is None:
                c.final = classify(name, status, self.stop, started_at=c.started_at, pid=c.pid, limit=c.limit)
                c.state = "terminated"
        for name, message in answer["lost"].items():
            self.end(name, message)
        self.update_phase()

    def end(self, name: str, message: str, reason: PodReason | None = None) -> None:
        """End a container without its shim's word: ``reason``, else the stop's or NodeLost."""
        c = next(c for c in self.containers if c.name == name)
        if c.final is not None:
            return
        if reason is None:
            c.final = lost(name, self.stop, message, started_at=c.started_at, pid=c.pid)
        else:
            c.final = ContainerStatus(
                name=name,
                state="terminated",
                reason=reason,
                message=message,
                started_at=iso_from_epoch(c.started_at) if c.started_at else None,
                finished_at=iso_from_epoch(time.time()),
                pid=c.pid,
            )
        c.state = "terminated"

    def end_all(self, message: str, reason: PodReason | None = None) -> None:
        for c in self.containers:
            self.end(c.name, message, reason)
        self.update_phase()

    def update_phase(self) -> None:
        if not self.final:  # a final phase is never left
            self.phase = derived_phase([c.status() for c in self.containers])

    def status(self) -> PodStatusChange:
        started = [c.started_at for c in self.containers if c.started_at]
        return summarize(
            self.launch.ref, self.phase, [c.status() for c in self.containers], min(started, default=None)
        )

    def take_change(self) -> PodStatusChange | None:
        """The pod's status when its phase moved since it was last reported (Pending never is)."""
        if self.phase == self.reported or self.phase is PodPhase.PENDING:
            return None
        self.reported = self.phase
        return self.status()
