"""The scheduler loop: snapshot from the cache, one :func:`muster.scheduler.schedule` cycle,
decisions written back. The core decides; this module only translates, so what the
simulator measures is what runs here.

A cycle runs when something it reads changed (Workloads, Nodes, queues, flavors, priority
classes, pods ending) and some Workload waits; a cycle with nothing new to decide writes
nothing (the writer skips unchanged reasons).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from muster.controllers.context import Context
from muster.controllers.scheduling.apply import DecisionWriter
from muster.controllers.scheduling.snapshot import SnapshotMemo, build_snapshot
from muster.scheduler import Policy, SnapshotError, schedule

__all__ = ["CycleStats", "SchedulerLoop"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


@dataclass
class CycleStats:
    """What the last cycle did, for logs and metrics."""

    admitted: int = 0
    resized: int = 0
    preempted: int = 0
    pending: int = 0
    seconds: float = 0.0
    cycles: int = 0
    errors: list[str] = field(default_factory=list)


class SchedulerLoop:
    def __init__(self, ctx: Context, policy: Policy, message_interval: float = 10.0) -> None:
        self.ctx = ctx
        self.policy = policy
        self.writer = DecisionWriter(ctx, message_interval=message_interval)
        self.stats = CycleStats()
        self._memo = SnapshotMemo()

    def cycle(self) -> list[Obj]:
        """Run one cycle; returns the Workloads it admitted or resized (as stored)."""
        cache = self.ctx.cache
        started = time.perf_counter()
        built = build_snapshot(
            nodes=cache.list("Node"),
            flavors=cache.list("ResourceFlavor"),
            topologies=cache.list("Topology"),
            cluster_queues=cache.list("ClusterQueue"),
            cohorts=cache.list("Cohort"),
            local_queues=cache.list("LocalQueue"),
            priority_classes=cache.list("PriorityClass"),
            workloads=cache.list_live("Workload"),  # finished ones take part in nothing
            pods=cache.list_live("Pod"),  # finished ones charge nothing
            now=self.ctx.now(),
            memo=self._memo,
            namespaces=cache.list("Namespace"),
            resource_quotas=cache.list("ResourceQuota"),
        )
        for wake in (built.next_requeue, built.next_grow):
            if wake is not None:
                self.ctx.timers.at(wake, ("Workload", "", ""))
        growers = any(a.grow for a in built.snapshot.admitted)
        if not built.snapshot.pending and not built.unqueueable and not growers and not built.held:
            return []
        try:
            decisions = schedule(built.snapshot, self.policy)
        except SnapshotError as exc:
            # The queues contradict themselves (a cohort cycle, an unknown flavor): say so,
            # admit nothing, and try again when they change.
            log.error("scheduling cycle skipped: %s", exc)
            self.stats.errors = [str(exc)]
            return []
        admitted = self.writer.write(built, decisions)
        self.ctx.metrics.cycle_duration.observe(time.perf_counter() - started)
        self.stats = CycleStats(
            admitted=len(decisions.admitted),
            resized=len(decisions.resized),
            preempted=len(decisions.preempted),
            pending=len(decisions.pending),
            seconds=time.perf_counter() - started,
            cycles=self.stats.cycles + 1,
        )
        return admitted
