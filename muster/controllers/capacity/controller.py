"""One pass of capacity work, as the manager runs it after the scheduler loop.

Order: spot notices queued by ``muster node interrupt`` (state first), each NodeClaim's
lifecycle step, the autoscaler's plan (it reads the claims just moved), the default
ClusterQueue's quota when NodePools changed, the cost ledger; on a full resync also the
machines no claim accounts for.
"""

from __future__ import annotations

import logging
import queue
from concurrent.futures import Future
from typing import Any

from muster.controllers.cache import Key
from muster.controllers.capacity.autoscaler import Autoscaler
from muster.controllers.capacity.claims import ClaimController
from muster.controllers.capacity.interruption import interrupt
from muster.controllers.capacity.ledger import Ledger
from muster.controllers.capacity.providers import Providers
from muster.controllers.context import Context
from muster.controllers.nodes.registration import sync_default_queue
from muster.runtime.kubernetes.config import KubernetesConfig

__all__ = ["CapacityController"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# What can change a capacity decision.
_KINDS = frozenset({"Workload", "Node", "NodePool", "NodeClaim", "Pod", "ResourceFlavor"})


class CapacityController:
    """NodeClaims, the autoscaler, spot notices and the cost ledger (module docstring)."""

    def __init__(
        self,
        ctx: Context,
        runtime: Any,
        kubernetes: KubernetesConfig | None = None,
        retention_days: float = 90.0,
        autoscale_seconds: float = 1.0,
    ) -> None:
        self.ctx = ctx
        self.providers = Providers(runtime, ctx.now, kubernetes)
        self.claims = ClaimController(ctx, self.providers)
        self.autoscaler = Autoscaler(ctx)
        self.ledger = Ledger(ctx, retention_days)
        self._notices: queue.SimpleQueue[tuple[str, float, str, Future[Obj]]] = queue.SimpleQueue()
        self._judged: frozenset[str] = frozenset()  # Ready nodes when the scheduler last ran
        self.autoscale_seconds = autoscale_seconds
        self._next_plan = 0.0
        self._plan_timer = False

    def request_interruption(self, node: str, at: float, action: str = "terminate") -> Future[Obj]:
        """(Any thread.) Queue a spot notice for ``node``; the future holds its NodeClaim once
        the notice is stored, or the error (KeyError, NotInterruptible)."""
        future: Future[Obj] = Future()
        self._notices.put((node, at, action, future))
        self.ctx.cache.mark([("Node", "", node)])  # wakes the manager
        return future

    def reconcile(self, changed: dict[Key, Obj | None], full: bool, scheduled: bool = True) -> None:
        """One pass; ``scheduled``: the scheduler ran in this pass, so its verdicts on the
        pending Workloads are about the nodes as they are now."""
        ready = _ready_nodes(self.ctx.cache.list("Node"))
        if scheduled:
            self._judged = ready
        notices = self._take_notices()
        if any(k == ("NodePool", "", "") for k in changed):
            self._plan_timer = False
        if not (full or notices or any(k[0] in _KINDS for k in changed)):
            return
        for claim in sorted(self.ctx.cache.list("NodeClaim"), key=lambda c: c["metadata"]["name"]):
            if (
                full
                or (("NodeClaim", "", claim["metadata"]["name"]) in changed)
                or notices
                or self._watching(claim)
            ):
                self.claims.reconcile(claim)
        # A Ready node the scheduler has not seen yet makes its "no room" verdicts stale: the
        # planner may then count on that node instead of asking for another one. The decision
        # runs at most every autoscale_seconds on pod and Workload churn (a busy cluster passes
        # many times a second), at once when pools or claims change.
        now = self.ctx.now()
        urgent = full or notices or any(k[0] in ("NodePool", "NodeClaim") for k in changed)
        if urgent or now >= self._next_plan:
            self._next_plan = now + self.autoscale_seconds
            self.autoscaler.reconcile(ready_verdict=ready <= self._judged)
        elif not self._plan_timer:
            self._plan_timer = True
            self.ctx.timers.at(self._next_plan, ("NodePool", "", ""))
        if full or any(k[0] == "NodePool" for k in changed):
            sync_default_queue(self.ctx)
        self.ledger.reconcile(changed, full)
        if full:
            self.claims.collect_orphans(self.ctx.cache.list("NodeClaim"))

    def close(self) -> None:
        self.providers.close()

    def _take_notices(self) -> bool:
        took = False
        while True:
            try:
                node, at, action, future = self._notices.get_nowait()
            except queue.Empty:
                return took
            took = True
            try:
                claim = interrupt(self.ctx, node, at, action)
            except (KeyError, ValueError) as exc:
                future.set_exception(exc)
                continue
            # answered once the notice is stored: the caller may read it back at once
            self.ctx.after_commit(lambda f=future, c=claim: f.set_result(c))

    def _watching(self, claim: Obj) -> bool:
        """Claims whose step depends on other objects (their Node, its pods) look every pass."""
        return str((claim.get("status") or {}).get("phase") or "Pending") in ("Launched", "Draining", "Ready")


def _ready_nodes(nodes: list[Obj]) -> frozenset[str]:
    return frozenset(
        n["metadata"]["name"]
        for n in nodes
        if not (n.get("spec") or {}).get("unschedulable")
        and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
    )
