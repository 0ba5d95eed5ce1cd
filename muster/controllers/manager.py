"""The manager: everything ``muster up`` runs besides the API server.

One thread drives, in order, on every pass:

1. the pod executor with what the runtime reported (pod statuses first: they decide the rest);
2. the node controller (registration, heartbeats, the default queue's quota);
3. garbage collection (after deletions, and on every resync);
4. the Workflow controller, for the workflows whose objects changed (it creates Workloads
   and TrainingJobs for their tasks), then the Experiment controller, for the experiments
   whose trials, jobs or pods changed or whose metrics are due a look (it creates Trials
   and their TrainingJobs);
5. the TrainingJob controller, for the jobs whose objects changed, and the InferenceService
   controller, for the services whose objects changed (or whose gateway asked for a look);
   then the RayCluster and RayJob controllers (:mod:`muster.controllers.ray`);
6. the Workload controller (the eviction handshake), then the Namespace controller (a new
   namespace's default LocalQueue);
7. the scheduler loop, when something it reads changed and a Workload waits (or an elastic
   one may grow); the jobs and workflows it admitted or resized are reconciled at once, so
   their pods are created in the same pass;
   then the ResourceQuotas' usage;
8. capacity (:mod:`muster.controllers.capacity`): spot notices, NodeClaims, the autoscaler
   (it reads the verdicts the scheduler just wrote), the cost ledger;
9. the pod executor again, which starts the new pods and stops the ones asked to stop.

Passes are triggered by store changes (the cache's watch), by the runtime's reports, by
timers (deadlines, TTLs, backoff) and by a periodic full resync that looks at everything, so
a change that was missed, or a crash between two writes, is repaired by the next pass. Time
comes from an injected clock. Stopping the manager stops the loop and detaches from the
runtime without stopping any pod: the next manager re-adopts them.

On a runtime shared by several servers (:class:`SupportsLeadership`: a cluster's leader
Lease) the loop runs only while this server leads. A standby does not even open (no Node is
written, no cache loaded); when it comes to lead it re-adopts the runtime's pods and starts
its executor afresh from them, then passes with a full resync.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.api.labels import (
    EXPERIMENT_LABEL,
    JOB_NAME_LABEL,
    RAY_CLUSTER_LABEL,
    RAY_JOB_LABEL,
    SERVING_SERVICE_LABEL,
    WORKFLOW_LABEL,
    WORKLOAD_LABEL,
)
from muster.api.lifecycle import JobPhase, WorkloadState, is_final, job_phase, workload_state
from muster.config import settings
from muster.controllers.cache import Cache, Key, key_of
from muster.controllers.capacity.controller import CapacityController
from muster.controllers.context import Context
from muster.controllers.experiment import ExperimentController
from muster.controllers.insight.metrics import ClusterState
from muster.controllers.namespaces.controller import NamespaceController, QuotaController
from muster.controllers.nodes.gpumonitor import DEFAULT_HISTORY_SECONDS, DEFAULT_SAMPLE_SECONDS, GpuMonitor
from muster.controllers.nodes.health import HealthController
from muster.controllers.nodes.registration import NodeController
from muster.controllers.pods.executor import PodExecutor
from muster.controllers.pods.gc import collect_garbage
from muster.controllers.ray.cluster import RayClusterController
from muster.controllers.ray.job import RayJobController
from muster.controllers.ray.pods import local_ray
from muster.controllers.retention.events import EventRetention, RetentionPolicy
from muster.controllers.retention.pods import collect_finished_pods
from muster.controllers.scheduling.elastic import below_full_size
from muster.controllers.scheduling.loop import SchedulerLoop
from muster.controllers.scheduling.workloads import WorkloadController
from muster.controllers.serving.controller import ServingController
from muster.controllers.trainingjob.controller import TrainingJobController
from muster.controllers.workflow.controller import WorkflowController
from muster.runtime.base import (
    GpuDevice,
    GpuFault,
    PodReason,
    PodRuntimeError,
    PodStatusChange,
    Runtime,
    SupportsCleanup,
    SupportsFaultInjection,
    SupportsGangStart,
    SupportsLeadership,
    SupportsLogs,
    SupportsNativePods,
    SupportsReadoption,
    SupportsWakeup,
)
from muster.runtime.kubernetes.config import KubernetesConfig
from muster.scheduler import Policy
from muster.store.base import Store

__all__ = ["RUNTIMES", "Manager", "ManagerConfig"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
RUNTIMES = ("local", "kubernetes", "ray")
# Kinds whose changes can change a scheduling decision (Pods only when they end or go).
_SCHEDULER_KINDS = frozenset(
    {
        "Namespace",
        "ResourceQuota",
        "Workload",
        "Node",
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "ResourceFlavor",
        "PriorityClass",
        "Topology",
    }
)
_JOB_DONE = (JobPhase.SUCCEEDED, JobPhase.FAILED)
_BUSY_POLL = 0.05  # how long the loop waits on the runtime while pods run
_IDLE_WAIT = 1.0
# A full resync (every object looked at again: the safety net) may take at most this share of
# the loop's time: on a store of 100,000 finished jobs one takes seconds, and running it every
# resync_seconds regardless would keep an idle server busy.
_RESYNC_SHARE = 0.05
# Settled objects a list found (finished jobs and Workloads) looked at per pass after it: at
# about 70 us each, a pass takes ~70 ms more while a restart over 100,000 of them catches up.
_BACKLOG_SLICE = 1000
_elapsed = time.monotonic  # what a pass's duration is measured with (tests replace it)


@dataclass
class ManagerConfig:
    """How ``muster up`` runs the control plane (its ``--runtime``, ``--fake-gpus`` and
    ``--placement`` options, and the loop's timings)."""

    runtime: str = "local"
    fake_gpus: str | None = None
    # the cluster and the Lease of ``runtime="kubernetes"`` (default: kubectl's rules)
    kubernetes: KubernetesConfig | None = None
    # the Ray cluster to join (--ray-address ADDR|auto) for runtime "ray"
    ray_address: str | None = None
    placement: str = "binpack"
    home: Path | None = None
    resync_seconds: float = 10.0
    heartbeat_seconds: float = 10.0
    pending_message_seconds: float = 10.0
    # how long a runtime that starts gangs as one unit (Ray, Kubernetes) may take to place one
    gang_timeout_seconds: float = 60.0
    node_grace_seconds: float = 40.0
    # the ClusterQueue of a new Namespace's default LocalQueue ("" for none): MUSTER_NAMESPACE_DEFAULT_QUEUE
    namespace_default_queue: str = field(default_factory=lambda: settings().namespace_default_queue)
    # the Python local pods run as `python` (muster up --python, MUSTER_PYTHON); None: the
    # server's own virtual environment when it runs in one
    python: Path | None = field(default_factory=lambda: settings().python)
    gpu_sample_seconds: float = DEFAULT_SAMPLE_SECONDS
    gpu_history_seconds: float = DEFAULT_HISTORY_SECONDS
    # retention (settings: MUSTER_EVENT_TTL_SECONDS, MUSTER_EVENTS_PER_OBJECT, MUSTER_FINISHED_POD_LIMIT)
    event_ttl_seconds: float = 3600.0
    events_per_object: int = 100
    finished_pod_limit: int = 12500
    # Exempt the cache's objects from the cycle collector once listed (gc.freeze: `muster up`
    # sets it; a test process that opens many managers leaves it off).
    freeze_gc: bool = False
    # MUSTER_CACHE_MUTATION_DETECTOR: the cache reports objects edited in place (tests set it)
    check_cache_mutations: bool = field(default_factory=lambda: settings().cache_mutation_detector)
    clock: Callable[[], float] = field(default=time.time)

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime {self.runtime!r} is unknown; use one of {', '.join(RUNTIMES)}")
        if (self.runtime == "ray") != (self.ray_address is not None):
            raise ValueError(
                "the ray runtime needs a Ray address (--ray-address ADDR|auto), and only it takes one"
            )
        if self.runtime == "ray" and self.fake_gpus:
            raise ValueError(
                "--fake-gpus is for the local runtime: declare GPUs on the Ray nodes (ray start --num-gpus N)"
            )
        Policy(placement=self.placement)  # raises naming the known policies


class Manager:
    """The controllers, the scheduler loop and the runtime, on one thread."""

    def __init__(
        self, store: Store, config: ManagerConfig | None = None, runtime: Runtime | None = None
    ) -> None:
        self.config = config or ManagerConfig()
        home = self.config.home or settings().home
        self.ctx = Context(
            store=store,
            # Finished Workloads pile up on a long-running server; the scheduler loop and the
            # eviction handshake only look at the others.
            cache=Cache(
                store,
                live={
                    "Workload": _workload_in_play,
                    "TrainingJob": _job_in_play,
                    "Pod": lambda pod: not is_final(pod),
                },
                freeze=self.config.freeze_gc,
                check_mutations=self.config.check_cache_mutations,
            ),
            home=Path(home),
            clock=self.config.clock,
        )
        self._own_runtime = runtime is None
        self.runtime: Runtime = runtime if runtime is not None else self._open_runtime(Path(home))
        if isinstance(self.runtime, SupportsWakeup):
            self.ctx.cache.on_change = self.runtime.wake
        self.executor = PodExecutor(self.ctx, self.runtime, gang_timeout=self.config.gang_timeout_seconds)
        self.nodes = NodeController(self.ctx, self.runtime, self.config.heartbeat_seconds)
        self.health = HealthController(
            self.ctx,
            offered=lambda: self.executor.node_addresses,
            grace_seconds=self.config.node_grace_seconds,
        )
        self.jobs = TrainingJobController(
            self.ctx,
            master_address=self._master_address,
            staged_start=not isinstance(self.runtime, SupportsGangStart),
        )
        self.workflows = WorkflowController(self.ctx)
        self.experiments = ExperimentController(
            self.ctx, logs=self.runtime if isinstance(self.runtime, SupportsLogs) else None
        )
        native = isinstance(self.runtime, SupportsNativePods)
        self.serving = ServingController(self.ctx, native_pods=native)
        ray = "ray" if native else local_ray()
        self.ray_clusters = RayClusterController(
            self.ctx, head_address=self._master_address, ray=ray, local=not native
        )
        self.ray_jobs = RayJobController(self.ctx, ray=ray, local=not native)
        self.workloads = WorkloadController(self.ctx)
        self.namespaces = NamespaceController(self.ctx, self.config.namespace_default_queue)
        self.quotas = QuotaController(self.ctx)
        self.scheduler = SchedulerLoop(
            self.ctx,
            Policy(placement=self.config.placement),
            message_interval=self.config.pending_message_seconds,
        )
        self.gpus = GpuMonitor(
            self.runtime,
            self.config.clock,
            interval=self.config.gpu_sample_seconds,
            history_seconds=self.config.gpu_history_seconds,
        )
        self.capacity = CapacityController(
            self.ctx, self.runtime, self.config.kubernetes, retention_days=settings().cost_retention_days
        )
        self.ctx.metrics.attach(ClusterState(list=self.ctx.cache.list, latest=self.gpus.latest))
        self.events = EventRetention(
            self.ctx,
            RetentionPolicy(
                event_ttl_seconds=self.config.event_ttl_seconds,
                events_per_object=self.config.events_per_object,
            ),
        )
        self.ctx.on_event = self.events.recorded
        self._next_resync = 0.0
        self._metrics_collected = False
        # What the TrainingJob controller and the scheduler loop have looked at: a change
        # requeued for another step is no news to them
        self._jobs_seen = Seen()
        self._workloads_seen = Seen()
        self._scheduler_seen = Seen()
        # ... and the Experiment controller: its own writes (trials' statuses, its status) are
        # no reason to look again (it does, on its timer and when a trial's metrics are due).
        self._experiments_seen = Seen()
        self._faults: queue.SimpleQueue[tuple[str, GpuFault, Future[GpuDevice]]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._opened = False

    # -- life ----------------------------------------------------------------------------------

    def open(self) -> None:
        """Load the cache and register the nodes (no thread; :meth:`run_once` drives it)."""
        if self._opened:
            return
        self.ctx.cache.start()
        self.events.load()
        self.nodes.sync()
        self.executor.set_nodes(self.nodes.addresses())
        self._opened = True

    def start(self) -> None:
        """Open, then run passes in a thread until :meth:`stop` (a standby opens once it leads)."""
        if not isinstance(self.runtime, SupportsLeadership):
            self.open()
        self._thread = threading.Thread(target=self._loop, name="muster-manager", daemon=True)
        self._thread.start()

    @property
    def leading(self) -> bool:
        """Whether this manager acts (always, but on a runtime with a leader Lease)."""
        return not isinstance(self.runtime, SupportsLeadership) or self.runtime.leading()

    def stop(self) -> None:
        """Stop the loop and detach from the runtime; pods keep running (re-adopted later)."""
        self._stop.set()
        self.ctx.cache.stop()
        if isinstance(self.runtime, SupportsWakeup):
            self.runtime.wake()  # a loop waiting on the runtime's reports
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.capacity.close()
        if self._own_runtime:
            self.runtime.close()

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        changes: list[PodStatusChange] = []
        was_leading = False
        while not self._stop.is_set():
            if isinstance(self.runtime, SupportsLeadership):
                if not self.runtime.wait_leading(_IDLE_WAIT):
                    was_leading, changes = False, []
                    continue
                if not was_leading:
                    self._take_over()
                    was_leading = True
            try:
                self.run_once(changes)
            except Exception:  # a bug or a lost database must not end the control plane
                log.exception("manager pass failed; retrying")
                self._stop.wait(1.0)
            # Never wait while there is work: a change the pass itself left (or one that came
            # meanwhile) runs the next pass at once.
            wait = 0.0 if self.ctx.cache.dirty else self._wait_time()
            if self.executor.active or self._runtime_cleaning_up():
                # A wakeable runtime is woken by store changes too (the cache's on_change).
                wakeable = isinstance(self.runtime, SupportsWakeup)
                changes = self.runtime.poll(wait if wakeable else min(wait, _BUSY_POLL))
            else:
                changes = []
                self.ctx.cache.wait(wait)

    def _runtime_cleaning_up(self) -> bool:
        """The runtime has work left after its last pod (e.g. a Ray gang's placement group to
        remove): it is done in poll(), so polling goes on until it is finished."""
        return isinstance(self.runtime, SupportsCleanup) and self.runtime.cleaning_up()

    def _take_over(self) -> None:
        """Now leading: adopt what the runtime holds, with an executor that knows just that."""
        log.info("leading: taking over the %s runtime's pods", self.runtime.name)
        if isinstance(self.runtime, SupportsReadoption):
            self.runtime.readopt()
        self.open()
        self.executor = PodExecutor(self.ctx, self.runtime, gang_timeout=self.config.gang_timeout_seconds)
        self.executor.set_nodes(self.nodes.addresses())
        self._next_resync = 0.0  # the first pass looks at everything

    def _wait_time(self) -> float:
        now = self.ctx.now()
        wake = [self._next_resync, now + _IDLE_WAIT]
        for timer in (
            self.ctx.timers.next_time(),
            self.gpus.next_time(),
            self.events.next_time(),
            self.experiments.next_look(now),
        ):
            if timer is not None:
                wake.append(timer)
        return max(0.0, min(wake) - now)

    def run_once(self, changes: Iterable[PodStatusChange] = ()) -> None:
        """One pass (see the module docstring), its writes in one transaction."""
        self.open()
        full = self.ctx.now() >= self._next_resync
        started = _elapsed()
        with self.ctx.batch():
            self._pass(changes, full)
        if full and self.config.resync_seconds > 0:  # 0: every pass resyncs, as asked (tests)
            spent = _elapsed() - started
            self._next_resync = max(self._next_resync, self.ctx.now() + spent / _RESYNC_SHARE)

    def _pass(self, changes: Iterable[PodStatusChange], full: bool) -> None:
        ctx = self.ctx
        now = ctx.now()
        forced: set[Key] = set()
        ctx.cache.drip(_BACKLOG_SLICE)
        changed = ctx.cache.take_changes(forced)
        # Jobs, services, workflows and Ray clusters naming a PriorityClass that did not exist
        # wait for it; none of them is its owner, so its arrival is a look at everything (a
        # rare, administrator's change) rather than a wait for the periodic resync.
        full = full or any(k[0] == "PriorityClass" for k in changed)
        for key in ctx.timers.due(now):
            changed.setdefault(key, ctx.cache.get(key[0], key[2], key[1] or None))
            forced.add(key)
        answered = self._inject_faults()
        sampled = self.gpus.due(now) or (bool(answered) and self.gpus.enabled)
        if sampled:  # injected readings show at once
            self._sample_gpus(now)
        reports = list(changes)
        metrics_due = self.experiments.metrics_due(now)
        if not (changed or reports or full or self.nodes.due() or sampled or answered or metrics_due):
            self.events.sweep(now)
            return
        if full:
            self._next_resync = now + self.config.resync_seconds
            for seen in (self._jobs_seen, self._workloads_seen, self._scheduler_seen, self._experiments_seen):
                seen.prune(ctx.cache)
        taken: dict[Key, Obj | None] = {}
        if any(c.final and c.reason is PodReason.NODE_LOST for c in reports):
            # Maybe lost with its node: the nodes first, so the executor knows which are gone.
            self.nodes.sync()
            self.executor.set_nodes(self.nodes.addresses())
        self.executor.observe(reports)
        if full:
            self.executor.resync()
        synced = self.nodes.due() or sampled or bool(answered)
        if synced:
            # A GPU sample may have found a fault (an XID event, a lost GPU): nodes follow at once.
            self.nodes.sync()
            self.executor.set_nodes(self.nodes.addresses())
        for future, device in answered:
            # answered once the node's status is stored, so the caller reads what it was told
            ctx.after_commit(lambda f=future, d=device: f.set_result(d))
        # What the steps so far stored (pod statuses, nodes): every later step looks at it now.
        self._take(changed, taken)
        if full or synced or any(k[0] == "Node" for k in changed):
            self.health.reconcile()
        if full or any(
            k[0]
            in (
                "TrainingJob",
                "Workload",
                "Workflow",
                "Experiment",
                "Trial",
                "InferenceService",
                "RayCluster",
                "RayJob",
            )
            and ctx.cache.get(k[0], k[2], k[1] or None) is None
            for k in changed
        ):
            collect_garbage(ctx)
            self.workflows.collect_run_dirs()
        if not self._metrics_collected or any(
            k[0] in ("Experiment", "Trial") and ctx.cache.get(k[0], k[2], k[1] or None) is None
            for k in changed
        ):
            # Trial metrics are not in the cache (they are the bulk of an experiment's data):
            # looked for only when an experiment or trial went, and once at start.
            self.experiments.collect_garbage()
            self._metrics_collected = True
        self._take(changed, taken)
        flows = _owners_of(changed, "Workflow", WORKFLOW_LABEL)
        if full:
            flows |= {
                (w["metadata"].get("namespace") or "", w["metadata"]["name"])
                for w in ctx.cache.list("Workflow")
            }
        self._reconcile_workflows(flows)
        self._take(changed, taken)
        experiments = _owners_of(self._experiments_seen.new(changed, forced), "Experiment", EXPERIMENT_LABEL)
        experiments |= metrics_due
        if full:
            experiments |= {
                (e["metadata"].get("namespace") or "", e["metadata"]["name"])
                for e in ctx.cache.list("Experiment")
            }
        self._reconcile_experiments(experiments)
        self._experiments_seen.saw(changed)
        self._experiments_seen.saw(self._take(changed, taken))
        self._reconcile_jobs(self._jobs_seen.new(changed, forced), full)
        services = _owners_of(changed, "InferenceService", SERVING_SERVICE_LABEL)
        if full:
            services |= {
                (s["metadata"].get("namespace") or "", s["metadata"]["name"])
                for s in ctx.cache.list("InferenceService")
            }
        self.serving.created = 0
        self._reconcile_services(services)
        self._take(changed, taken)
        self._reconcile_ray_clusters(changed, full)
        self._take(changed, taken)
        self._reconcile_ray_jobs(changed, full)
        self._take(changed, taken)
        self._reconcile_workloads(self._workloads_seen.new(changed, forced), full)
        self._workloads_seen.saw(changed)
        self._reconcile_namespaces(changed, full)
        self._take(changed, taken)
        fresh = self._scheduler_seen.new(changed, forced)
        # a replica created this pass (a scale-up from zero waits on it) is placed in this pass too
        scheduled = self._scheduling_needed(fresh, full) or bool(self.serving.created)
        if scheduled:
            self._scheduler_seen.saw(changed)
            admitted = {key_of(wl): wl for wl in self.scheduler.cycle()}
            # Its own writes (admissions, pending reasons) are no news to the next cycle.
            self._scheduler_seen.saw(self._take(changed, taken))
            self._reconcile_jobs(admitted, False)
            self._reconcile_workflows(_owners_of(admitted, "Workflow", WORKFLOW_LABEL))
            self._reconcile_services(_owners_of(admitted, "InferenceService", SERVING_SERVICE_LABEL))
            self._reconcile_each(
                "RayCluster",
                _owners_of(admitted, "RayCluster", RAY_CLUSTER_LABEL),
                self.ray_clusters.reconcile,
            )
        if full or any(k[0] in ("Workload", "ResourceQuota") for k in changed):
            self.quotas.sync()
        self.capacity.reconcile(changed, full, scheduled)
        if full:
            pods = ctx.cache.list("Pod")
            self.executor.sync(pods)
            self.executor.stop_orphans(pods)
            collect_finished_pods(ctx, self.config.finished_pod_limit)
        else:
            # A finished pod asks the executor for something only as it changes (a stop it
            # asked for is done, a casualty to evict); the full resync looks at all of them.
            self.executor.sync([*ctx.cache.list_live("Pod"), *_finished_pods(ctx.cache, changed)])
            # a deleted pod's last state is among the changes: the executor asks the cache
            self.executor.stop_deleted({(k[1], k[2]) for k in changed if k[0] == "Pod"})
        self.events.sweep(now)
        # Changes taken early were seen by the steps after the one that made them, not by the
        # steps before it: those look at them on the next pass (the others skip what they saw).
        ctx.cache.requeue(taken)

    def _take(self, changed: dict[Key, Obj | None], taken: dict[Key, Obj | None]) -> dict[Key, Obj | None]:
        """Add what changed since the pass began (mostly its own writes) to ``changed``."""
        new = self.ctx.cache.take_changes()
        changed.update(new)
        taken.update(new)
        return new

    def _reconcile_jobs(self, changed: dict[Key, Obj | None], full: bool) -> None:
        """The TrainingJobs the changed objects belong to (every one on a full resync, but the
        finished ones this manager has seen as they are or that wait in the cache's backlog)."""
        names = _jobs_of(changed)
        if full:
            waiting = self.ctx.cache.backlog()
            names |= {
                (j["metadata"].get("namespace") or "", j["metadata"]["name"])
                for j in self.ctx.cache.list("TrainingJob")
                if not (job_phase(j) in _JOB_DONE and (self._jobs_seen.seen(j) or key_of(j) in waiting))
            }
        for ns, name in sorted(names):
            job = self.ctx.cache.get("TrainingJob", name, ns or None)
            if job is not None:
                self.jobs.reconcile(job)
        self._jobs_seen.saw(changed)
        for ns, name in names:
            job = self.ctx.cache.get("TrainingJob", name, ns or None)
            if job is not None:
                self._jobs_seen.saw({key_of(job): job})

    def _reconcile_services(self, services: set[tuple[str, str]]) -> None:
        for ns, name in sorted(services):
            isvc = self.ctx.cache.get("InferenceService", name, ns or None)
            if isvc is None:
                self.serving.forget(ns or "default", name)
            else:
                self.serving.reconcile(isvc)

    def _reconcile_ray_clusters(self, changed: dict[Key, Obj | None], full: bool) -> None:
        """The RayClusters the changed objects belong to (all of them on a full resync)."""
        clusters = _owners_of(changed, "RayCluster", RAY_CLUSTER_LABEL)
        if full:
            clusters |= {_ns_name(c) for c in self.ctx.cache.list("RayCluster")}
        self._reconcile_each("RayCluster", clusters, self.ray_clusters.reconcile)

    def _reconcile_ray_jobs(self, changed: dict[Key, Obj | None], full: bool) -> None:
        """The RayJobs the changed objects belong to (all of them on a full resync); a job also
        follows the cluster its clusterSelector names."""
        jobs = _owners_of(changed, "RayJob", RAY_JOB_LABEL)
        touched = {(ns, name) for kind, ns, name in changed if kind == "RayCluster"}
        for job in self.ctx.cache.list("RayJob"):
            cluster = (_ns_name(job)[0], (job.get("status") or {}).get("rayClusterName"))
            if full or cluster in touched:
                jobs.add(_ns_name(job))
        self._reconcile_each("RayJob", jobs, self.ray_jobs.reconcile)

    def _reconcile_workflows(self, flows: set[tuple[str, str]]) -> None:
        self._reconcile_each("Workflow", flows, self.workflows.reconcile)

    def _reconcile_experiments(self, experiments: set[tuple[str, str]]) -> None:
        self._reconcile_each("Experiment", experiments, self.experiments.reconcile)

    def _reconcile_each(
        self, kind: str, names: set[tuple[str, str]], reconcile: Callable[[Obj], None]
    ) -> None:
        for ns, name in sorted(names):
            obj = self.ctx.cache.get(kind, name, ns or None)
            if obj is not None:
                reconcile(obj)

    def _reconcile_workloads(self, changed: dict[Key, Obj | None], full: bool) -> None:
        cache = self.ctx.cache
        if full:
            # Only a Workload that holds an admission has anything to do (the controller's rule).
            names = {
                (w["metadata"].get("namespace") or "", w["metadata"]["name"])
                for w in cache.list_live("Workload")
                if workload_state(w) in (WorkloadState.ADMITTED, WorkloadState.EVICTING)
            }
        else:
            names = set()
            for (kind, ns, name), obj in changed.items():
                if kind == "Workload":
                    names.add((ns, name))
                elif kind == "Pod" and obj is not None:
                    owner = (obj["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
                    if owner:
                        names.add((ns, owner))
        for ns, name in sorted(names):
            wl = cache.get("Workload", name, ns or None)
            if wl is not None:
                self.workloads.reconcile(wl)

    def _reconcile_namespaces(self, changed: dict[Key, Obj | None], full: bool) -> None:
        cache = self.ctx.cache
        if full:
            names = [n["metadata"]["name"] for n in cache.list("Namespace")]
        else:
            names = [name for (kind, _ns, name) in changed if kind == "Namespace"]
        for name in sorted(names):
            ns = cache.get("Namespace", name)
            if ns is not None:
                self.namespaces.reconcile(ns)

    def _scheduling_needed(self, changed: dict[Key, Obj | None], full: bool) -> bool:
        if full:
            return True
        for (kind, _ns, _name), obj in changed.items():
            if kind in _SCHEDULER_KINDS:
                return True
            if kind == "Pod" and (obj is None or is_final(obj) or obj["metadata"].get("deletionTimestamp")):
                return True
            if kind == "Pod" and self._may_grow(obj):
                return True
        return False

    def _may_grow(self, pod: Obj) -> bool:
        """A pod of an elastic Workload below its full size: once its gang runs, the Workload
        may grow; until then the cycle says why not (GangStarting), so that a starting gang's
        reason is written as its pods appear (muster.controllers.scheduling.elastic)."""
        owner = (pod["metadata"].get("labels") or {}).get(WORKLOAD_LABEL)
        if not owner:
            return False
        wl = self.ctx.cache.get("Workload", owner, pod["metadata"].get("namespace") or None)
        return wl is not None and below_full_size(wl)

    def request_fault(self, node: str, fault: GpuFault) -> Future[GpuDevice]:
        """(Any thread; testing only.) Inject ``fault`` into a fake GPU of ``node`` on the next
        pass; the future holds the device as reported once the node's status is written, or the
        error (KeyError for an unknown node or GPU, PodRuntimeError for real GPUs)."""
        future: Future[GpuDevice] = Future()
        if not isinstance(self.runtime, SupportsFaultInjection):
            future.set_exception(PodRuntimeError(f"the {self.runtime.name} runtime takes no injected faults"))
            return future
        self._faults.put((node, fault, future))
        self.ctx.cache.mark([("Node", "", node)])  # wakes the loop
        return future

    def request_interruption(self, node: str, at: float, action: str = "terminate") -> Future[Obj]:
        """(Any thread; testing and drills.) A spot notice for ``node``, taken back at ``at``
        (epoch seconds); the future holds its NodeClaim once the notice is stored."""
        return self.capacity.request_interruption(node, at, action)

    def _inject_faults(self) -> list[tuple[Future[GpuDevice], GpuDevice]]:
        answered = []
        while True:
            try:
                node, fault, future = self._faults.get_nowait()
            except queue.Empty:
                return answered
            try:
                device = self.runtime.inject_gpu_fault(node, fault)  # type: ignore[attr-defined]
            except (KeyError, PodRuntimeError) as exc:
                future.set_exception(exc)
                continue
            log.warning("fault injected into GPU %s of node %s: %s", fault.gpu, node, fault)
            answered.append((future, device))

    def _sample_gpus(self, now: float) -> None:
        try:
            self.gpus.sample(now)
        except Exception:  # a driver hiccup must not stop the pass; the next sample retries
            self.gpus.errors += 1
            log.exception("sampling the GPUs failed")

    def _master_address(self, namespace: str, workload: str, pod: str, node: str) -> str:
        if isinstance(self.runtime, SupportsNativePods):
            return self.runtime.pod_address(namespace, workload, pod)
        return self.executor.node_addresses.get(node, "127.0.0.1")

    def _open_runtime(self, home: Path) -> Runtime:
        if self.config.runtime == "kubernetes":
            from muster.runtime.kubernetes.runtime import KubernetesRuntime

            return KubernetesRuntime(self.config.kubernetes or KubernetesConfig())
        if self.config.runtime == "ray":
            from muster.runtime.ray.runtime import RayRuntime

            return RayRuntime(home, address=self.config.ray_address)
        from muster.runtime.local.fake import parse_fake_gpus
        from muster.runtime.local.runtime import LocalRuntime

        fake = parse_fake_gpus(self.config.fake_gpus) if self.config.fake_gpus else None
        return LocalRuntime(home, fake_gpus=fake, python=self.config.python)


class Seen:
    """The versions of changed objects one step of the pass has looked at, so that a change it
    has seen (requeued for the steps that ran before it) does not make it work again."""

    def __init__(self) -> None:
        self._versions: dict[Key, str] = {}

    def new(self, changed: dict[Key, Obj | None], forced: set[Key]) -> dict[Key, Obj | None]:
        """The changes not yet seen, and every ``forced`` one (marked, or due on a timer)."""
        return {
            k: obj
            for k, obj in changed.items()
            if k in forced or obj is None or self._versions.get(k) != _version(obj)
        }

    def saw(self, changed: dict[Key, Obj | None]) -> None:
        for key, obj in changed.items():
            if obj is None:
                self._versions.pop(key, None)
            else:
                self._versions[key] = _version(obj)

    def prune(self, cache: Cache) -> None:
        """Forget the objects that are gone."""
        present = cache.present(self._versions)
        self._versions = {k: v for k, v in self._versions.items() if k in present}

    def seen(self, obj: Obj) -> bool:
        """Whether this version of ``obj`` was seen."""
        return self._versions.get(key_of(obj)) == _version(obj)


def _finished_pods(cache: Cache, changed: dict[Key, Obj | None]) -> list[Obj]:
    found = (cache.get("Pod", k[2], k[1] or None) for k in changed if k[0] == "Pod")
    return [p for p in found if p is not None and is_final(p)]


def _version(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('uid')}/{meta.get('resourceVersion')}"


def _workload_in_play(wl: Obj) -> bool:
    return workload_state(wl) is not WorkloadState.FINISHED


def _job_in_play(job: Obj) -> bool:
    return job_phase(job) not in _JOB_DONE


def _jobs_of(changed: dict[Key, Obj | None]) -> set[tuple[str, str]]:
    """The (namespace, name) of the TrainingJobs that the changed objects belong to."""
    return _owners_of(changed, "TrainingJob", JOB_NAME_LABEL)


def _ns_name(obj: Obj) -> tuple[str, str]:
    return obj["metadata"].get("namespace") or "", obj["metadata"]["name"]


def _owners_of(changed: dict[Key, Obj | None], kind: str, label: str) -> set[tuple[str, str]]:
    """The (namespace, name) of the ``kind`` objects that changed, or that the changed objects
    name in their ``label``."""
    owners: set[tuple[str, str]] = set()
    for (k, ns, name), obj in changed.items():
        if k == kind:
            owners.add((ns, name))
        elif obj is not None:
            owner = (obj["metadata"].get("labels") or {}).get(label)
            if owner:
                owners.add((obj["metadata"].get("namespace") or "", owner))
    return owners
