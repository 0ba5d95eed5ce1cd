"""The node controller: the runtime's machines as Node objects, kept current.

It registers each node the runtime offers (capacity, allocatable, GPU devices, labels,
conditions, addresses, what others hold on it), writes a heartbeat every
``heartbeat_seconds``, and writes at once whatever else changed (a GPU gone unhealthy, a
label). Users own ``spec`` (cordon, taints) and may add labels; the runtime's labels win on
the keys it sets, and so does a GPUSharing's ``nvidia.com/gpu.replicas`` (time-slicing, set and
removed as GPUSharings change, which triggers a sync at once), and a runtime that owns
taints and cordon (a Kubernetes Node's) writes them
to ``spec``. A runtime that watches its nodes (:class:`SupportsNodeWatch`) triggers a sync as
soon as they change, and a node it no longer lists is deleted. Whenever a node's resources
change, the managed ``default`` ClusterQueue's quota follows
(:func:`muster.controllers.scheduling.defaults.sync_default_cluster_queue`).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from muster.api.base import API_VERSION
from muster.api.conditions import iso, set_condition
from muster.api.gpusharing import node_replicas
from muster.api.labels import GPU_REPLICAS_LABEL, GPU_SHARING_ANNOTATION
from muster.api.lifecycle import EventSpec
from muster.api.quantity import Format, Quantity
from muster.controllers.context import Context
from muster.controllers.scheduling.defaults import sync_default_cluster_queue
from muster.runtime.base import NodeInfo, Runtime, SupportsNodeWatch
from muster.store.base import StoreError

__all__ = ["NodeController", "node_status", "sync_default_queue"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]


def sync_default_queue(ctx: Context) -> None:
    """Set the managed default ClusterQueue's quota to what the cached Nodes and NodePools
    offer (a failed write is logged: the next change or resync tries again)."""
    try:
        nodes, pools = ctx.cache.list("Node"), ctx.cache.list("NodePool")
        synced = sync_default_cluster_queue(ctx.writer(), nodes, pools)
        if synced is not None:
            ctx.cache.observe(synced)
    except StoreError:
        log.exception("could not sync the default ClusterQueue's quota")


class NodeController:
    def __init__(self, ctx: Context, runtime: Runtime, heartbeat_seconds: float = 10.0) -> None:
        self.ctx = ctx
        self.runtime = runtime
        self.heartbeat_seconds = heartbeat_seconds
        self._last_beat: dict[str, float] = {}
        self._names: list[str] = []
        self._addresses: dict[str, str] = {}
        self._warned: set[tuple[str, str]] = set()
        self._sharings: list[tuple[str, str]] = []
        self._requota = False

    def addresses(self) -> dict[str, str]:
        """Node name -> the address its pods reach each other at (loopback on the local runtime)."""
        return dict(self._addresses)

    def due(self) -> bool:
        now = self.ctx.now()
        if isinstance(self.runtime, SupportsNodeWatch) and self.runtime.nodes_changed():
            return True
        if self._sharing_versions() != self._sharings:
            return True
        return not self._last_beat or any(now - t >= self.heartbeat_seconds for t in self._last_beat.values())

    def sync(self) -> None:
        """Register or refresh every node of the runtime; sync the default queue's quota."""
        now = self.ctx.now()
        resized = False
        self._sharings = self._sharing_versions()
        infos = self.runtime.nodes()
        self._names = [info.name for info in infos]
        self._addresses = {info.name: info.address for info in infos}
        for gone in set(self._last_beat) - set(self._names):
            del self._last_beat[gone]  # no longer offered: the health controller judges it
        for info in infos:
            resized |= self._sync_node(info, now)
        if isinstance(self.runtime, SupportsNodeWatch):
            resized |= self._remove_gone(set(self._addresses))
        if resized or self._requota:
            self._requota = False
            sync_default_queue(self.ctx)

    def _sync_node(self, info: NodeInfo, now: float) -> bool:
        current = self.ctx.cache.get("Node", info.name)
        if current is None:
            created = self.ctx.create(
                {
                    "apiVersion": API_VERSION,
                    "kind": "Node",
                    "metadata": {"name": info.name, "labels": dict(info.labels)},
                    # A template's taints are there from the first moment the node is seen, so
                    # nothing that does not tolerate them is placed there meanwhile.
                    "spec": {"taints": [_taint(t) for t in info.initial_taints]}
                    if info.initial_taints
                    else {},
                }
            )
            if created is None:
                return False
            current = created
            gpus = len(info.gpus)
            self.ctx.event(
                current, EventSpec("Normal", "Registered", f"{info.runtime} runtime node with {gpus} GPU(s)")
            )
        current = self._sync_spec(info, current)
        for warning in info.warnings:
            if (info.name, warning) not in self._warned:
                self._warned.add((info.name, warning))
                self.ctx.event(current, EventSpec("Warning", "NodeWarning", warning))
        old_labels = current["metadata"].get("labels") or {}
        labels = {**old_labels, **info.labels}
        annotations = dict(current["metadata"].get("annotations") or {})
        # On Kubernetes the cluster's device plugin time-slices (its ConfigMap is the cluster's).
        sliced = self._time_slicing(labels, annotations, bool(info.gpus) and info.runtime != "kubernetes")
        if labels != old_labels or annotations != (current["metadata"].get("annotations") or {}):
            relabelled = copy.deepcopy(current)
            relabelled["metadata"]["labels"] = labels
            relabelled["metadata"]["annotations"] = annotations
            current = self.ctx.update(relabelled) or current
            if sliced is not None:
                self.ctx.event(current, EventSpec("Normal", "GPUSharing", sliced))
                self._requota = True  # the default queue's quota counts the replicas
        wanted = copy.deepcopy(current)
        wanted["status"] = node_status(info, current.get("status") or {}, now)
        old = current.get("status") or {}
        beat = now - self._last_beat.get(info.name, float("-inf")) >= self.heartbeat_seconds
        if _without_heartbeat(wanted["status"]) == _without_heartbeat(old) and not beat:
            return False
        stored = self.ctx.update_status(wanted)
        if stored is None:
            return False
        self._last_beat[info.name] = now
        return old.get("allocatable") != stored["status"].get("allocatable")

    def _sharing_versions(self) -> list[tuple[str, str]]:
        sharings = self.ctx.cache.list("GPUSharing")
        return sorted((s["metadata"]["name"], str(s["metadata"].get("resourceVersion"))) for s in sharings)

    def _time_slicing(self, labels: dict[str, str], annotations: dict[str, str], gpus: bool) -> str | None:
        """Set (or remove, when no GPUSharing chooses one any more) the node's time-slicing
        label in ``labels``/``annotations``; a message when the replicas changed."""
        chosen = node_replicas(labels, self.ctx.cache.list("GPUSharing")) if gpus else None
        before = labels.get(GPU_REPLICAS_LABEL)
        if chosen is not None:
            replicas, sharing = chosen
            labels[GPU_REPLICAS_LABEL] = str(replicas)
            annotations[GPU_SHARING_ANNOTATION] = sharing
            if before != str(replicas):
                return f"GPUSharing {sharing}: each GPU is offered as {replicas} time-sliced replica(s)"
        elif annotations.pop(GPU_SHARING_ANNOTATION, None) is not None:
            labels.pop(GPU_REPLICAS_LABEL, None)
            return "no GPUSharing applies any more: GPUs are whole again"
        return None

    def _sync_spec(self, info: NodeInfo, current: Obj) -> Obj:
        """Taints and cordon, where the runtime owns them."""
        spec = current.get("spec") or {}
        wanted = dict(spec)
        if info.taints is not None:
            taints = [_taint(t) for t in info.taints]
            if taints:
                wanted["taints"] = taints
            else:
                wanted.pop("taints", None)
        if info.unschedulable is not None:
            wanted["unschedulable"] = info.unschedulable
        if wanted == spec:
            return current
        changed = copy.deepcopy(current)
        changed["spec"] = wanted
        return self.ctx.update(changed) or current

    def _remove_gone(self, listed: set[str]) -> bool:
        """Delete the Nodes of this runtime that it no longer lists (a cluster's Node deleted)."""
        removed = False
        for node in self.ctx.cache.list("Node"):
            name = node["metadata"]["name"]
            if name in listed or (node.get("status") or {}).get("runtime") != self.runtime.name:
                continue
            if self.ctx.delete(node):
                log.info("node %s is gone from the %s runtime: deleted", name, self.runtime.name)
                self._last_beat.pop(name, None)
                removed = True
        return removed


def node_status(info: NodeInfo, previous: Obj, now: float) -> Obj:
    """The Node's status for what the runtime reports (conditions keep their transition times)."""
    holder: Obj = {"status": {"conditions": copy.deepcopy(previous.get("conditions") or [])}}
    for c in info.conditions:
        set_condition(holder, c.type, c.status, c.reason, c.message, now)
    status: Obj = {
        "capacity": dict(info.capacity),
        "allocatable": dict(info.allocatable),
        "gpus": [_gpu(g) for g in info.gpus],
        "conditions": holder["status"]["conditions"],
        "lastHeartbeatTime": iso(now),
        "runtime": info.runtime,
        "addresses": [
            {"type": "InternalIP", "address": info.address},
            {"type": "Hostname", "address": info.name},
        ],
    }
    if info.used_by_others:
        status["usedByOthers"] = dict(info.used_by_others)
    return status


def _taint(t: Any) -> Obj:
    out: Obj = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


def _gpu(g: Any) -> Obj:
    out: Obj = {
        "index": g.index,
        "uuid": g.uuid,
        "model": g.model,
        "memory": str(Quantity(g.memory_bytes, Format.BINARY_SI)),
        "health": g.health,
    }
    if g.mig_mode:
        out["migMode"] = True
        out["migDevices"] = [{"profile": m.profile, "uuid": m.uuid} for m in g.mig_devices]
    if g.nvlink_peers:
        out["nvlinkPeers"] = list(g.nvlink_peers)
    if g.domain:
        out["domain"] = g.domain
    if g.health_reason:
        out["healthReason"] = g.health_reason
    return out


def _without_heartbeat(status: Obj) -> Obj:
    return {k: v for k, v in status.items() if k != "lastHeartbeatTime"}
