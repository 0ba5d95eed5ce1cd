"""KubernetesRuntime: Muster as the batch scheduler of a real cluster.

Muster decides admission and placement itself; this runtime materialises each admitted gang
as Pods bound to the nodes the scheduler chose, and reports what becomes of them.

* Nodes and Pods are followed by two watches (:mod:`.informer`) on threads of their own; the
  contract's methods, called on the manager's single thread, only read what the watches
  gathered and hand writes to a small pool of writer threads (:mod:`.writer`). So no call
  of the manager blocks on the cluster beyond a quick lookup.
* A gang starts all or none (:meth:`KubernetesRuntime.start_gang`): its Pods are created
  unbound (``schedulerName: muster``, so no other scheduler takes them), its headless Service
  is made sure of, then each Pod is bound through the Binding subresource. If any step fails,
  or a member is stopped or its node lost meanwhile, every Pod of the gang is deleted and each
  member is reported Failed with reason GangStartFailed: no partial gang ever runs.
* Status comes from the Pod watch (:func:`.pods.observed_status`). A stop deletes the Pod with
  the grace period; the final status (with the stop's reason) is reported once the kubelet has
  ended it. A Node that turns NotReady or is deleted fails its pods with NodeLost and deletes
  them at once (their fate is unknown; the names are freed for the gang's next run).
* Pods Muster did not create count as used capacity on their nodes (``NodeInfo.used_by_others``).
* A Pod that ended stays, with its logs, until its Muster pod is deleted (:meth:`retain_only`).

* One server writes: with leader election (the default), every write first asks the Lease
  (:mod:`.leader`), and a standby writes nothing until it holds it (:meth:`leading`).

State is the cluster's: a new runtime lists the Muster Pods it finds (:meth:`readopt`) and
reports their status again; a gang found half-bound (the server died while starting it) is
deleted and reported GangStartFailed. A standby leaves that to the moment it leads (the
leader may be starting those gangs right now): the manager calls :meth:`readopt` then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from muster.api.quantity import Quantity
from muster.runtime.base import (
    DeviceBinding,
    GangLaunch,
    GangMember,
    LaunchError,
    NodeInfo,
    PodExists,
    PodLaunch,
    PodNotFound,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
    PodStillRunning,
    StopReason,
    SupportsGangStart,
    SupportsLeadership,
    SupportsLogs,
    SupportsNativePods,
    SupportsNodeWatch,
    SupportsReadoption,
    SupportsRetention,
)
from muster.runtime.kubernetes.api import api_message, read_json, status_of
from muster.runtime.kubernetes.config import GANG_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, KubernetesConfig
from muster.runtime.kubernetes.informer import Informer
from muster.runtime.kubernetes.leader import LeaderElector
from muster.runtime.kubernetes.logs import PodLogs
from muster.runtime.kubernetes.nodes import is_ready, node_info, pod_requests, sum_requests
from muster.runtime.kubernetes.pods import muster_uid, observed_status, pod_manifest, service_name
from muster.runtime.kubernetes.writer import ClusterWriter, Verdict, WriteError

__all__ = ["KubernetesRuntime"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
_FINAL_PHASES = ("Succeeded", "Failed")
_CLASS_TTL = 60.0  # how long a PriorityClass lookup is trusted


@dataclass
class _Pod:
    """One Muster pod this runtime keeps a record of."""

    ref: PodRef
    node: str
    gang: str
    grace: float
    k8s_uid: str = ""
    bound: bool = False
    pod: Obj | None = None  # the Pod as last seen
    gone: bool = False  # the Pod is deleted
    stop: StopReason | None = None
    stop_grace: float | None = None
    running_at_stop: frozenset[str] = frozenset()
    final: PodStatusChange | None = None
    reported: PodPhase = PodPhase.PENDING


class KubernetesRuntime(
    SupportsGangStart,
    SupportsLeadership,
    SupportsLogs,
    SupportsReadoption,
    SupportsNativePods,
    SupportsNodeWatch,
    SupportsRetention,
):
    """Runs Muster pods as Pods of a cluster. ``api`` is a ``kubernetes.client.ApiClient``
    (default: one from ``config``); ``fence`` says whether this server may write (default: it
    holds the leader Lease, campaigned for from construction when ``config.leader_election``,
    else always). Construction lists the cluster's Nodes and Pods and, without leader
    election, re-adopts Muster's."""

    name = "kubernetes"

    def __init__(
        self,
        config: KubernetesConfig | None = None,
        *,
        api: Any = None,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        from kubernetes import client

        from muster.runtime.kubernetes.config import api_client

        self.config = config or KubernetesConfig()
        self._own_api = api is None
        self.api = api if api is not None else api_client(self.config)
        self.core = client.CoreV1Api(self.api)
        self._scheduling = client.SchedulingV1Api(self.api)
        self._elector: LeaderElector | None = None
        if fence is None and self.config.leader_election:
            self._elector = LeaderElector(self.api, self.config)
            fence = self._elector.held
        self._fence: Callable[[], bool] = fence or (lambda: True)
        self._writer = ClusterWriter(self.core, self._fence)
        self._log_reader = PodLogs(self.api)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pods: dict[str, _Pod] = {}  # by Muster uid
        self._remains: dict[str, Obj] = {}  # by Muster uid: Muster Pods not tracked
        self._released: set[str] = set()
        self._changes: dict[str, PodStatusChange] = {}
        self._nodes: dict[str, Obj] = {}
        self._foreign: dict[tuple[str, str], tuple[str, dict[str, Quantity]]] = {}
        self._nodes_dirty = True
        self._classes: dict[str, tuple[bool, float]] = {}
        self._pool = ThreadPoolExecutor(self.config.workers, thread_name_prefix="muster-k8s-writer")
        self._informers = [
            Informer("nodes", self.core.list_node, self._on_node),
            Informer("pods", self.core.list_pod_for_all_namespaces, self._on_pod),
        ]
        try:
            for informer in self._informers:
                informer.start()
            if self._elector is not None:
                self._elector.start()
        except BaseException:
            self.close()
            raise
        if self._elector is None:
            self.readopt()

    # -- leadership ------------------------------------------------------------------------------

    def leading(self) -> bool:
        return self._fence()

    def wait_leading(self, timeout: float) -> bool:
        if self._elector is None:
            return self._fence()
        return self._elector.wait(timeout)

    # -- nodes ---------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        with self._lock:
            self._nodes_dirty = False
            used: dict[str, list[dict[str, Quantity]]] = {}
            for node, requests in self._foreign.values():
                used.setdefault(node, []).append(requests)
            return [
                node_info(obj, sum_requests(used.get(name, ()))) for name, obj in sorted(self._nodes.items())
            ]

    def nodes_changed(self) -> bool:
        return self._nodes_dirty

    # -- starting --------------------------------------------------------------------------------

    def pod_address(self, namespace: str, workload: str, pod: str) -> str:
        # hostname.subdomain, resolved through the gang's headless Service in the pod's namespace
        return f"{pod}.{workload}"

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        """A pod alone is a gang of one, bound to its ``spec.nodeName``."""
        node = str(pod.spec.get("nodeName") or "")
        if not node:
            raise LaunchError("spec.nodeName", "must be set: the scheduler binds a pod before it starts")
        workload = pod.labels.get(GANG_LABEL) or pod.ref.name
        gang = GangLaunch(pod.ref.namespace, workload, "", (GangMember(pod, devices, node),))
        return self.start_gang(gang)

    def start_gang(self, gang: GangLaunch) -> list[str]:
        manifests = [pod_manifest(m, gang.workload) for m in gang.members]  # LaunchError: nothing yet
        warnings = self._check_priority_classes(manifests)
        with self._lock:
            for m in gang.members:
                if m.pod.ref.uid in self._pods:
                    raise PodExists(f"pod {m.pod.ref} is already started (uid {m.pod.ref.uid})")
            records = [
                _Pod(m.pod.ref, m.node, gang.workload, m.pod.termination_grace_seconds) for m in gang.members
            ]
            for r in records:
                self._pods[r.ref.uid] = r
            lost = sorted({r.node for r in records if not self._node_ready(r.node)})
            if lost:
                self._fail_gang(records, f"node(s) {', '.join(lost)} are not Ready or do not exist")
                return warnings
        deadline = time.monotonic() + gang.timeout_seconds
        self._pool.submit(self._start_gang, gang, records, manifests, deadline)
        return warnings

    # -- stopping and status ---------------------------------------------------------------------

    def stop(self, pod: PodRef, grace_seconds: float | None, reason: StopReason) -> None:
        with self._lock:
            r = self._pods.get(pod.uid)
            if r is None:
                raise PodNotFound(f"pod {pod} is not known to the Kubernetes runtime")
            if r.final is not None:
                return
            grace = r.grace if grace_seconds is None else grace_seconds
            if r.stop is not None:
                if r.stop_grace is not None and grace >= r.stop_grace:
                    return
            else:
                r.stop = reason
                r.running_at_stop = frozenset(
                    c.name for c in self._current(r).containers if c.state != "terminated"
                )
            r.stop_grace = grace
            target = (r.ref.namespace, r.ref.name, r.k8s_uid) if r.k8s_uid else None
        # Not created yet: the gang's writer sees the stop before its next step and gives up.
        if target is not None:
            self._pool.submit(self._writer.delete_pod, *target, grace)

    def poll(self, timeout: float = 0.0) -> list[PodStatusChange]:
        with self._changed:
            if not self._changes and timeout > 0:
                self._changed.wait(timeout)
            out = list(self._changes.values())
            self._changes.clear()
        return out

    def pods(self) -> list[PodStatusChange]:
        with self._lock:
            return [self._current(r) for r in self._pods.values()]

    def release(self, pod: PodRef) -> None:
        with self._lock:
            r = self._pods.get(pod.uid)
            if r is None:
                return
            if r.final is None:
                raise PodStillRunning(f"pod {pod} has not ended; stop it first")
            del self._pods[pod.uid]
            self._released.add(pod.uid)
            if r.pod is not None and not r.gone:
                self._remains.setdefault(pod.uid, r.pod)

    def retain_only(self, existing: set[str]) -> None:
        with self._lock:
            # Forgotten once asked for: a deletion that fails leaves the Pod, whose next event
            # brings it back here for the next try.
            doomed = [self._remains.pop(uid) for uid in list(self._remains) if uid not in existing]
        for pod in doomed:
            meta = pod["metadata"]
            ended = (pod.get("status") or {}).get("phase") in _FINAL_PHASES
            grace = 0 if ended else float((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 30)
            self._pool.submit(self._writer.delete_pod, meta["namespace"], meta["name"], meta["uid"], grace)

    def readopt(self) -> list[PodRef]:
        """Track the Muster Pods found in the cluster that this runtime did not start or release."""
        with self._lock:
            found = [(uid, pod) for uid, pod in self._remains.items() if uid not in self._released]
            adopted: list[_Pod] = []
            for uid, pod in found:
                del self._remains[uid]
                meta, spec = pod["metadata"], pod.get("spec") or {}
                grace = spec.get("terminationGracePeriodSeconds")
                r = _Pod(
                    PodRef(meta["namespace"], meta["name"], uid),
                    spec.get("nodeName") or "",
                    (meta.get("labels") or {}).get(GANG_LABEL) or meta["name"],
                    30.0 if grace is None else float(grace),
                    k8s_uid=meta["uid"],
                    bound=bool(spec.get("nodeName")),
                    pod=pod,
                )
                self._pods[uid] = r
                adopted.append(r)
            broken = {(r.ref.namespace, r.gang) for r in adopted if not r.bound}
            doomed = [r for r in adopted if (r.ref.namespace, r.gang) in broken]
            for key in broken:
                members = [r for r in adopted if (r.ref.namespace, r.gang) == key]
                self._fail_gang(
                    members, "Muster restarted while starting the gang, before every pod was bound"
                )
            for r in adopted:
                if r not in doomed:
                    self._settle(r, force_report=True)
        for r in doomed:
            self._pool.submit(self._writer.delete_pod, r.ref.namespace, r.ref.name, r.k8s_uid, 0)
        return [r.ref for r in adopted]

    def logs(
        self,
        pod: PodRef,
        container: str | None = None,
        *,
        follow: bool = False,
        previous: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        return self._log_reader.logs(pod, container, follow=follow, previous=previous, cancel=cancel)

    def close(self) -> None:
        """Stop watching and writing; the Pods stay (the next runtime re-adopts them)."""
        for informer in self._informers:
            informer.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._elector is not None:
            self._elector.stop()  # after the last write: then a standby may take over
        if self._own_api:
            self.api.close()

    # -- the gang's writer (on a writer thread) -----------------------------------------------------

    def _start_gang(
        self, gang: GangLaunch, records: list[_Pod], manifests: list[Obj], deadline: float
    ) -> None:
        try:
            self._writer.ensure_namespace(gang.namespace)
            created: list[Obj] = []
            for r, manifest in zip(records, manifests, strict=True):
                self._check_gang(records, deadline)
                pod = self._writer.create_pod(manifest, deadline, self._leftover)
                with self._lock:
                    r.k8s_uid = pod["metadata"]["uid"]
                    r.pod = r.pod or pod
                created.append(pod)
            if service_name(gang.workload):
                self._writer.ensure_service(gang.namespace, gang.workload, created)
            for r, pod in zip(records, created, strict=True):
                self._check_gang(records, deadline)
                self._writer.bind(pod, r.node)
                with self._lock:
                    r.bound = True
        except WriteError as exc:
            self._abort(records, str(exc))
        except Exception as exc:  # a bug must not leave a half-started gang behind
            log.exception("starting gang %s/%s failed", gang.namespace, gang.workload)
            self._abort(records, f"{type(exc).__name__}: {exc}")

    def _check_gang(self, records: list[_Pod], deadline: float) -> None:
        with self._lock:
            for r in records:
                if r.stop is not None:
                    raise WriteError(f"pod {r.ref.name} was stopped ({r.stop.value}) before the gang started")
                if r.final is not None:
                    raise WriteError(f"pod {r.ref.name} ended before the gang started: {r.final.message}")
        if time.monotonic() >= deadline:
            raise WriteError("the gang could not be started within its timeout")

    def _abort(self, records: list[_Pod], message: str) -> None:
        """Delete every Pod of the gang that exists, then fail the members not yet final."""
        with self._lock:
            made = [(r.ref.namespace, r.ref.name, r.k8s_uid) for r in records if r.k8s_uid]
        for target in made:
            self._writer.delete_pod(*target, 0)
        with self._lock:
            self._fail_gang(records, message)

    def _leftover(self, existing: Obj) -> Verdict:
        uid = muster_uid(existing)
        if (
            uid is None
            or (existing["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE
        ):
            return "refuse"
        with self._lock:
            r = self._pods.get(uid)
            if r is not None and r.final is None:
                return "wait"  # an earlier incarnation still stopping
        return "replace"

    # -- watch handlers (on the informers' threads) ------------------------------------------------

    def _on_node(self, kind: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            if kind == "DELETED":
                self._nodes.pop(name, None)
                why = f"node {name} was deleted"
            else:
                self._nodes[name] = node
                why = f"node {name} is not Ready"
            self._nodes_dirty = True
            if kind != "DELETED" and is_ready(node):
                return
            lost = [r for r in self._pods.values() if r.node == name and r.final is None]
            for r in lost:
                self._lose(r, why)
            targets = [(r.ref.namespace, r.ref.name, r.k8s_uid) for r in lost if r.k8s_uid]
        # Their fate is unknown and nothing on that node will confirm it: free the names now.
        for target in targets:
            self._pool.submit(self._writer.delete_pod, *target, 0)

    def _on_pod(self, kind: str, pod: Obj) -> None:
        meta = pod["metadata"]
        ours = (meta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
        uid = muster_uid(pod) if ours else None
        with self._lock:
            if uid is None:
                self._account(kind, pod)
                return
            r = self._pods.get(uid)
            if r is None:
                if kind == "DELETED":
                    self._remains.pop(uid, None)
                else:
                    self._remains[uid] = pod
                return
            if r.k8s_uid and meta["uid"] != r.k8s_uid:
                return  # another incarnation of the name; not this record's
            r.k8s_uid = meta["uid"]
            r.pod = pod
            r.bound = r.bound or bool((pod.get("spec") or {}).get("nodeName"))
            r.gone = kind == "DELETED"
            self._settle(r, deleted=r.gone)

    def _account(self, kind: str, pod: Obj) -> None:
        """Pods Muster did not create: what they hold on their node."""
        meta = pod["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if kind == "DELETED" or not node or phase in _FINAL_PHASES:
            if self._foreign.pop(key, None) is not None:
                self._nodes_dirty = True
            return
        entry = (node, pod_requests(pod))
        if self._foreign.get(key) != entry:
            self._foreign[key] = entry
            self._nodes_dirty = True

    # -- status (under the lock) -------------------------------------------------------------------

    def _settle(self, r: _Pod, *, deleted: bool = False, force_report: bool = False) -> None:
        """Derive the pod's status from what was seen; queue it when its phase is news."""
        if r.final is None:
            if deleted:
                r.final = self._vanished(r)
            elif r.pod is not None and (r.pod.get("status") or {}).get("phase") in _FINAL_PHASES:
                r.final = self._stopped(r, observed_status(r.ref, r.pod))
        status = self._current(r)
        if force_report or (status.phase != r.reported and status.phase is not PodPhase.PENDING):
            r.reported = status.phase
            self._changes[r.ref.uid] = status
            self._changed.notify_all()

    def _current(self, r: _Pod) -> PodStatusChange:
        if r.final is not None:
            return r.final
        if r.pod is None:
            return PodStatusChange(r.ref, PodPhase.PENDING)
        return observed_status(r.ref, r.pod)

    def _stopped(self, r: _Pod, status: PodStatusChange) -> PodStatusChange:
        """A final status; after a stop, the stop's reason on what was still running."""
        if r.stop is None:
            return status
        reason = PodReason(r.stop.value)
        containers = tuple(
            replace(c, reason=reason) if c.name in r.running_at_stop else c for c in status.containers
        )
        return replace(
            status,
            phase=PodPhase.FAILED,
            reason=reason,
            message=f"stopped ({reason.value})",
            containers=containers,
        )

    def _vanished(self, r: _Pod) -> PodStatusChange:
        """The Pod was deleted before it was seen to end."""
        last = (
            observed_status(r.ref, r.pod) if r.pod is not None else PodStatusChange(r.ref, PodPhase.PENDING)
        )
        base = replace(last, phase=PodPhase.FAILED)
        if r.stop is not None:
            return self._stopped(r, base)
        if not self._node_ready(r.node):
            return replace(base, reason=PodReason.NODE_LOST, message=f"node {r.node} is gone or not Ready")
        return replace(
            base,
            reason=PodReason.EVICTED,
            message="the Pod was deleted from the cluster by something other than Muster "
            "(kubectl delete, a node drain, an eviction)",
        )

    def _lose(self, r: _Pod, why: str) -> None:
        last = self._current(r)
        if r.stop is not None:
            r.final = self._stopped(r, replace(last, phase=PodPhase.FAILED))
        else:
            r.final = replace(last, phase=PodPhase.FAILED, reason=PodReason.NODE_LOST, message=why)
        self._settle(r)

    def _fail_gang(self, records: list[_Pod], message: str) -> None:
        for r in records:
            if r.final is not None:
                continue
            failed = PodStatusChange(r.ref, PodPhase.FAILED)
            if r.stop is not None:
                r.final = self._stopped(r, failed)
            else:
                r.final = replace(failed, reason=PodReason.GANG_START_FAILED, message=message)
            self._settle(r)

    def _node_ready(self, name: str) -> bool:
        node = self._nodes.get(name)
        return node is not None and is_ready(node)

    # -- priority classes ------------------------------------------------------------------------

    def _check_priority_classes(self, manifests: list[Obj]) -> list[str]:
        """Drop a priorityClassName the cluster does not know (the API would refuse the Pod)."""
        warnings = []
        for manifest in manifests:
            name = manifest["spec"].get("priorityClassName")
            if name and not self._class_exists(name):
                del manifest["spec"]["priorityClassName"]
                warnings.append(
                    f"priorityClassName {name!r}: the cluster has no PriorityClass of that name, so pod "
                    f"{manifest['metadata']['name']} runs without one (create it in the cluster too)"
                )
        return warnings

    def _class_exists(self, name: str) -> bool:
        known = self._classes.get(name)
        if known is not None and time.monotonic() - known[1] < _CLASS_TTL:
            return known[0]
        try:
            read_json(self._scheduling.read_priority_class(name, _preload_content=False))
            exists = True
        except Exception as exc:
            if status_of(exc) != 404:
                log.warning("cannot look up PriorityClass %s (%s): passing it on", name, api_message(exc))
                return True
            exists = False
        self._classes[name] = (exists, time.monotonic())
        return exists
