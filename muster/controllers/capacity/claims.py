"""The NodeClaim controller: each claim through its lifecycle (:mod:`.lifecycle`).

* **Pending**: the claim is already in the store (the intent), so the provider is called with
  the claim's name as the idempotency key: a restart between the call and the claim's update
  calls again and gets the same machine back, never a second one. A failed call keeps the
  claim Pending with the provider's message (``muster why`` shows it), and the next call waits
  10 s x 2^(failures - 1), at most 300 s.
* **Launched**: the machine is being made. Its Node is the one named by the provider, or
  labelled ``muster.dev/nodeclaim=<claim>``, or (a provider that does not name nodes, such as
  the cluster autoscaler) the first new Ready Node carrying the pool's labels that no other
  claim holds. The claim is Ready once that Node is Ready with its GPUs; a machine that fails,
  or is not Ready within the pool's registration timeout, is Failed.
* **Ready** / **Draining**: a Node that disappears fails the claim; a Draining node whose
  pods are gone (or whose interruption deadline came) is terminated.
* **Failed** and **Terminating**: the Node is cordoned first (nothing new lands on a machine
  being given back), then the provider deletes the machine; once it is gone the claim is
  Terminated, kept ten minutes for ``muster get nodeclaims`` (the Node object goes with the
  runtime's next look at its nodes).

:meth:`ClaimController.collect_orphans` (on every full resync) deletes machines that no claim
accounts for: a claim deleted by hand, or one made by a provider that answered after its
claim was given up.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from typing import Any

from muster.api.conditions import condition, epoch, iso
from muster.api.labels import GPU, NODECLAIM_LABEL, NODEPOOL_LABEL
from muster.api.lifecycle import EventSpec, is_final
from muster.api.quantity import parse_quantity
from muster.controllers.capacity.lifecycle import move_claim
from muster.controllers.capacity.pools import node_labels, node_request, phase
from muster.controllers.capacity.providers import Providers
from muster.controllers.context import Context
from muster.providers.base import Instance, NodeProvider, ProviderError

__all__ = ["BACKOFF_BASE", "BACKOFF_MAX", "TERMINATED_TTL", "ClaimController", "backoff"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
BACKOFF_BASE = 10.0
BACKOFF_MAX = 300.0
TERMINATED_TTL = 600.0  # how long a Terminated claim stays listed


def backoff(failures: int) -> float:
    """Seconds before the next provider call after ``failures`` failed ones."""
    return min(BACKOFF_BASE * 2 ** max(failures - 1, 0), BACKOFF_MAX)


class ClaimController:
    """Moves NodeClaims through their lifecycle; one thread calls it."""

    def __init__(self, ctx: Context, providers: Providers) -> None:
        self.ctx = ctx
        self.providers = providers

    def reconcile(self, claim: Obj) -> None:
        step = {
            "Pending": self._pending,
            "Launched": self._launched,
            "Ready": self._ready,
            "Draining": self._draining,
            "Failed": self._failed,
            "Terminating": self._terminating,
            "Terminated": self._terminated,
        }[phase(claim)]
        step(claim)

    # -- phases --------------------------------------------------------------------------------

    def _pending(self, claim: Obj) -> None:
        now = self.ctx.now()
        status = claim.get("status") or {}
        wait = epoch(status.get("nextAttemptAt"))
        if wait is not None and wait > now:
            self.ctx.wake_at(wait, claim)
            return
        try:
            instance = self._provider(claim).create(node_request(claim))
        except ProviderError as exc:
            self._provider_failed(claim, f"the {claim['spec']['provider']} provider failed: {exc}")
            return
        updated = copy.deepcopy(claim)
        st = updated.setdefault("status", {})
        delay = float(claim["spec"].get("provisioningDelaySeconds") or 0.0)
        st.update(providerId=instance.provider_id, expectedReadyAt=iso(now + delay), lastError="")
        st.pop("nextAttemptAt", None)
        if instance.node_name:
            st["nodeName"] = instance.node_name
        event = move_claim(updated, "Launched", f"the {claim['spec']['provider']} provider is making it", now)
        if self._store(updated, event) is not None:
            self.ctx.wake_at(now + delay, updated)
            self._pool_event(
                claim, EventSpec("Normal", "Launched", f"node {claim['metadata']['name']} launched")
            )

    def _launched(self, claim: Obj) -> None:
        now = self.ctx.now()
        name = claim["metadata"]["name"]
        try:
            instance = self._provider(claim).get(name)
        except ProviderError as exc:
            self._note_error(claim, f"the provider could not say how node {name} is doing: {exc}")
            return
        if instance is None:
            updated = copy.deepcopy(claim)
            updated["status"].pop("nextAttemptAt", None)
            self._store(
                updated,
                move_claim(updated, "Pending", "the provider has no machine for it; asking again", now),
            )
            return
        if instance.state in ("failed", "terminated"):
            self._fail(claim, f"the machine {instance.state}: {instance.message or 'no reason given'}")
            return
        node = self._find_node(claim, instance)
        if node is not None and _ready(node) and _initialized(node, claim):
            updated = copy.deepcopy(claim)
            updated["status"]["nodeName"] = node["metadata"]["name"]
            took = now - (epoch(claim["status"].get("launchedAt")) or now)
            self._store(
                updated,
                move_claim(
                    updated, "Ready", f"node {node['metadata']['name']} is Ready after {took:.0f}s", now
                ),
            )
            self._pool_event(
                claim, EventSpec("Normal", "NodeReady", f"node {node['metadata']['name']} is Ready")
            )
            return
        launched = epoch(claim["status"].get("launchedAt")) or now
        timeout = float(claim["spec"].get("registrationTimeoutSeconds") or 900.0)
        if now - launched >= timeout:
            self._fail(
                claim,
                f"not Ready {timeout:.0f}s after launch (registrationTimeoutSeconds): {instance.message}",
            )
            return
        expected = epoch(claim["status"].get("expectedReadyAt")) or now
        self.ctx.wake_at(min(max(expected, now + 1.0), launched + timeout), claim)

    def _ready(self, claim: Obj) -> None:
        node = self._node(claim)
        if node is None:
            self._fail(claim, f"its node {claim['status'].get('nodeName')} is gone")

    def _draining(self, claim: Obj) -> None:
        now = self.ctx.now()
        node = self._node(claim)
        if node is None:
            self._fail(claim, f"its node {claim['status'].get('nodeName')} is gone")
            return
        deadline = epoch(((claim.get("status") or {}).get("interruption") or {}).get("terminationTime"))
        busy = self._pods_on(node["metadata"]["name"])
        if busy and (deadline is None or now < deadline):
            if deadline is not None:
                self.ctx.wake_at(deadline, claim)
            return
        why = "the interruption deadline came" if busy else "no pod is left on it"
        updated = copy.deepcopy(claim)
        self._store(updated, move_claim(updated, "Terminating", f"drained: {why}", now))

    def _failed(self, claim: Obj) -> None:
        updated = copy.deepcopy(claim)
        message = (claim.get("status") or {}).get("message") or "failed"
        self._store(
            updated,
            move_claim(updated, "Terminating", f"giving the machine back ({message})", self.ctx.now()),
        )

    def _terminating(self, claim: Obj) -> None:
        now = self.ctx.now()
        name = claim["metadata"]["name"]
        node = self._node(claim)
        if node is not None:
            self._cordon(node)
        try:
            provider = self._provider(claim)
            provider.delete(name)
            left = provider.get(name)
        except ProviderError as exc:
            self._note_error(claim, f"the provider could not give node {name} back: {exc}")
            return
        if left is not None and left.state != "terminated":
            self.ctx.wake_at(now + BACKOFF_BASE, claim)
            return
        # The Node object goes with the runtime's next look (a runtime that watches its nodes
        # deletes the ones it no longer lists; others mark it NotReady after the grace period).
        updated = copy.deepcopy(claim)
        if (
            self._store(updated, move_claim(updated, "Terminated", f"machine {name} given back", now))
            is not None
        ):
            self._pool_event(
                claim, EventSpec("Normal", "NodeRemoved", f"node {name} given back to the provider")
            )
            self.ctx.wake_at(now + TERMINATED_TTL, updated)

    def _terminated(self, claim: Obj) -> None:
        gone = epoch((claim.get("status") or {}).get("terminatedAt")) or self.ctx.now()
        if self.ctx.now() >= gone + TERMINATED_TTL:
            self.ctx.delete(claim)
        else:
            self.ctx.wake_at(gone + TERMINATED_TTL, claim)

    # -- orphans -------------------------------------------------------------------------------

    def collect_orphans(self, claims: Iterable[Obj]) -> None:
        """Delete the machines no NodeClaim accounts for (providers opened so far)."""
        names = {c["metadata"]["name"] for c in claims}
        for provider in self.providers.opened():
            try:
                instances = provider.list()
            except ProviderError as exc:
                log.warning("cannot list the %s provider's machines: %s", provider.name, exc)
                continue
            for instance in instances:
                if instance.claim in names or instance.state == "terminated":
                    continue
                log.warning(
                    "machine %s of the %s provider has no NodeClaim: deleting it",
                    instance.claim,
                    provider.name,
                )
                try:
                    provider.delete(instance.claim)
                except ProviderError as exc:
                    log.warning("cannot delete orphan machine %s: %s", instance.claim, exc)

    # -- helpers -------------------------------------------------------------------------------

    def _provider(self, claim: Obj) -> NodeProvider:
        spec = claim["spec"]
        return self.providers.of(spec["provider"], spec.get("providerConfig") or {})

    def _provider_failed(self, claim: Obj, message: str) -> None:
        now = self.ctx.now()
        updated = copy.deepcopy(claim)
        st = updated.setdefault("status", {})
        attempts = int(st.get("attempts") or 0) + 1
        wait = backoff(attempts)
        st.update(
            attempts=attempts,
            lastError=message,
            nextAttemptAt=iso(now + wait),
            message=f"{message}; asking again in {wait:.0f}s",
        )
        if self._store(updated, EventSpec("Warning", "ProvisioningFailed", st["message"])) is not None:
            self._pool_event(
                claim,
                EventSpec("Warning", "ProvisioningFailed", f"node {claim['metadata']['name']}: {message}"),
            )
            self.ctx.wake_at(now + wait, updated)

    def _note_error(self, claim: Obj, message: str) -> None:
        updated = copy.deepcopy(claim)
        updated.setdefault("status", {})["lastError"] = message
        if updated != claim:
            self._store(updated, EventSpec("Warning", "ProviderError", message))
        self.ctx.wake_at(self.ctx.now() + BACKOFF_BASE, claim)

    def _fail(self, claim: Obj, message: str) -> None:
        updated = copy.deepcopy(claim)
        if self._store(updated, move_claim(updated, "Failed", message, self.ctx.now())) is not None:
            self._pool_event(
                claim, EventSpec("Warning", "NodeClaimFailed", f"node {claim['metadata']['name']}: {message}")
            )

    def _store(self, claim: Obj, event: EventSpec) -> Obj | None:
        stored = self.ctx.update_status(claim)
        if stored is not None:
            self.ctx.event(stored, event)
        return stored

    def _pool_event(self, claim: Obj, event: EventSpec) -> None:
        pool = self.ctx.cache.get("NodePool", claim["spec"]["nodePool"])
        if pool is not None:
            self.ctx.event(pool, event)

    def _node(self, claim: Obj) -> Obj | None:
        name = (claim.get("status") or {}).get("nodeName")
        return self.ctx.cache.get("Node", name) if name else None

    def _find_node(self, claim: Obj, instance: Instance) -> Obj | None:
        name = claim["metadata"]["name"]
        for candidate in (instance.node_name, claim.get("status", {}).get("nodeName"), name):
            node = self.ctx.cache.get("Node", candidate) if candidate else None
            if node is not None:
                return node
        nodes = self.ctx.cache.list("Node")
        labelled = [n for n in nodes if (n["metadata"].get("labels") or {}).get(NODECLAIM_LABEL) == name]
        if labelled:
            return labelled[0]
        return self._by_pool_labels(claim, nodes)

    def _by_pool_labels(self, claim: Obj, nodes: list[Obj]) -> Obj | None:
        """A node group's new Node (the cluster autoscaler names nodes itself): Ready, carrying
        the pool's template labels, registered after the launch, held by no other claim."""
        spec = claim["spec"]
        wanted = {
            k: v
            for k, v in node_labels(spec["nodePool"], {"template": spec.get("template") or {}}).items()
            if not k.startswith("muster.dev/") and not k.startswith("karpenter.sh/")
        }
        launched = epoch(claim["status"].get("launchedAt")) or 0.0
        held = {
            (c.get("status") or {}).get("nodeName")
            for c in self.ctx.cache.list("NodeClaim")
            if c["metadata"]["name"] != claim["metadata"]["name"]
        }
        for node in sorted(nodes, key=lambda n: n["metadata"].get("creationTimestamp") or ""):
            labels = node["metadata"].get("labels") or {}
            pool = labels.get(NODEPOOL_LABEL)
            if node["metadata"]["name"] in held or (pool is not None and pool != spec["nodePool"]):
                continue
            created = epoch(node["metadata"].get("creationTimestamp")) or 0.0
            if created >= launched and all(labels.get(k) == v for k, v in wanted.items()):
                return node
        return None

    def _pods_on(self, node: str) -> list[Obj]:
        return [
            p
            for p in self.ctx.cache.list("Pod")
            if (p.get("spec") or {}).get("nodeName") == node and not is_final(p)
        ]

    def _cordon(self, node: Obj) -> None:
        if (node.get("spec") or {}).get("unschedulable"):
            return
        updated = copy.deepcopy(node)
        updated.setdefault("spec", {})["unschedulable"] = True
        self.ctx.update(updated)


def _ready(node: Obj) -> bool:
    return (condition(node, "Ready") or {}).get("status") == "True"


def _initialized(node: Obj, claim: Obj) -> bool:
    """Its GPUs are allocatable (a GPU node whose device plugin never reports stays Launched
    until the registration timeout, as Karpenter's Initialized condition)."""
    template = claim["spec"].get("template") or {}
    gpus = int(template.get("gpus") or 0)
    if not gpus:
        return True
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    mig = template.get("mig")
    if mig:
        key, want = f"nvidia.com/mig-{mig['profile']}", gpus * int(mig["slicesPerGpu"])
    else:
        key, want = GPU, gpus
    have = allocatable.get(key)
    return have is not None and parse_quantity(have).as_int() >= want
