"""Timed replay of a job trace on a virtual clock, scheduled by :func:`muster.scheduler.schedule`.

Jobs arrive at their submit times into their virtual cluster's ClusterQueue (all queues in
one cohort, so idle quota is borrowed), wait until a scheduling cycle admits them, run for
their duration and leave. The driver keeps what the control plane keeps: a node table with
every running pod bound, the queues' usage, pending and admitted workloads. Each cycle it
builds a :class:`~muster.scheduler.Snapshot`, calls ``schedule()`` and applies the
:class:`~muster.scheduler.Decisions` with :func:`~muster.scheduler.apply_decisions`:
admitted jobs start; preempted jobs give up their GPUs at once, lose the work since their
last checkpoint and rejoin their queue (ordered by eviction time) once they have stopped,
``requeue_delay`` later; the preemptors are admitted by the next cycle, at the same instant.

Policies (all Kueue semantics, as the core implements them):

* ``fifo``: StrictFIFO queues, equal priorities, classical cohort ordering;
* ``priority``: BestEffortFIFO, a job's priority is minus its GPU count (small jobs first:
  durations are unknown at submission, size is the scheduler's proxy for them);
* ``fair``: BestEffortFIFO with fair sharing (dominant resource share, queue weights).

With preemption, queues reclaim their nominal quota from borrowers (``reclaimWithinCohort:
Any``; under ``fair`` the fair-sharing strategies decide) and, under ``priority``, evict
lower-priority jobs of their own queue (``withinClusterQueue: LowerPriority``).

Speed (the whole 82k-job trace replays in minutes): a cycle runs only at an instant when
something changed (an arrival, a completion, an eviction), or, with ``interval``, at most once
per interval; it is skipped when no pending job could be admitted or preempt anything
(without preemption: no class of pending job fits the free GPUs). A cycle is given only the
pending jobs that could be decided in it: per queue and per class of identical jobs (same
GPUs and priority), the first ``B // gpus + 1`` in queue order, where ``B`` is the GPUs the
cycle could hand out (the free GPUs; with preemption, the cluster's). A later job of a class
can only do what the one before it did, and that one already found no room. Admitted jobs
are listed only when preemption is on, and then only those of queues that borrow or have
pending jobs (the only possible victims); the others count as queue usage.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from muster.scheduler import (
    GPU,
    GPU_MILLI,
    AdmittedWorkload,
    ClusterQueue,
    Cohort,
    Flavor,
    FlavorQuotas,
    Node,
    NodeTable,
    PendingWorkload,
    PodSet,
    Policy,
    PreemptionConfig,
    ResourceGroup,
    ResourceQuota,
    Snapshot,
    apply_decisions,
    schedule,
)
from muster.scheduler.decisions import unbind_pod
from muster.sim.philly import PhillyJobs
from muster.sim.philly_config import ClusterConfig, QueueConfig

__all__ = ["POLICIES", "ReplayResult", "ReplaySpec", "TimedReplay", "pod_shape"]

POLICIES = ("fifo", "priority", "fair")
COHORT = "cluster"
FLAVOR = "default"

# job states
FUTURE, PENDING, RUNNING, DONE, DROPPED, STOPPING = range(6)
MAX_CYCLES_PER_INSTANT = 1000


@dataclass(frozen=True, slots=True)
class ReplaySpec:
    """How to schedule: policy, preemption, checkpoint interval (seconds; 0 = no
    checkpoints, a preempted job restarts from scratch), the time a preempted job takes to
    stop before it rejoins its queue (the termination grace period), scheduling period
    (0 = at every event), node placement policy and seed."""

    policy: str = "fifo"
    preemption: bool = False
    checkpoint_interval: float = 1800.0
    requeue_delay: float = 30.0
    interval: float = 0.0
    placement: str = "binpack"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy {self.policy!r} is unknown; use one of {', '.join(POLICIES)}")
        if min(self.checkpoint_interval, self.requeue_delay, self.interval) < 0:
            raise ValueError("checkpoint_interval, requeue_delay and interval must be >= 0 seconds")

    @property
    def name(self) -> str:
        return self.policy + ("+preemption" if self.preemption else "")


@dataclass(slots=True)
class ReplayResult:
    """Per job (NaN where it never happened): first admission, completion; counts of
    preemptions and GPU-seconds of work lost to them. Per queue: GPU-seconds used and
    borrowed above nominal. Allocated GPUs over time as change points ``(util_t,
    util_gpus)``. Jobs larger than the cluster are ``dropped`` before the replay."""

    jobs: PhillyJobs
    queues: list[QueueConfig]
    cluster: ClusterConfig
    spec: ReplaySpec
    dropped: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    preemptions: np.ndarray
    lost_gpu_seconds: np.ndarray
    queue_gpu_seconds: np.ndarray
    queue_borrowed_seconds: np.ndarray
    util_t: np.ndarray
    util_gpus: np.ndarray
    preemption_reasons: dict[str, int] = field(default_factory=dict)
    cycles: int = 0
    skipped: int = 0
    stalls: int = 0
    seconds: float = 0.0
    schedule_seconds: float = 0.0
    end_time: float = 0.0


def _job(name: str) -> int:
    """The job index from its workload name (``job-000042``)."""
    return int(name[4:])


def pod_shape(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(pods, GPUs per pod) for a job: one pod when it fits a node, else the fewest equal
    pods, each of the largest divisor of ``gpus`` a node can hold (12 GPUs on 8-GPU nodes:
    two pods of 6)."""
    if gpus <= gpus_per_node:
        return 1, gpus
    per = max(d for d in range(1, gpus_per_node + 1) if gpus % d == 0)
    return gpus // per, per


class TimedReplay:
    """One replay; call :meth:`run` once."""

    def __init__(self, jobs: PhillyJobs, cluster: ClusterConfig, queues: list[QueueConfig], spec: ReplaySpec):
        if len(queues) != len(jobs.queues) or [q.name for q in queues] != jobs.queues:
            raise ValueError("queues must be given for every queue of the jobs, in the same order")
        self.jobs = jobs
        self.cluster = cluster
        self.queues = queues
        self.spec = spec
        self.policy = Policy(placement=spec.placement, fair_sharing=spec.policy == "fair", seed=spec.seed)
        nodes = [
            Node(f"node-{i:04d}", gpus=cluster.gpus_per_node, gpu_model=cluster.gpu_model)
            for i in range(cluster.nodes)
        ]
        self.table = NodeTable.from_nodes(nodes)
        self.cqs = [self._queue(q) for q in queues]
        n, nq = len(jobs), len(queues)
        self.state = np.full(n, FUTURE, dtype=np.int8)
        self.state[jobs.gpus > cluster.gpus] = DROPPED
        self.progress = np.zeros(n)  # checkpointed work, seconds
        self.run_start = np.full(n, np.nan)
        self.start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.lost = np.zeros(n)
        self.attempt = np.zeros(n, dtype=np.int64)
        self.qtime = np.zeros(n)  # queue order time: submit, or eviction after a requeue
        self.pending_obj: dict[int, PendingWorkload] = {}
        self.admitted_obj: dict[int, AdmittedWorkload] = {}
        # per queue: class (priority, gpus) -> its pending job ids in queue order (time, id)
        self.classes: list[dict[tuple[int, int], list[int]]] = [{} for _ in range(nq)]
        self.npending = np.zeros(nq, dtype=np.int64)
        self.used = np.zeros(nq, dtype=np.int64)  # GPUs of running jobs
        self.nominal = np.array([q.nominal_gpus for q in queues], dtype=np.int64)
        self.gpu_seconds = np.zeros(nq)
        self.borrowed_seconds = np.zeros(nq)
        self.completions: list[tuple[float, int, int]] = []
        self.requeues: list[tuple[float, int]] = []
        self.stopping: dict[int, PendingWorkload] = {}
        self.util_t: list[float] = [0.0]
        self.util_gpus: list[int] = [0]
        self.reasons: dict[str, int] = {}
        self.now = 0.0
        self.cycles = self.skipped = self.stalls = 0
        self.schedule_seconds = 0.0

    # -- the loop -------------------------------------------------------------------------

    def run(self, progress: Callable[[float], None] | None = None) -> ReplayResult:
        """Replay to the end; ``progress`` gets the share of arrivals done now and then."""
        started = time.perf_counter()
        jobs, spec = self.jobs, self.spec
        arrivals = np.flatnonzero(self.state == FUTURE)
        a = 0
        dirty = False
        next_tick = 0.0
        next_report = 0
        while True:
            t_arr = jobs.submit[arrivals[a]] if a < len(arrivals) else math.inf
            t_done = self.completions[0][0] if self.completions else math.inf
            t_back = self.requeues[0][0] if self.requeues else math.inf
            t_cycle = max(next_tick, self.now) if (dirty and spec.interval > 0) else math.inf
            t = min(t_arr, t_done, t_back, t_cycle, self._next_event())
            if t == math.inf:
                break
            self._advance(t)
            dirty |= self._events(t)
            while self.completions and self.completions[0][0] <= t:
                _, j, attempt = heapq.heappop(self.completions)
                if attempt == self.attempt[j] and self.state[j] == RUNNING:
                    self._complete(j)
                    dirty = True
            while self.requeues and self.requeues[0][0] <= t:
                j = heapq.heappop(self.requeues)[1]
                self._enqueue(j, self.stopping.pop(j))
                dirty = True
            while a < len(arrivals) and jobs.submit[arrivals[a]] <= t:
                self._arrive(int(arrivals[a]))
                a += 1
                dirty = True
            if dirty and (spec.interval == 0 or t >= next_tick):
                dirty = self._cycles()
                if spec.interval > 0:
                    next_tick = (math.floor(t / spec.interval) + 1) * spec.interval
            if progress is not None and a >= next_report:
                progress(a / max(len(arrivals), 1))
                next_report = a + max(len(arrivals) // 200, 1)
        return self._result(time.perf_counter() - started)

    def _next_event(self) -> float:
        """When a driver's own next event is due (``math.inf``: none); see :meth:`_events`."""
        return math.inf

    def _events(self, t: float) -> bool:
        """A driver's own events due at ``t`` (nodes coming and going in an elastic replay,
        :mod:`muster.sim.elastic`); True when they give the scheduler something to decide."""
        return False

    def _cycles(self) -> bool:
        """Run cycles at this instant until one preempts nothing; False: nothing is left to
        decide until the next event.

        A preemptor keeps its claim until it is admitted (DESIGN §5): its victims give their
        GPUs back at once, and the next cycle is given the waiting preemptors alone, so no
        other head (say, the next job of a borrowing queue that now "fits") takes what was
        freed for them; then a normal cycle lets everyone use what is left. The cap on
        cycles per instant is a guard, counted in ``stalls``.
        """
        claims: list[int] | None = None
        for _ in range(MAX_CYCLES_PER_INSTANT):
            if not self.npending.sum():
                return False
            if claims is None and self._hopeless():
                self.skipped += 1
                return False
            preemptors = self._cycle(claims)
            if claims is not None:
                claims = None
                continue
            if not preemptors:
                return False
            claims = preemptors
        self.stalls += 1
        return False

    def _hopeless(self) -> bool:
        """True when no pending job can be admitted or preempt anything now: none fits the
        free GPUs, and none may preempt. Classical reclaim needs the preemptor's queue to
        stay within nominal quota and another queue to borrow; fair sharing needs a
        borrowing queue; within a queue (``priority``) a lower-priority job must run there."""
        free = int(self.table.full_free.sum())
        pre = self.spec.preemption
        borrowing = bool((self.used > self.nominal).any())
        lowest = self._lowest_running_priority() if pre and self.spec.policy == "priority" else {}
        for q, cls in enumerate(self.classes):
            for (p, g), ids in cls.items():
                if not ids:
                    continue
                if g <= free:
                    return False
                if not pre:
                    continue
                if borrowing and (self.spec.policy == "fair" or self.used[q] + g <= self.nominal[q]):
                    return False
                if q in lowest and lowest[q] < p:
                    return False
        return True

    def _lowest_running_priority(self) -> dict[int, int]:
        lowest: dict[int, int] = {}
        for j, w in self.admitted_obj.items():
            q = int(self.jobs.queue[j])
            lowest[q] = min(lowest.get(q, w.priority), w.priority)
        return lowest

    def _cycle(self, only: list[int] | None = None) -> list[int]:
        """One scheduling cycle over the pending subset (or the jobs ``only``); returns the
        jobs that preempted (they wait for the next cycle)."""
        self.cycles += 1
        if only is None:
            pending = self._pending_subset()
        else:
            pending = [self.pending_obj[j] for j in only if self.state[j] == PENDING]
        admitted = self._admitted_subset(pending)
        listed = np.zeros(len(self.queues), dtype=np.int64)
        for w in admitted:
            listed[self.jobs.queue[_job(w.name)]] += w.pod_sets[0].count * w.pod_sets[0].gpus
        for q, cq in enumerate(self.cqs):
            cq.usage = {(FLAVOR, GPU): int(self.used[q] - listed[q]) * GPU_MILLI}
        snapshot = Snapshot(
            cluster_queues=self.cqs,
            pending=pending,
            admitted=admitted,
            cohorts=[Cohort(COHORT)],
            flavors=[Flavor(FLAVOR)],
            nodes=self.table,
        )
        t0 = time.perf_counter()
        decisions = schedule(snapshot, self.policy)
        self.schedule_seconds += time.perf_counter() - t0
        after = apply_decisions(snapshot, decisions, now=self.now)
        assert isinstance(after.nodes, NodeTable)
        self.table = after.nodes
        for p in decisions.preempted:
            self._evict(_job(p.name), p.reason)
        fresh = after.admitted[len(after.admitted) - len(decisions.admitted) :]
        for a, w in zip(decisions.admitted, fresh, strict=True):
            self._start(_job(a.name), w)
        return list(dict.fromkeys(_job(p.preemptor.name) for p in decisions.preempted))

    # -- what a cycle sees ------------------------------------------------------------------

    def _pending_subset(self) -> list[PendingWorkload]:
        free = int(self.table.full_free.sum())
        budget = self.cluster.gpus if self.spec.preemption else free
        out: list[PendingWorkload] = []
        for cls in self.classes:
            for (_, g), ids in cls.items():
                out.extend(self.pending_obj[j] for j in ids[: budget // g + 1])
        return out

    def _admitted_subset(self, pending: list[PendingWorkload]) -> list[AdmittedWorkload]:
        """The running jobs that could be preemption victims in a cycle over ``pending``:
        those of queues above nominal quota now or once their pending jobs were all
        admitted (reclaim and fair sharing only take from borrowing queues), and, under
        ``priority``, those below the top pending priority of their own queue."""
        if not self.spec.preemption:
            return []
        nq = len(self.queues)
        demand = np.zeros(nq, dtype=np.int64)
        top = np.full(nq, np.iinfo(np.int64).min)
        for w in pending:
            q = self.jobs.queue[_job(w.name)]
            demand[q] += w.pod_sets[0].count * w.pod_sets[0].gpus
            top[q] = max(top[q], w.priority)
        may_borrow = self.used + demand > self.nominal
        within = self.spec.policy == "priority"
        out = []
        lowest = np.full(nq, np.iinfo(np.int64).max)
        for j, w in self.admitted_obj.items():
            q = self.jobs.queue[j]
            lowest[q] = min(lowest[q], w.priority)
            if may_borrow[q] or (within and w.priority < top[q]):
                out.append(w)
        self._prune_preemptors(pending, may_borrow, lowest)
        return out

    def _prune_preemptors(
        self, pending: list[PendingWorkload], may_borrow: np.ndarray, lowest: np.ndarray
    ) -> None:
        """Mark the pending jobs that cannot preempt in this cycle, so the core does not
        search for victims that cannot exist (its searches cost milliseconds). A job may
        preempt only when another queue borrows or may start borrowing in the cycle and,
        classically, its own queue stays within nominal quota after it (Kueue's reclaim
        without borrowing); or, under ``priority``, when a lower-priority job runs in its own
        queue. Decisions are the same; only impossible searches are skipped."""
        fair = self.spec.policy == "fair"
        within = self.spec.policy == "priority"
        borrowers = int(may_borrow.sum())
        for w in pending:
            j = _job(w.name)
            q = self.jobs.queue[j]
            others = borrowers - int(may_borrow[q]) > 0
            reclaim = others and (fair or self.used[q] + self.jobs.gpus[j] <= self.nominal[q])
            w.can_preempt = bool(reclaim or (within and lowest[q] < w.priority))

    # -- job lifecycle ----------------------------------------------------------------------

    def _arrive(self, j: int) -> None:
        """FUTURE -> PENDING: the job enters its queue, ordered by submit time."""
        g = int(self.jobs.gpus[j])
        pods, per = pod_shape(g, self.cluster.gpus_per_node)
        w = PendingWorkload(
            name=f"job-{j:06d}",
            queue=self.queues[self.jobs.queue[j]].name,
            pod_sets=[PodSet("worker", pods, gpus=per)],
            priority=-g if self.spec.policy == "priority" else 0,
            creation_time=self.now,
        )
        self._enqueue(j, w)

    def _enqueue(self, j: int, w: PendingWorkload) -> None:
        """-> PENDING: into its class list, kept in queue order (time, then name)."""
        self.state[j] = PENDING
        self.pending_obj[j] = w
        self.qtime[j] = w.queue_time
        q = int(self.jobs.queue[j])
        key = (w.priority, int(self.jobs.gpus[j]))
        ids = self.classes[q].setdefault(key, [])
        if ids and (self.qtime[ids[-1]], ids[-1]) > (self.qtime[j], j):
            ids.insert(bisect.bisect(ids, (self.qtime[j], j), key=self._order), j)
        else:
            ids.append(j)
        self.npending[q] += 1

    def _order(self, j: int) -> tuple[float, int]:
        return (self.qtime[j], j)

    def _start(self, j: int, w: AdmittedWorkload) -> None:
        """PENDING -> RUNNING: admitted; it finishes when its remaining work is done."""
        q = int(self.jobs.queue[j])
        assert self.state[j] == PENDING, f"job {j} admitted while {self.state[j]}"
        self.state[j] = RUNNING
        w0 = self.pending_obj.pop(j)
        ids = self.classes[q][(w0.priority, int(self.jobs.gpus[j]))]
        at = bisect.bisect_left(ids, (self.qtime[j], j), key=self._order)
        assert ids[at] == j, "class lists must stay in queue order"
        del ids[at]
        self.admitted_obj[j] = w
        self.npending[q] -= 1
        if np.isnan(self.start[j]):
            self.start[j] = self.now
        self.run_start[j] = self.now
        self.attempt[j] += 1
        self._charge(q, int(self.jobs.gpus[j]))
        end = self.now + self.jobs.duration[j] - self.progress[j]
        heapq.heappush(self.completions, (end, j, int(self.attempt[j])))

    def _complete(self, j: int) -> None:
        """RUNNING -> DONE: its pods leave the nodes and its quota is released."""
        w = self.admitted_obj.pop(j)
        self._release(w)
        self.state[j] = DONE
        self.finish[j] = self.now
        self._charge(int(self.jobs.queue[j]), -int(self.jobs.gpus[j]))

    def _evict(self, j: int, reason: str) -> None:
        """RUNNING -> STOPPING: preempted (apply_decisions already took its pods off the
        nodes, so the preemptor can start at once); work since the last checkpoint is lost.
        It rejoins its queue, ordered by its eviction time, after ``requeue_delay``: while
        it shuts down it cannot take back what it just gave up (that would let a victim and
        its preemptor evict each other forever at one instant)."""
        w = self.admitted_obj.pop(j)
        g = int(self.jobs.gpus[j])
        ran = self.now - self.run_start[j]
        interval = self.spec.checkpoint_interval
        kept = math.floor(ran / interval) * interval if interval > 0 else 0.0
        self.progress[j] += kept
        self.lost[j] += (ran - kept) * g
        self.preempted[j] += 1
        self.attempt[j] += 1  # its pending completion no longer counts
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self._charge(int(self.jobs.queue[j]), -g)
        pw = PendingWorkload(
            name=w.name,
            queue=w.queue,
            pod_sets=[PodSet("worker", w.pod_sets[0].count, gpus=w.pod_sets[0].gpus)],
            priority=w.priority,
            creation_time=w.creation_time,
            eviction_time=self.now,
        )
        self.state[j] = STOPPING
        self.stopping[j] = pw
        heapq.heappush(self.requeues, (self.now + self.spec.requeue_delay, j))

    def _release(self, w: AdmittedWorkload) -> None:
        for ps in w.pod_sets:
            for pod in ps.pods:
                milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                unbind_pod(self.table, self.table.index[pod.node], ps.requests, pod.gpus, milli)

    # -- accounting -------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        """Move the clock to ``t``, integrating each queue's GPU use over the gap."""
        dt = t - self.now
        if dt > 0:
            self.gpu_seconds += self.used * dt
            self.borrowed_seconds += np.maximum(self.used - self.nominal, 0) * dt
            self.now = t

    def _charge(self, q: int, gpus: int) -> None:
        self.used[q] += gpus
        total = int(self.used.sum())
        if self.util_t[-1] == self.now:
            self.util_gpus[-1] = total
        else:
            self.util_t.append(self.now)
            self.util_gpus.append(total)

    def _queue(self, q: QueueConfig) -> ClusterQueue:
        def milli(v: int | None) -> int | None:
            return None if v is None else v * GPU_MILLI

        quota = ResourceQuota(
            q.nominal_gpus * GPU_MILLI, milli(q.borrowing_limit_gpus), milli(q.lending_limit_gpus)
        )
        group = ResourceGroup((GPU,), [FlavorQuotas(FLAVOR, {GPU: quota})])
        spec = self.spec
        if not spec.preemption:
            pre = PreemptionConfig()
        else:
            within = "LowerPriority" if spec.policy == "priority" else "Never"
            pre = PreemptionConfig(within_cluster_queue=within, reclaim_within_cohort="Any")
        return ClusterQueue(
            name=q.name,
            resource_groups=[group],
            cohort=COHORT,
            queueing_strategy="StrictFIFO" if spec.policy == "fifo" else "BestEffortFIFO",
            preemption=pre,
            fair_weight=q.fair_weight,
        )

    def _result(self, seconds: float) -> ReplayResult:
        return ReplayResult(
            jobs=self.jobs,
            queues=self.queues,
            cluster=self.cluster,
            spec=self.spec,
            dropped=self.state == DROPPED,
            start=self.start,
            finish=self.finish,
            preemptions=self.preempted,
            lost_gpu_seconds=self.lost,
            queue_gpu_seconds=self.gpu_seconds,
            queue_borrowed_seconds=self.borrowed_seconds,
            util_t=np.array(self.util_t),
            util_gpus=np.array(self.util_gpus),
            preemption_reasons=dict(self.reasons),
            cycles=self.cycles,
            skipped=self.skipped,
            stalls=self.stalls,
            seconds=seconds,
            schedule_seconds=self.schedule_seconds,
            end_time=self.now,
        )
