"""The cost ledger: a UsageRecord per pod run on a priced or GPU node, and per node lifetime.

Pods and Nodes are deleted when they are done; the ledger keeps what they were, so ``muster
cost`` answers for any past window (docs/cost.md):

* a pod's record opens when it starts running (``status.startTime``) and closes when it ends
  (``finishTime``) or disappears; it carries its namespace, job, ClusterQueue, labels (the
  job's and its own: a ``team`` label), its GPUs (a share as a fraction) and CPUs, and its
  node's GPUs, CPUs, pool, capacity type and price;
* a pool node's record runs from its claim's launch (you pay while it boots) to its
  termination; a node no pool made has one from when it is first seen to its deletion, when it
  carries a price (the label ``muster.dev/price-per-hour``);
* a pod a spot interruption ended is marked ``interrupted``, with the GPU-seconds of work it
  loses: its GPUs x its run since its last checkpoint (the newest file in the job's
  ``MUSTER_CHECKPOINT_DIR`` before it ended; the whole run when there is none). The claim's
  ``status.interruption.lostGpuSeconds`` and the metric ``muster_spot_lost_gpu_seconds_total``
  add them up.

Records closed longer ago than the retention (``MUSTER_COST_RETENTION_DAYS``, 90) are deleted.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from pathlib import Path
from typing import Any

from muster.api.conditions import epoch, iso
from muster.api.labels import JOB_NAME_LABEL, NODEPOOL_LABEL, STOP_REASON_ANNOTATION, WORKLOAD_LABEL
from muster.api.lifecycle import is_final
from muster.api.quantity import parse_quantity
from muster.controllers.cache import Key
from muster.controllers.capacity.pools import claim_of_node, price_of
from muster.controllers.context import Context
from muster.store.base import AlreadyExists, NotFound, StoreError
from muster.util import paused_gc

__all__ = ["RECENT_POOL_SECONDS", "Ledger", "newest_mtime"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_RETENTION_CHECK = 3600.0
# How far back pool_records answers from memory: the window of the doctor's idle-pool check.
RECENT_POOL_SECONDS = 3600.0
_PRUNE_SECONDS = 60.0


class Ledger:
    """Writes the cost ledger (module docstring); one thread calls it."""

    def __init__(self, ctx: Context, retention_days: float = 90.0) -> None:
        self.ctx = ctx
        self.retention = retention_days * 86400.0
        self._open: dict[str, Obj] | None = None  # record name -> open record
        # record name -> end (epoch) of every closed record: what expires is found here, not by
        # listing (and decoding) every stored record again each hour
        self._ended: dict[str, float] = {}
        # Records of pool nodes and their pods closed since _kept_from (see pool_records).
        self._recent_pool: dict[str, Obj] = {}
        self._kept_from = float("inf")
        self._lock = threading.Lock()  # the server's threads read the records (pool_records)
        self._next_retention = 0.0

    def pool_records(self, since: float) -> list[Obj] | None:
        """(Any thread.) The records of NodePool nodes and of pods on them that were open at any
        time from ``since`` on: the open ones and those closed since, from memory (all the
        doctor's idle-pool check needs, not every stored record). None when they are not known
        that far back (not read from the store yet, or ``since`` before what it keeps)."""
        with self._lock:
            if self._open is None or since < self._kept_from:
                return None
            found = [r for r in self._open.values() if r["spec"].get("nodePool")]
            found += [r for r in self._recent_pool.values() if _ended_at(r) >= since]
        return found

    def reconcile(self, changed: dict[Key, Obj | None], full: bool) -> None:
        if self._open is None:
            self._load()
            full = True
        cache = self.ctx.cache
        pods: list[Obj] = []
        gone: list[Obj] = []
        if full:
            pods = cache.list("Pod")
            live = {p["metadata"].get("uid") for p in pods}
            gone = [r for r in self._records("Pod") if r["spec"]["uid"] not in live]
        else:
            for (kind, ns, name), obj in changed.items():
                if kind != "Pod" or obj is None:
                    continue
                current = cache.get("Pod", name, ns or None)
                if current is not None and current["metadata"].get("uid") == obj["metadata"].get("uid"):
                    pods.append(current)
                elif (rec := self._open.get(_pod_record(obj))) is not None:  # type: ignore[union-attr]
                    gone.append(rec)
        # The records about to be made, read in one query (on PostgreSQL one round trip, not
        # one each): a record's create must know whether it was written before.
        self.ctx.prefetch(
            [
                ("UsageRecord", name, None)
                for pod in pods
                if (name := _pod_record(pod)) not in self._open  # type: ignore[operator]
                and name not in self._ended
                and (pod.get("status") or {}).get("startTime")
            ]
        )
        for pod in pods:
            self._pod(pod)
        for rec in gone:
            self._close(rec, None, self.ctx.now())
        if full or any(k[0] in ("Node", "NodeClaim") for k in changed):
            self._nodes()
        if self.ctx.now() - RECENT_POOL_SECONDS >= self._kept_from + _PRUNE_SECONDS:
            self._prune_recent()
        if full and self.ctx.now() >= self._next_retention:
            self._next_retention = self.ctx.now() + _RETENTION_CHECK
            self._expire()

    # -- pods ----------------------------------------------------------------------------------

    def _pod(self, pod: Obj) -> None:
        name = _pod_record(pod)
        rec = self._open.get(name)  # type: ignore[union-attr]
        status = pod.get("status") or {}
        if rec is None:
            if name in self._ended:
                return  # written and closed: a finished pod kept for a while changes it no more
            start = status.get("startTime")
            if not start or not (pod.get("spec") or {}).get("nodeName"):
                return
            spec = self._pod_spec(pod, start)
            if spec is None:
                return
            rec = self._create(name, spec)
            if rec is None or not is_final(pod):
                return
        if is_final(pod):
            self._close(rec, pod, epoch(status.get("finishTime")) or self.ctx.now())

    def _pod_spec(self, pod: Obj, start: str) -> Obj | None:
        spec = pod.get("spec") or {}
        node = self.ctx.cache.get("Node", spec["nodeName"])
        gpus = len(spec.get("gpus") or []) * int(spec.get("gpuMilli") or 1000) / 1000.0
        node_labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        price = price_of(node) if node is not None else None
        claim = claim_of_node(node, self.ctx.cache.list("NodeClaim")) if node is not None else None
        if claim is not None:
            price = float(claim["spec"].get("pricePerHour") or 0.0)
        if not gpus and price is None:
            return None  # nothing to charge: no GPU, no price
        labels = dict(pod["metadata"].get("labels") or {})
        job = labels.get(JOB_NAME_LABEL) or ""
        ns = pod["metadata"].get("namespace") or "default"
        if job:
            owner = self.ctx.cache.get("TrainingJob", job, ns)
            labels = {**((owner or {}).get("metadata", {}).get("labels") or {}), **labels}
        wl = (
            self.ctx.cache.get("Workload", labels.get(WORKLOAD_LABEL) or job, ns)
            if (labels.get(WORKLOAD_LABEL) or job)
            else None
        )
        queue = (((wl or {}).get("status") or {}).get("admission") or {}).get("clusterQueue") or ""
        allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
        return {
            "type": "Pod",
            "namespace": ns,
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"].get("uid") or "",
            "node": spec["nodeName"],
            "nodePool": node_labels.get(NODEPOOL_LABEL, ""),
            "capacityType": (claim or {}).get("spec", {}).get("capacityType", ""),
            "job": job,
            "queue": queue,
            "labels": {k: v for k, v in labels.items() if not k.startswith("muster.dev/")},
            "gpus": gpus,
            "nodeGpus": len(((node or {}).get("status") or {}).get("gpus") or []),
            "cpu": _cpu(spec),
            "nodeCpu": float(parse_quantity(allocatable.get("cpu", "0"))),
            "pricePerHour": price or 0.0,
            "start": start,
        }

    def _close(self, rec: Obj, pod: Obj | None, end: float) -> None:
        updated = copy.deepcopy(rec)
        spec = updated["spec"]
        spec["end"] = iso(max(end, epoch(spec["start"]) or end))
        if spec["type"] == "Pod":
            lost = self._interruption_loss(spec, pod, end)
            if lost is not None:
                spec["interrupted"] = True
                spec["lostGpuSeconds"] = round(lost, 3)
        try:
            stored = self.ctx.writer().update(updated)
        except NotFound:
            with self._lock:
                self._open.pop(rec["metadata"]["name"], None)  # type: ignore[union-attr]
            return
        except StoreError:
            log.exception("could not close usage record %s", rec["metadata"]["name"])
            return
        with self._lock:
            self._open.pop(rec["metadata"]["name"], None)  # type: ignore[union-attr]
            if spec.get("nodePool"):
                self._recent_pool[rec["metadata"]["name"]] = stored
        self._ended[rec["metadata"]["name"]] = epoch(spec["end"]) or end
        if spec.get("interrupted"):
            self._charge_interruption(stored)

    def _interruption_loss(self, spec: Obj, pod: Obj | None, end: float) -> float | None:
        """The work an interruption cost this pod, or None when no interruption ended it."""
        claim = self._claim_of(spec["node"])
        notice = ((claim or {}).get("status") or {}).get("interruption") or {}
        noticed = epoch(notice.get("noticeTime"))
        if noticed is None or end < noticed:
            return None
        if pod is not None:
            stopped = (pod["metadata"].get("annotations") or {}).get(STOP_REASON_ANNOTATION)
            reason = (pod.get("status") or {}).get("reason")
            if not stopped and reason != "NodeLost":
                return None  # it ended on its own
        start = epoch(spec["start"]) or end
        since = start
        if spec.get("job"):
            ckpt = newest_mtime(self.ctx.home / "checkpoints" / spec["namespace"] / spec["job"], end)
            if ckpt is not None:
                since = max(start, ckpt)
        return max(0.0, end - since) * float(spec.get("gpus") or 0.0)

    def _charge_interruption(self, rec: Obj) -> None:
        lost = float(rec["spec"].get("lostGpuSeconds") or 0.0)
        self.ctx.metrics.spot_lost_gpu_seconds.inc(lost)
        claim = self._claim_of(rec["spec"]["node"])
        if claim is None:
            return
        updated = copy.deepcopy(claim)
        notice = updated["status"]["interruption"]
        notice["lostGpuSeconds"] = round(float(notice.get("lostGpuSeconds") or 0.0) + lost, 3)
        self.ctx.update_status(updated)

    # -- nodes ---------------------------------------------------------------------------------

    def _nodes(self) -> None:
        cache, now = self.ctx.cache, self.ctx.now()
        claims = cache.list("NodeClaim")
        wanted: set[str] = set()
        for claim in claims:
            status = claim.get("status") or {}
            if not status.get("launchedAt"):
                continue
            name = f"claim-{claim['metadata']['uid']}"
            wanted.add(name)
            node = cache.get("Node", status.get("nodeName") or "") if status.get("nodeName") else None
            rec = self._open.get(name)  # type: ignore[union-attr]
            if rec is None and not status.get("terminatedAt"):
                self._create(name, self._node_spec(claim, node, status["launchedAt"]))
            elif rec is not None and status.get("terminatedAt"):
                self._close(rec, None, epoch(status["terminatedAt"]) or now)
        pooled = {(c.get("status") or {}).get("nodeName") for c in claims}
        for node in cache.list("Node"):
            if node["metadata"]["name"] in pooled or price_of(node) is None:
                continue
            name = f"node-{node['metadata']['uid']}"
            wanted.add(name)
            if name not in self._open:  # type: ignore[operator]
                start = node["metadata"].get("creationTimestamp") or iso(now)
                self._create(name, self._node_spec(None, node, start))
        for name, rec in list(self._open.items()):  # type: ignore[union-attr]
            if rec["spec"]["type"] == "Node" and name not in wanted:
                self._close(rec, None, now)  # its Node (or claim) was deleted

    def _node_spec(self, claim: Obj | None, node: Obj | None, start: str) -> Obj:
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        status = (node or {}).get("status") or {}
        template = (claim or {}).get("spec", {}).get("template") or {}
        gpus = len(status.get("gpus") or []) if node is not None else int(template.get("gpus") or 0)
        cpu = status.get("allocatable", {}).get("cpu") if node is not None else template.get("cpu")
        return {
            "type": "Node",
            "name": (node or {}).get("metadata", {}).get("name") or (claim or {})["metadata"]["name"],
            "uid": ((node or claim) or {}).get("metadata", {}).get("uid") or "",
            "node": (node or {}).get("metadata", {}).get("name") or (claim or {})["metadata"]["name"],
            "nodePool": (claim or {}).get("spec", {}).get("nodePool") or labels.get(NODEPOOL_LABEL, ""),
            "capacityType": (claim or {}).get("spec", {}).get("capacityType", ""),
            "labels": {k: v for k, v in labels.items() if not k.startswith("muster.dev/")},
            "nodeGpus": gpus,
            "gpus": float(gpus),
            "nodeCpu": float(parse_quantity(cpu or "0")),
            "pricePerHour": float(
                (claim or {}).get("spec", {}).get("pricePerHour") or price_of(node or {"metadata": {}}) or 0.0
            ),
            "start": start,
        }

    # -- store ---------------------------------------------------------------------------------

    def _load(self) -> None:
        opened: dict[str, Obj] = {}
        ended: dict[str, float] = {}
        recent: dict[str, Obj] = {}
        kept_from = self.ctx.now() - RECENT_POOL_SECONDS
        with paused_gc():  # many fresh containers, no cycle (see Cache._relist)
            for rec in self.ctx.store.list("UsageRecord").items:
                name, spec = rec["metadata"]["name"], rec["spec"]
                if not spec.get("end"):
                    opened[name] = rec
                    continue
                ended[name] = _ended_at(rec)
                if spec.get("nodePool") and ended[name] >= kept_from:
                    recent[name] = rec
        with self._lock:
            self._open, self._ended, self._recent_pool, self._kept_from = opened, ended, recent, kept_from

    def _prune_recent(self) -> None:
        kept_from = self.ctx.now() - RECENT_POOL_SECONDS
        with self._lock:
            for name in [n for n, r in self._recent_pool.items() if _ended_at(r) < kept_from]:
                del self._recent_pool[name]
            self._kept_from = kept_from

    def _records(self, kind: str) -> list[Obj]:
        return [r for r in self._open.values() if r["spec"]["type"] == kind]  # type: ignore[union-attr]

    def _create(self, name: str, spec: Obj) -> Obj | None:
        doc = {"apiVersion": "muster.dev/v1", "kind": "UsageRecord", "metadata": {"name": name}, "spec": spec}
        try:
            rec = self.ctx.writer().create(doc)
        except AlreadyExists:
            return None  # written before (and closed: open ones are loaded at start)
        except StoreError:
            log.exception("could not write usage record %s", name)
            return None
        with self._lock:
            self._open[name] = rec  # type: ignore[index]
        return rec

    def _claim_of(self, node: str) -> Obj | None:
        for claim in self.ctx.cache.list("NodeClaim"):
            if (claim.get("status") or {}).get("nodeName") == node or claim["metadata"]["name"] == node:
                return claim
        return None

    def _expire(self) -> None:
        horizon = self.ctx.now() - self.retention
        for name in [name for name, end in self._ended.items() if end < horizon]:
            try:
                self.ctx.writer().delete("UsageRecord", name)
            except NotFound:
                pass  # deleted by someone else: nothing left to expire
            except StoreError:
                continue  # tried again at the next retention check
            del self._ended[name]
            with self._lock:
                self._recent_pool.pop(name, None)


def newest_mtime(directory: Path, before: float) -> float | None:
    """The newest modification time (epoch) of a file under ``directory`` no later than
    ``before``; hidden and ``*.tmp`` files are skipped (a checkpoint half written)."""
    newest: float | None = None
    if not directory.is_dir():
        return None
    for root, _, files in os.walk(directory):
        for f in files:
            if f.startswith(".") or f.endswith(".tmp"):
                continue
            try:
                mtime = os.stat(os.path.join(root, f)).st_mtime
            except OSError:
                continue
            if mtime <= before + 1.0 and (newest is None or mtime > newest):
                newest = mtime
    return newest


def _ended_at(rec: Obj) -> float:
    """When a closed record ended (epoch)."""
    return epoch(rec["spec"].get("end")) or 0.0


def _pod_record(pod: Obj) -> str:
    return f"pod-{pod['metadata'].get('uid')}"


def _cpu(spec: Obj) -> float:
    total = 0.0
    for c in spec.get("containers") or []:
        resources = c.get("resources") or {}
        value = (resources.get("requests") or {}).get("cpu") or (resources.get("limits") or {}).get("cpu")
        if value is not None:
            total += float(parse_quantity(value))
    return total
