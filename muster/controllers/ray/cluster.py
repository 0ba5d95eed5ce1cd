"""The RayCluster controller: a cluster, its Workload (one gang), its ``ray start`` pods, its
state and endpoints.

One reconcile, level-triggered (everything follows from the cluster, its Workload and its
pods as they are now):

1. the Workload is created (queue, priority, the head and each worker group's ``replicas``
   pods, the GCS and dashboard ports, the cluster's auth token), or kept active or
   deactivated as ``spec.suspend`` says (its pods are then stopped by the eviction);
2. once admitted, the pods of the current run are created, bound to the admission's
   placements; pods of an earlier run (before a requeue or a restart) are stopped first;
3. state: ``ready`` when every pod runs; a pod that ends (Ray nodes never end on their own)
   restarts the whole cluster, as a head restart does under KubeRay without GCS fault
   tolerance, unless the cluster was never ready (``failed``: a bad ``rayStartParams`` would
   fail the same way again; a failed cluster holds no quota).

Deleting the cluster deletes its Workload and stops its pods (garbage collection): every
``ray start`` process group ends, which is ``ray stop`` for this cluster only.
"""

from __future__ import annotations

import copy
import logging
import secrets
from collections.abc import Callable
from typing import Any

from muster.api.compat.jobs import PRIORITY_LABEL, QUEUE_LABEL
from muster.api.conditions import condition, iso
from muster.api.labels import (
    ATTEMPT_LABEL,
    RAY_CLUSTER_LABEL,
    RAY_DASHBOARD_PORT_ANNOTATION,
    RAY_GCS_PORT_ANNOTATION,
)
from muster.api.lifecycle import (
    EventSpec,
    WorkloadState,
    describe_failure,
    finish_workload,
    is_final,
    phase,
    workload_state,
)
from muster.controllers.context import Context
from muster.controllers.pods.stop import StopReasons, clear_pods, stop_requested
from muster.controllers.ray.lifecycle import move_cluster
from muster.controllers.ray.pods import (
    AUTH_TOKEN_ANNOTATION,
    HEAD,
    ClusterPorts,
    admitted_count,
    cluster_env,
    cluster_ports,
    cluster_workload,
    head_pod_name,
    ray_pod,
    ray_start_command,
    worker_pod_name,
)
from muster.controllers.scheduling.priority import PriorityClassMissing, priority_of
from muster.controllers.scheduling.snapshot import DEFAULT_QUEUE

__all__ = ["HeadAddress", "RayClusterController", "cluster_connection"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
# (namespace, workload, head pod, its node) -> the address the cluster reaches its head at.
HeadAddress = Callable[[str, str, str, str], str]


class RayClusterController:
    def __init__(
        self, ctx: Context, head_address: HeadAddress | None = None, ray: str = "ray", local: bool = True
    ) -> None:
        self.ctx = ctx
        self.head_address: HeadAddress = head_address or (lambda _ns, _wl, _pod, _node: "127.0.0.1")
        self.ray = ray  # the `ray` program the pods run
        self.local = local  # processes on this machine: each cluster gets its own temp dir

    def reconcile(self, cluster: Obj) -> None:
        _Pass(self, cluster).run()


def cluster_connection(ctx: Context, cluster: Obj) -> tuple[dict[str, str], str] | None:
    """The environment a driver of ``cluster`` needs, and its head's node; None until admitted."""
    meta = cluster["metadata"]
    ns = meta.get("namespace") or "default"
    wl = ctx.cache.get("Workload", meta["name"], ns)
    head = ctx.cache.get("Pod", head_pod_name(meta["name"]), ns)
    address = ((cluster.get("status") or {}).get("head") or {}).get("podIP")
    if wl is None or head is None or not address:
        return None
    ports, token = _ports_of(wl), (wl["metadata"].get("annotations") or {}).get(AUTH_TOKEN_ANNOTATION, "")
    env = cluster_env(meta["name"], address, ports, token)
    env["MUSTER_RAY_NODES"] = str(1 + int((cluster.get("status") or {}).get("desiredWorkerReplicas") or 0))
    return env, head["spec"]["nodeName"]


def _ports_of(wl: Obj) -> ClusterPorts:
    notes = wl["metadata"].get("annotations") or {}
    return ClusterPorts(int(notes[RAY_GCS_PORT_ANNOTATION]), int(notes[RAY_DASHBOARD_PORT_ANNOTATION]))


class _Pass:
    """One reconcile of one cluster: edits a copy of its status, writes it once at the end."""

    def __init__(self, ctl: RayClusterController, cluster: Obj) -> None:
        self.ctl, self.ctx = ctl, ctl.ctx
        self.original = cluster
        self.cluster = {**cluster, "status": copy.deepcopy(cluster.get("status") or {})}
        self.status: Obj = self.cluster["status"]
        self.events: list[EventSpec] = []
        self.now = self.ctx.now()
        meta = cluster["metadata"]
        self.name, self.ns = meta["name"], meta.get("namespace") or "default"

    def run(self) -> None:
        self._counts()
        wl = self._workload()
        if wl is not None:
            self._follow(wl)
        self._write()

    # -- the Workload ----------------------------------------------------------------------

    def _workload(self) -> Obj | None:
        wl = self.ctx.cache.get("Workload", self.name, self.ns)
        uid = self.cluster["metadata"]["uid"]
        if wl is not None:
            if any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or []):
                return wl
            self.ctx.delete(wl)  # left by an earlier cluster of the same name
            return None
        spec, labels = self.cluster["spec"], self.cluster["metadata"].get("labels") or {}
        try:
            value, class_name = priority_of(
                self.ctx.cache.list("PriorityClass"),
                spec.get("priorityClassName") or labels.get(PRIORITY_LABEL),
            )
        except PriorityClassMissing as exc:
            self._move("pending", "PriorityClassNotFound", str(exc))
            return None
        queue = spec.get("queueName") or labels.get(QUEUE_LABEL)
        if not queue and self.ctx.cache.get("LocalQueue", DEFAULT_QUEUE, self.ns) is not None:
            queue = DEFAULT_QUEUE
        created = self.ctx.create(
            cluster_workload(
                self.cluster,
                queue=queue,
                priority=value,
                priority_class=class_name,
                ports=cluster_ports(spec),
                token=secrets.token_hex(16),
            )
        )
        if created is not None:
            self.status["workload"] = self.name
            if spec.get("suspend"):
                self._move("suspended", "Suspended", "spec.suspend is set: no pods, no quota held")
            else:
                self._move("pending", "Queued", f"waiting in queue {queue or DEFAULT_QUEUE}")
        return created

    def _follow(self, wl: Obj) -> None:
        suspend = bool(self.cluster["spec"].get("suspend"))
        if wl["spec"].get("active", True) == suspend:
            changed = copy.deepcopy(wl)
            changed["spec"]["active"] = not suspend
            wl = self.ctx.update(changed) or wl
        if suspend:
            self._move("suspended", "Suspended", "spec.suspend is set: pods stopped, quota released")
            return
        if (self.status.get("state") or "") in ("", "suspended"):
            self._move("pending", "Resumed", "spec.suspend was cleared: queued again")
        if self.status.get("state") == "failed":
            self._failed(wl)
            return
        state = workload_state(wl)
        if state is WorkloadState.ADMITTED:
            self._admitted(wl)
        elif state in (WorkloadState.PENDING, WorkloadState.EVICTING):
            evicted = condition(wl, "Evicted") or {}
            if self.status.get("state") == "ready":
                self._move(
                    "pending", evicted.get("reason") or "Requeued", evicted.get("message") or "requeued"
                )
            pending = (wl.get("status") or {}).get("pending")
            if pending and state is WorkloadState.PENDING:
                self.status["reason"] = f"{pending['reason']}: {pending.get('message', '')}"

    # -- the gang ----------------------------------------------------------------------------

    def _admitted(self, wl: Obj) -> None:
        requeues = ((wl.get("status") or {}).get("requeueState") or {}).get("count", 0)
        attempt = f"{requeues}-{self.status.get('restartCount', 0)}"
        pods = self._pods()
        stale = [p for p in pods if (p["metadata"].get("labels") or {}).get(ATTEMPT_LABEL) != attempt]
        if self._clear(stale, StopReasons.GANG_RESTART):
            return  # the previous run's processes hold the ports and GPUs
        current = [p for p in pods if p not in stale]
        expected = self._expected(wl)
        have = {p["metadata"]["name"] for p in current}
        if any(e[0] not in have for e in expected):
            self._create(wl, expected, have, attempt)
            current = [
                p for p in self._pods() if (p["metadata"].get("labels") or {}).get(ATTEMPT_LABEL) == attempt
            ]
        live = [p for p in current if not stop_requested(p)]
        ended = [p for p in live if is_final(p)]
        if ended:
            self._ended(ended[0])
        elif len(live) == len(expected) and all(phase(p) == "Running" for p in live):
            if self._move("ready", "Ready", f"the head and {len(live) - 1} worker(s) run"):
                self.status["readyTime"] = iso(self.now)
        elif self.status.get("state") == "pending":
            queue = wl["status"]["admission"]["clusterQueue"]
            self.status["reason"] = f"admitted by ClusterQueue {queue}; starting its pods"

    def _expected(self, wl: Obj) -> list[tuple[str, Obj | None, int, Obj]]:
        """(pod name, worker group or None for the head, index, placement) of every pod placed."""
        by_set = {a["name"]: a for a in wl["status"]["admission"]["podSetAssignments"]}
        head = by_set[HEAD]["pods"][0]
        out: list[tuple[str, Obj | None, int, Obj]] = [(head_pod_name(self.name), None, 0, head)]
        for group in self.cluster["spec"].get("workerGroupSpecs") or []:
            for i, placement in enumerate((by_set.get(group["groupName"]) or {}).get("pods") or []):
                out.append((worker_pod_name(self.name, group["groupName"], i), group, i, placement))
        return out

    def _create(self, wl: Obj, expected: list, have: set[str], attempt: str) -> None:
        ports = _ports_of(wl)
        token = (wl["metadata"].get("annotations") or {}).get(AUTH_TOKEN_ANNOTATION, "")
        head_name, _, _, head_placement = expected[0]
        address = self.ctl.head_address(self.ns, self.name, head_name, head_placement["node"])
        env = cluster_env(self.name, address, ports, token)
        temp_dir = f"/tmp/muster-ray-{self.cluster['metadata']['uid'][:12]}" if self.ctl.local else ""
        for name, group, index, placement in expected:
            if name in have:
                continue
            params = (group or self.cluster["spec"]["headGroupSpec"]).get("rayStartParams") or {}
            template = (group or self.cluster["spec"]["headGroupSpec"])["template"]
            command = ray_start_command(
                self.ctl.ray,
                params,
                head=group is None,
                head_address=address,
                ports=ports,
                container=template["spec"]["containers"][0],
                temp_dir=temp_dir,
            )
            pod = ray_pod(self.cluster, group, index, placement, attempt, command, env)
            if self.ctx.create(pod) is None:
                log.info("pod %s/%s exists already; looking again next pass", self.ns, name)
        self.status["head"] = {"podName": head_name, "podIP": address}
        self.status["endpoints"] = {
            "gcs-server": f"{address}:{ports.gcs}",
            "dashboard": f"{address}:{ports.dashboard}",
        }
        self.status["headAddress"] = f"{address}:{ports.gcs}"
        self.status["dashboardURL"] = f"http://{address}:{ports.dashboard}"

    def _failed(self, wl: Obj) -> None:
        """A failed cluster runs nothing and holds no quota (its Workload is Finished); a new
        cluster of the same spec is a new apply after deleting this one."""
        self._clear(self._pods(), StopReasons.JOB_FINISHED)
        if workload_state(wl) is not WorkloadState.FINISHED:
            updated = copy.deepcopy(wl)
            event = finish_workload(
                updated, "Failed", f"the RayCluster failed: {self.status.get('reason')}", self.now
            )
            stored = self.ctx.update_status(updated)
            if stored is not None:
                self.ctx.event(stored, event)

    def _ended(self, pod: Obj) -> None:
        """A Ray node's process ended: restart the cluster, or fail it if it was never ready."""
        what = describe_failure(pod) if phase(pod) == "Failed" else f"pod {pod['metadata']['name']} exited"
        if not self.status.get("readyTime"):
            self._move("failed", "PodFailed", f"{what} before the cluster was ever ready")
            return
        self.status["restartCount"] = int(self.status.get("restartCount") or 0) + 1
        self._move("pending", "Restarting", f"{what}; restarting the cluster's pods")

    # -- helpers -------------------------------------------------------------------------------

    def _pods(self) -> list[Obj]:
        uid = self.cluster["metadata"]["uid"]
        pods = self.ctx.cache.pods_labelled(RAY_CLUSTER_LABEL, self.name, self.ns)
        return [
            p for p in pods if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    def _counts(self) -> None:
        spec = self.cluster["spec"]
        groups = spec.get("workerGroupSpecs") or []
        workers = [p for p in self._pods() if p["metadata"]["name"] != head_pod_name(self.name)]
        running = sum(1 for p in workers if phase(p) == "Running" and not stop_requested(p))
        self.status["desiredWorkerReplicas"] = sum(admitted_count(g) for g in groups)
        self.status["readyWorkerReplicas"] = running
        self.status["availableWorkerReplicas"] = running
        self.status["minWorkerReplicas"] = sum(int(g.get("minReplicas") or 0) for g in groups)
        self.status["maxWorkerReplicas"] = sum(int(g.get("maxReplicas") or admitted_count(g)) for g in groups)

    def _clear(self, pods: list[Obj], reason: str) -> bool:
        """Stop the unfinished ``pods`` and delete the finished ones; True while any remain."""
        return clear_pods(self.ctx, pods, reason, self.now)

    def _move(self, to: str, reason: str, message: str) -> bool:
        event = move_cluster(self.cluster, to, reason, message, self.now)
        if event is not None:
            self.events.append(event)
        return event is not None

    def _write(self) -> None:
        if self.status == (self.original.get("status") or {}):
            return
        stored = self.ctx.update_status(self.cluster)
        if stored is not None:
            for event in self.events:
                self.ctx.event(stored, event)
