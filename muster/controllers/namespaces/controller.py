"""The Namespace controller and the ResourceQuota status controller (see the package doc)."""

from __future__ import annotations

import copy
from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.lifecycle import EventSpec, WorkloadState, workload_state
from muster.api.namespace import DEFAULT_QUEUE_ANNOTATION, enforced_quota_resource
from muster.controllers.context import Context
from muster.controllers.scheduling.snapshot import DEFAULT_QUEUE, admitted_view
from muster.scheduler import format_units
from muster.scheduler.namespaces import PODS, demand

__all__ = ["NamespaceController", "QuotaController"]

Obj = dict[str, Any]


class NamespaceController:
    """Gives each new Namespace a LocalQueue ``default`` pointing at its ClusterQueue: the
    Namespace's annotation ``muster.dev/default-cluster-queue``, else ``default_queue`` (the
    server's setting); an empty name gives none. Done once: ``status.defaultLocalQueue``
    records it, so a LocalQueue the team deleted stays deleted."""

    def __init__(self, ctx: Context, default_queue: str) -> None:
        self.ctx = ctx
        self.default_queue = default_queue

    def reconcile(self, ns: Obj) -> None:
        status = ns.get("status") or {}
        if status.get("defaultLocalQueue") is not None or ns["metadata"].get("deletionTimestamp"):
            return
        name = ns["metadata"]["name"]
        annotations = ns["metadata"].get("annotations") or {}
        cluster_queue = annotations.get(DEFAULT_QUEUE_ANNOTATION, self.default_queue)
        made = ""
        if cluster_queue:
            if self.ctx.cache.get("LocalQueue", DEFAULT_QUEUE, name) is None:
                local = registry.validate(
                    {
                        "apiVersion": API_VERSION,
                        "kind": "LocalQueue",
                        "metadata": {"name": DEFAULT_QUEUE, "namespace": name},
                        "spec": {"clusterQueue": cluster_queue},
                    }
                ).obj
                assert local is not None
                if self.ctx.create(local) is None:
                    return  # made meanwhile (or the store refused): the next pass looks again
                self.ctx.event(
                    ns,
                    EventSpec(
                        "Normal",
                        "DefaultQueueCreated",
                        f"LocalQueue {name}/{DEFAULT_QUEUE} created for ClusterQueue {cluster_queue}",
                    ),
                )
            made = DEFAULT_QUEUE
        updated = copy.deepcopy(ns)
        updated["status"] = {"phase": "Active", "defaultLocalQueue": made}
        self.ctx.update_status(updated)


class QuotaController:
    """Keeps ``status.hard`` and ``status.used`` of every ResourceQuota: the enforced keys, summed
    over the namespace's Workloads that hold an admission (evicting ones until their pods are gone)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def sync(self) -> None:
        quotas = self.ctx.cache.list("ResourceQuota")
        if not quotas:
            return
        limited = {q["metadata"].get("namespace") or "default" for q in quotas}
        used: dict[str, dict[str, int]] = {ns: {} for ns in limited}
        for wl in self.ctx.cache.list("Workload"):
            ns = wl["metadata"].get("namespace") or "default"
            if ns not in used or workload_state(wl) not in (WorkloadState.ADMITTED, WorkloadState.EVICTING):
                continue
            view = admitted_view(wl)
            if view is None:
                continue
            for res, v in demand(view.pod_sets, [ps.count for ps in view.pod_sets]).items():
                used[ns][res] = used[ns].get(res, 0) + v
        for quota in quotas:
            self._write(quota, used[quota["metadata"].get("namespace") or "default"])

    def _write(self, quota: Obj, used: dict[str, int]) -> None:
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        shown = {}
        for key in hard:
            res = enforced_quota_resource(key)
            if res is not None:
                amount = used.get(res, 0)
                shown[key] = str(amount) if res == PODS else format_units(res, amount)
        status = {"hard": hard, "used": shown}
        if quota.get("status") == status:
            return
        updated = copy.deepcopy(quota)
        updated["status"] = status
        self.ctx.update_status(updated)
