"""The Ray runtime: Muster's pods as Ray actors on a Ray cluster, gangs as placement groups.

Muster keeps deciding (quotas, priorities, gangs, placement); Ray runs the processes:

* nodes come from Ray's node table (:mod:`muster.runtime.ray.nodes`);
* an admitted Workload's pods start as one gang (:class:`SupportsGangStart`): one placement
  group whose bundles are pinned to the Ray nodes of the Muster nodes the scheduler chose
  (:mod:`muster.runtime.ray.gangs`). Nothing starts until Ray reserved the whole group; a
  group not reserved within the gang's timeout is removed and every member fails
  ``GangStartFailed`` (the executor then requeues the Workload);
* each pod is a :class:`muster.runtime.ray.actor.PodActor` in its bundle that runs the
  containers through the local runtime's shim, with the same environment contract
  (``CUDA_VISIBLE_DEVICES`` = the GPU indices Muster bound; ``MASTER_ADDR`` = the master's
  node IP, from the pod's env); its output streams back to the driver's log files;
* a stop writes the stop record and SIGTERMs the shims, which SIGKILL after the grace;
* an actor that dies (its node died, it was killed) fails its pod ``NodeLost``, or with the
  stop's reason when one was asked.

Every method runs on the manager's thread and returns at once: the runtime never blocks on
Ray but in :meth:`poll`, where it waits (up to ``timeout``) on every ObjectRef it has out
(placement groups becoming ready, actors starting, actors' long polls) at once.

Pods live as long as this driver: Ray ends a driver's actors and placement groups with it, so
a restarted ``muster up`` finds the pods it ran gone and fails them ``NodeLost``; their jobs
restart per their restart policy (docs/ray.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import ray.exceptions
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from muster.runtime.base import (
    DeviceBinding,
    GangLaunch,
    GangMember,
    LaunchError,
    NodeInfo,
    PodExists,
    PodLaunch,
    PodNotFound,
    PodReason,
    PodRef,
    PodStatusChange,
    PodStillRunning,
    StopReason,
    SupportsCleanup,
    SupportsGangStart,
)
from muster.runtime.local import logs as logfiles
from muster.runtime.local.launch import plan_launch
from muster.runtime.ray.actor import PodActor
from muster.runtime.ray.gangs import (
    Gang,
    bundle,
    create_group,
    deadline_for,
    describe,
    gang_key,
    remove_group,
)
from muster.runtime.ray.nodes import NodeTable, node_info
from muster.runtime.ray.pods import RayContainer, RayPod

__all__ = ["DEFAULT_GANG_TIMEOUT", "RayRuntime", "connect"]

log = logging.getLogger(__name__)

DEFAULT_GANG_TIMEOUT = 60.0  # for a pod started alone (start())
NAMESPACE = "muster"  # the Ray namespace of Muster's actors and placement groups
_WAIT_CALL = 2.0  # how long one actor long poll may wait on the node
_RSS_INTERVAL = 0.2


def connect(address: str) -> bool:
    """Join the Ray cluster at ``address`` (``auto``: the one this machine belongs to, as
    ``ray start`` left it), unless this process already did; True when this call connected."""
    if ray.is_initialized():
        return False
    ray.init(
        address=address,
        namespace=NAMESPACE,
        log_to_driver=False,
        logging_level=logging.WARNING,
        configure_logging=False,
    )
    return True


class RayRuntime(SupportsGangStart, SupportsCleanup, logfiles.LogFiles):
    """Pods on the Ray cluster this process is connected to (see the module docstring). Logs
    are the driver's copies (:class:`LogFiles`); a followed log ends with its pod."""

    name = "ray"

    def __init__(self, home: Path, *, address: str | None = None, node_refresh: float = 1.0) -> None:
        # Pods' volumes and working directories live under MUSTER_HOME, as their checkpoints
        # and workflow artifacts do: on a cluster of several machines it must be a shared
        # file system mounted at the same path on every Ray node (docs/ray.md).
        super().__init__(home)
        self._connected = connect(address) if address is not None else False
        if not ray.is_initialized():
            raise RuntimeError("RayRuntime needs a Ray connection: pass address= or call ray.init first")
        self.table = NodeTable(ray.nodes, interval=node_refresh)
        self._actor = ray.remote(PodActor)
        self._pods: dict[str, RayPod] = {}  # uid -> pod
        self._gangs: dict[str, Gang] = {}  # gang key -> gang
        self._side: list[Any] = []  # stop() and shutdown() refs, collected so errors are consumed
        self._retiring: list[Gang] = []  # released gangs whose group goes once the shutdowns are done
        self._live: set[tuple[str, str]] = set()  # (namespace, name) whose logs may still grow
        self._live_lock = threading.Lock()
        self._closed = False

    # -- nodes -----------------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        self.table.refresh(force=True)
        return [node_info(n) for n in self.table.nodes()]

    # -- starting ----------------------------------------------------------------------------------

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        """A pod no Workload owns: a gang of one."""
        gang = GangLaunch(
            namespace=pod.ref.namespace,
            workload=pod.ref.name,
            uid=pod.ref.uid,
            members=(GangMember(pod, devices, pod.node),),
            timeout_seconds=DEFAULT_GANG_TIMEOUT,
        )
        return self.start_gang(gang)

    def start_gang(self, gang: GangLaunch) -> list[str]:
        if not gang.members:
            raise LaunchError("gang.members", "must list at least one pod")
        for m in gang.members:
            self._check_new(m.pod.ref)
        if any(m.node not in self.table.by_name for m in gang.members):
            self.table.refresh(force=True)
        warnings: list[str] = []
        pods, bundles, failed = [], [], None
        key = gang_key(gang)
        for i, m in enumerate(gang.members):
            node = self.table.by_name.get(m.node)
            plan = plan_launch(
                m.pod,
                m.devices,
                home=self.home,
                gpus=node_info(node).gpus if node is not None else (),
                visible_devices=lambda indices: ",".join(str(g) for g in indices),
                base_env={},
                runtime="ray",
            )
            warnings.extend(plan.warnings)
            bundles.append(bundle(m.pod, m.devices))
            if node is None:
                failed = failed or f"node {m.node} of pod {m.pod.ref.name} is not in the Ray cluster"
            elif not node.alive:
                failed = (
                    failed or f"node {m.node} of pod {m.pod.ref.name} is dead: {node.death or 'Ray says so'}"
                )
            pods.append(self._record(m, plan, key, i, node.id if node is not None else ""))
        state = Gang(gang, bundles, [p.node_id for p in pods], deadline_for(gang), failed=failed)
        state.members = [p.launch.ref.uid for p in pods]
        for p, m in zip(pods, gang.members, strict=True):
            for c in p.containers:
                logfiles.begin_log(c.log, m.pod.log_owner())  # the previous output is kept as .log.1
            self._pods[p.launch.ref.uid] = p
            with self._live_lock:
                self._live.add((p.launch.ref.namespace, p.launch.ref.name))
        self._gangs[key] = state
        if failed is None:
            try:
                create_group(state)
            except Exception as exc:  # Ray refused the group (the GCS said no): the gang fails whole
                state.failed = f"Ray refused the placement group: {_cause(exc)}"
        return warnings

    def _check_new(self, ref: PodRef) -> None:
        if ref.uid in self._pods:
            raise PodExists(f"pod {ref} (uid {ref.uid}) is already started on Ray")
        for other in self._pods.values():
            same = (other.launch.ref.namespace, other.launch.ref.name) == (ref.namespace, ref.name)
            if same and not other.final:
                raise PodExists(f"pod {ref} still runs on Ray as uid {other.launch.ref.uid}; stop it first")

    # -- stopping ----------------------------------------------------------------------------------

    def stop(self, pod: PodRef, grace_seconds: float | None, reason: StopReason) -> None:
        record = self._get(pod)
        if record.final:
            return
        grace = max(
            0.0, float(record.launch.termination_grace_seconds if grace_seconds is None else grace_seconds)
        )
        first = record.stop or {"reason": StopReason(reason).value, "requested_at": time.time()}
        if record.stop is not None and float(record.stop.get("grace_seconds", grace)) < grace:
            grace = float(record.stop["grace_seconds"])  # a later stop may only shorten the grace
        record.stop = {**first, "grace_seconds": grace}
        if record.actor is None:
            # Its gang is not placed yet: it never starts.
            record.end_all("stopped before it started")
            self._drop_unplaced(self._gangs[record.gang])
            return
        self._side.append(record.actor.stop.remote(record.stop))

    # -- what happened -----------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> list[PodStatusChange]:
        self._check_open()
        self._watch_nodes()
        self._expire()
        changes = self._changes()
        refs = self._refs()
        wait = 0.0 if changes else self._wait_time(timeout)
        if refs:
            ready, _ = ray.wait(list(refs), num_returns=1, timeout=wait)
            if ready:
                ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
            for ref in ready:
                refs[ref](ref)
        elif wait > 0:
            time.sleep(wait)
        self._collect_side()
        self._expire()
        return changes + self._changes()

    def pods(self) -> list[PodStatusChange]:
        return [p.status() for p in self._pods.values()]

    def cleaning_up(self) -> bool:
        # Released gangs whose group waits for their actors' shutdown, and calls not collected.
        return bool(self._retiring or self._side)

    def release(self, pod: PodRef) -> None:
        record = self._pods.get(pod.uid)
        if record is None:
            return
        if not record.final:
            raise PodStillRunning(f"pod {pod} is {record.phase.value}; stop it first")
        del self._pods[pod.uid]
        gang = self._gangs.get(record.gang)
        if record.actor is not None:
            ref = record.actor.shutdown.remote()
            self._side.append(ref)
            if gang is not None:
                gang.shutdowns.append(ref)
        self._retire(record.gang)

    def close(self) -> None:
        """Forget every pod. Ray ends this driver's actors and placement groups when it
        disconnects: disconnecting is left to the process (or done here when this runtime
        connected)."""
        if self._closed:
            return
        self._closed = True
        for gang in [*self._gangs.values(), *self._retiring]:
            remove_group(gang)
        self._gangs.clear()
        self._retiring.clear()
        self._pods.clear()
        if self._connected:
            ray.shutdown()

    # -- logs --------------------------------------------------------------------------------------

    def _writer(self, pod: PodRef, container: str) -> Callable[[], bool] | None:
        def writing() -> bool:
            with self._live_lock:
                return (pod.namespace, pod.name) in self._live

        return writing if writing() else None

    # -- internals: records ------------------------------------------------------------------------

    def _record(self, m: GangMember, plan: Any, gang: str, index: int, node_id: str) -> RayPod:
        ref = m.pod.ref
        containers = [
            RayContainer(
                c.name, logfiles.container_log(self.home, ref.namespace, ref.name, c.name), c.memory_limit
            )
            for c in plan.containers
        ]
        return RayPod(m.pod, m.devices, m.node, node_id, plan, gang, index, containers)

    def _get(self, pod: PodRef) -> RayPod:
        record = self._pods.get(pod.uid)
        if record is None:
            raise PodNotFound(f"pod {pod} (uid {pod.uid}) is not known to the Ray runtime")
        return record

    def _changes(self) -> list[PodStatusChange]:
        out = []
        for p in self._pods.values():
            change = p.take_change()
            if change is not None:
                out.append(change)
                if change.final:
                    with self._live_lock:
                        self._live.discard((p.launch.ref.namespace, p.launch.ref.name))
        return out

    # -- internals: gangs --------------------------------------------------------------------------

    def _refs(self) -> dict[Any, Callable[[Any], None]]:
        """Every ObjectRef out, with what to do once it is ready."""
        refs: dict[Any, Callable[[Any], None]] = {}
        for gang in self._gangs.values():
            if gang.ready_ref is not None and not gang.placed:
                refs[gang.ready_ref] = lambda _ref, g=gang: self._placed(g)
        for p in self._pods.values():
            if p.call is not None:
                refs[p.call] = lambda ref, pod=p: self._answered(pod, ref)
        return refs

    def _placed(self, gang: Gang) -> None:
        """The whole group is reserved: start an actor in each member's bundle."""
        gang.placed = True
        gang.ready_ref = None
        for uid in gang.members:
            p = self._pods.get(uid)
            if p is None or p.final or p.stop is not None:
                continue
            self._launch(gang, p)

    def _launch(self, gang: Gang, p: RayPod) -> None:
        b = gang.bundles[p.bundle]
        ref = p.launch.ref
        options: dict[str, Any] = {
            "num_cpus": b.get("CPU", 0),
            "num_gpus": b.get("GPU", 0),
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=gang.group, placement_group_bundle_index=p.bundle
            ),
            "max_concurrency": 4,  # a stop is served while a long poll waits
            "max_restarts": 0,
            "name": f"pod/{ref.namespace}/{ref.name}/{ref.uid}",
            "namespace": NAMESPACE,
        }
        if "memory" in b:
            options["memory"] = b["memory"]
        pod_dir = f"pods/{ref.namespace}/{ref.name}/{ref.uid}"
        p.actor = self._actor.options(**options).remote(
            pod_dir, str(self.home), ref.uid, [c.name for c in p.containers]
        )
        memory = {"mode": "rss", "interval": _RSS_INTERVAL}
        p.call = p.actor.start.remote(p.plan, p.launch.termination_grace_seconds, memory)

    def _answered(self, p: RayPod, ref: Any) -> None:
        """A start() or wait() of ``p``'s actor came back (or its actor died)."""
        p.call = None
        try:
            answer = ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            answer = None  # a hiccup reaching the actor: ask again
        except ray.exceptions.RayActorError as exc:
            p.end_all(self._lost_message(p, exc))
            return
        except ray.exceptions.RayTaskError as exc:
            p.end_all(f"cannot start: {_cause(exc)}", PodReason.ERROR)
            return
        if answer is not None and "node_id" in answer:
            p.where = answer
            if answer["node_id"] != p.node_id:
                log.error("pod %s ran on Ray node %s, not %s", p.launch.ref, answer["node_id"], p.node_id)
                p.end_all(
                    f"Ray ran it on node {answer['node_id'][:8]}, not on {p.node} ({p.node_id[:8]}) "
                    "where Muster placed it",
                    PodReason.ERROR,
                )
                self._side.append(p.actor.stop.remote({"reason": "Stopped", "grace_seconds": 0.0}))
                return
        elif answer is not None:
            p.take(answer)
        if not p.final:
            p.call = p.actor.wait.remote(p.offsets(), p.known(), _WAIT_CALL)

    def _lost_message(self, p: RayPod, exc: Exception) -> str:
        self.table.refresh(force=True)
        node = self.table.by_id.get(p.node_id)
        if node is None or not node.alive:
            why = f": {node.death}" if node is not None and node.death else ""
            return f"Ray node {p.node_id[:8]} ({p.node}) died{why}; the pod's processes are lost with it"
        return f"its Ray actor died: {_cause(exc)}"

    def _expire(self) -> None:
        """Gangs not reserved in time, or pinned to a node that is dead, fail whole."""
        now = time.monotonic()
        for gang in list(self._gangs.values()):
            if gang.placed:
                continue
            if gang.failed is None and now >= gang.deadline:
                gang.failed = describe(
                    gang, {n.id: n.name for n in self.table.nodes()}, gang.launch.timeout_seconds
                )
            if gang.failed is not None:
                remove_group(gang)
                gang.placed = True  # nothing more to wait for
                for uid in gang.members:
                    p = self._pods.get(uid)
                    if p is not None and not p.final:
                        p.end_all(gang.failed, PodReason.GANG_START_FAILED)

    def _watch_nodes(self) -> None:
        """Pending gangs pinned to a node Ray reports dead fail at once; pods on a dead node
        whose actor has not said so yet are lost."""
        if not self._gangs or not self.table.refresh():
            return
        for gang in self._gangs.values():
            if gang.placed or gang.failed is not None:
                continue
            for node_id in gang.node_ids:
                node = self.table.by_id.get(node_id)
                if node is None or not node.alive:
                    name = node.name if node is not None else node_id[:8]
                    gang.failed = f"node {name} died before the gang was placed" + (
                        f": {node.death}" if node is not None and node.death else ""
                    )
                    break

    def _wait_time(self, timeout: float) -> float:
        wait = timeout
        now = time.monotonic()
        for gang in self._gangs.values():
            if not gang.placed:
                wait = min(wait, max(0.0, gang.deadline - now))
        if self._gangs:
            wait = min(wait, self.table.interval)
        return max(0.0, wait)

    def _drop_unplaced(self, gang: Gang) -> None:
        """A gang none of whose members will start any more gives its reservation back."""
        if all(self._pods.get(uid) is None or self._pods[uid].final for uid in gang.members):
            remove_group(gang)
            gang.placed = True

    def _retire(self, key: str) -> None:
        """Once every member is released, the gang's reservation goes."""
        gang = self._gangs.get(key)
        if gang is not None and all(uid not in self._pods for uid in gang.members):
            # Removing the group kills the actors in it: their shutdown (clean-up) first.
            self._gangs.pop(key)
            self._retiring.append(gang)

    def _collect_side(self) -> None:
        if self._side:
            done, self._side = ray.wait(self._side, num_returns=len(self._side), timeout=0)
            for ref in done:
                try:
                    ray.get(ref)
                except Exception:  # an actor that exited (shutdown) or died: nothing to do
                    pass
        pending = set(self._side)
        for gang in list(self._retiring):
            if not any(ref in pending for ref in gang.shutdowns):
                remove_group(gang)
                self._retiring.remove(gang)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this RayRuntime is closed")


def _cause(exc: BaseException) -> str:
    """The first line that says what went wrong, without Ray's traceback."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}".splitlines()[0][:500]
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:500]
