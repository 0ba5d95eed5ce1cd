"""Replaying a trace against elastic NodePools: the autoscaler's decision on a virtual clock.

:class:`ElasticReplay` is a :class:`~muster.sim.timed.TimedReplay` whose cluster is a static
part (``cluster.nodes``, possibly none) plus nodes that NodePools make and remove. The
simulator is the pools' provider (:class:`SimProvider`, the same :class:`NodeProvider`
contract the control plane calls): a node asked for comes up ``provisioningDelaySeconds``
later and costs its pool's price from that request to its removal. Every
``autoscale_interval`` seconds while work waits or a pool node is idle, the replay builds the
planner's input as the control plane does (the pending jobs, the pools, the free room on the
nodes and the nodes coming up) and applies :func:`muster.scheduler.autoscale.plan`: new
nodes are asked for, nodes empty for the pool's TTL are removed.

Spot pools are interrupted at ``spot_rate`` per node-hour (each spot node's interruption
time is drawn from an exponential distribution when it is asked for, from a seeded
generator): ``notice_seconds`` before it the node is cordoned and its jobs are evicted as the
control plane's spot handshake does, losing the work since their last checkpoint (the
replay's ``checkpoint_interval``: the conservative case of a job that cannot checkpoint on the
notice), and rejoin their queue after ``requeue_delay`` keeping their place (ordered by
submission, ahead of newer jobs); the node goes at the interruption time, or at once when
empty. The queues' quotas are derived from the pools' largest size, so quota never binds
before the pools do: every pending job waits for capacity, which is what the autoscaler
reads. Every job tolerates spot (it checkpoints).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from muster.providers.base import Instance, NodeRequest, ProviderError
from muster.scheduler import GPU_MILLI, Node, NodeTable, PodSet
from muster.scheduler.autoscale import Bin, Gang, Pool, plan
from muster.scheduler.decisions import bind_pod
from muster.sim.philly import PhillyJobs
from muster.sim.philly_config import ClusterConfig, QueueConfig
from muster.sim.timed import DROPPED, FUTURE, PENDING, RUNNING, ReplayResult, ReplaySpec, TimedReplay

__all__ = [
    "ElasticReplay",
    "ElasticResult",
    "ElasticSpec",
    "SimPool",
    "SimProvider",
    "peak_demand",
    "pools_from",
]

POOL_LABEL = "muster.dev/nodepool"


@dataclass(frozen=True, slots=True)
class SimPool:
    """A NodePool as the replay uses it: identical nodes of ``gpus`` GPUs."""

    name: str
    gpus: int
    price: float
    max_nodes: int
    min_nodes: int = 0
    spot: bool = False
    delay: float = 180.0
    ttl: float = 600.0
    weight: int = 0
    gpu_model: str = "V100"


@dataclass(frozen=True, slots=True)
class ElasticSpec:
    """The pools and how they behave: ``static_price`` per static node-hour, spot interruptions
    per spot node-hour and their notice, how often the autoscaler runs, the seed of the draws."""

    pools: tuple[SimPool, ...]
    static_price: float = 0.0
    spot_rate: float = 0.0
    notice_seconds: float = 120.0
    autoscale_interval: float = 30.0
    seed: int = 0


@dataclass(slots=True)
class _Machine:
    name: str
    pool: SimPool
    asked: float
    ready_at: float
    interrupt_at: float | None
    up: bool = False
    draining: bool = False
    gone_at: float | None = None


class SimProvider:
    """The pools' provider on the replay's virtual clock (the NodeProvider contract)."""

    name = "sim"

    def __init__(self, clock: float = 0.0) -> None:
        self.now = clock
        self.machines: dict[str, _Machine] = {}
        self.pools: dict[str, SimPool] = {}
        self.interrupt: dict[str, float | None] = {}  # claim -> interruption time, drawn by the replay

    def create(self, request: NodeRequest) -> Instance:
        known = self.machines.get(request.claim)
        if known is None:
            pool = self.pools.get(request.pool)
            if pool is None:
                raise ProviderError(f"no pool {request.pool}")
            known = self.machines[request.claim] = _Machine(
                request.claim,
                pool,
                self.now,
                self.now + request.ready_in_seconds,
                self.interrupt.pop(request.claim, None),
            )
        return self._instance(known)

    def get(self, claim: str) -> Instance | None:
        m = self.machines.get(claim)
        return None if m is None or m.gone_at is not None else self._instance(m)

    def list(self) -> list[Instance]:
        return [self._instance(m) for m in self.machines.values() if m.gone_at is None]

    def delete(self, claim: str) -> None:
        m = self.machines.get(claim)
        if m is not None and m.gone_at is None:
            m.gone_at = self.now

    def _instance(self, m: _Machine) -> Instance:
        state = (
            "terminated" if m.gone_at is not None else ("running" if m.ready_at <= self.now else "pending")
        )
        return Instance(m.name, f"sim://{m.name}", state, node_name=m.name)  # type: ignore[arg-type]


@dataclass(slots=True)
class ElasticResult:
    """A replay's result plus what the capacity cost: per pool node-hours and cost, nodes asked
    for, interruptions, and the GPU-seconds provisioned (utilization is allocated over them)."""

    replay: ReplayResult
    cost: float
    node_hours: dict[str, float]
    pool_cost: dict[str, float]
    launched: dict[str, int]
    interruptions: int
    interrupted_lost_gpu_seconds: float
    provisioned_gpu_seconds: float
    allocated_gpu_seconds: float
    plans: int = 0
    plan_seconds: float = 0.0
    peak_nodes: int = 0

    @property
    def utilization_pct(self) -> float:
        return (
            100.0 * self.allocated_gpu_seconds / self.provisioned_gpu_seconds
            if self.provisioned_gpu_seconds
            else 0.0
        )


class ElasticReplay(TimedReplay):
    """A timed replay on static nodes plus elastic pools (module doc)."""

    def __init__(
        self,
        jobs: PhillyJobs,
        cluster: ClusterConfig,
        queues: list[QueueConfig],
        spec: ReplaySpec,
        elastic: ElasticSpec,
    ) -> None:
        super().__init__(jobs, cluster, queues, spec)
        self.elastic = elastic
        self.provider = SimProvider()
        self.provider.pools = {p.name: p for p in elastic.pools}
        self.static = [f"node-{i:04d}" for i in range(cluster.nodes)]
        self.rng = np.random.default_rng(elastic.seed)
        # jobs no static node or pool could ever hold are dropped; the others wait for nodes
        largest = cluster.gpus + sum(p.gpus * p.max_nodes for p in elastic.pools)
        self.state[self.state == DROPPED] = FUTURE
        self.state[jobs.gpus > largest] = DROPPED
        self.node_gpus = max([cluster.gpus_per_node, *(p.gpus for p in elastic.pools)])
        self.heap: list[tuple[float, int, str, str]] = []
        self.seq = 0
        self.next_plan = 0.0
        self.plan_due = False
        self.empty_since: dict[str, float] = {}
        self._nodes: dict[str, Node] = {}  # the planner's view of each node, kept between plans
        self.launched: dict[str, int] = {p.name: 0 for p in elastic.pools}
        self.interruptions = 0
        self.spot_lost = 0.0
        self.plans = 0
        self.plan_seconds = 0.0
        self.peak_nodes = len(self.static)
        self.alloc_seconds = 0.0
        self.prov_seconds = 0.0
        self.clock_mark = 0.0
        self._rebuild()
        self._schedule_plan(0.0)

    # -- the replay's own events -------------------------------------------------------------

    def _next_event(self) -> float:
        t = self.heap[0][0] if self.heap else math.inf
        if self.plan_due:
            t = min(t, max(self.next_plan, self.now))
        return t

    def _events(self, t: float) -> bool:
        self.provider.now = t
        dirty = False
        while self.heap and self.heap[0][0] <= t:
            _, _, kind, name = heapq.heappop(self.heap)
            m = self.provider.machines[name]
            if m.gone_at is not None:
                continue
            if kind == "ready":
                m.up = True
                self._rebuild()
                dirty = True
            elif kind == "notice":
                dirty |= self._notice(m)
            elif kind == "gone":
                self._remove(m)
                dirty = True
        # The autoscaler decides after the scheduler's cycle at this instant (it reads its
        # verdicts, as in the control plane): a due decision makes the instant dirty.
        return dirty or (self.plan_due and t >= self.next_plan)

    def _cycles(self) -> bool:
        out = super()._cycles()
        if self.plan_due and self.now >= self.next_plan:
            self._autoscale()
        elif self._needs_plan():
            self._schedule_plan(self.now)
        return out

    def _needs_plan(self) -> bool:
        """Work waits, or a pool node is idle (it may have to go)."""
        if self.npending.sum():
            return True
        return any(
            m.gone_at is None and m.up and self._empty(m.name) for m in self.provider.machines.values()
        )

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0:
            self.alloc_seconds += float(self.used.sum()) * dt
            self.prov_seconds += self._gpus_up() * dt
        super()._advance(t)

    def _complete(self, j: int) -> None:
        super()._complete(j)
        self._schedule_plan(self.now)  # a node may have turned empty

    # -- autoscaling -------------------------------------------------------------------------

    def _schedule_plan(self, t: float) -> None:
        if not self.plan_due and self.elastic.pools:
            self.plan_due = True
            self.next_plan = max(t, self.next_plan)

    def _autoscale(self) -> None:
        """Plan and apply: ask for nodes, give idle ones back."""
        import time

        self.plan_due = False
        self.next_plan = self.now + self.elastic.autoscale_interval
        pools = self._pools()
        bins = self._bins()
        gangs = self._gangs()
        t0 = time.perf_counter()
        decided = plan(gangs, pools, bins, now=self.now)
        self.plan_seconds += time.perf_counter() - t0
        self.plans += 1
        for new in decided.launch:
            self._launch(next(p for p in self.elastic.pools if p.name == new.pool))
        for name, _why in decided.remove:
            m = self.provider.machines.get(name)
            if m is not None and self._empty(name):
                self._remove(m)
        if self._needs_plan():
            self._schedule_plan(self.next_plan)

    def _launch(self, pool: SimPool) -> None:
        self.launched[pool.name] += 1
        name = f"{pool.name}-{self.launched[pool.name]:05d}"
        at = None
        if pool.spot and self.elastic.spot_rate > 0:
            at = self.now + float(self.rng.exponential(3600.0 / self.elastic.spot_rate))
        self.provider.interrupt[name] = at
        self.provider.create(
            NodeRequest(
                name,
                pool.name,
                "spot" if pool.spot else "on-demand",
                pool.price,
                gpus=pool.gpus,
                gpu_model=pool.gpu_model,
                gpu_memory_bytes=0,
                cpu="0",
                memory="0",
                ready_in_seconds=pool.delay,
            )
        )
        m = self.provider.machines[name]
        self._push(m.ready_at, "ready", name)
        if at is not None and at > m.ready_at:
            self._push(max(m.ready_at, at - self.elastic.notice_seconds), "notice", name)
        elif at is not None:
            # interrupted before it came up: the cloud takes it back as it boots
            self._push(m.ready_at, "notice", name)

    def _notice(self, m: _Machine) -> bool:
        """The spot notice: cordon, evict its jobs (they keep their place), go at the deadline."""
        if not m.up:  # taken back while it booted
            self._remove(m)
            return False
        self.interruptions += 1
        m.draining = True
        for j in self._jobs_on(m.name):
            w = self.admitted_obj[j]
            before = float(self.lost[j])
            self._release(w)
            self._evict(j, "SpotInterrupted")
            self.spot_lost += float(self.lost[j]) - before
            self.stopping[j].eviction_time = None  # keeps its place: ordered by submission
        deadline = max(self.now, (m.interrupt_at or self.now))
        self._rebuild()
        if self._empty(m.name):
            self._remove(m)
        else:
            self._push(deadline, "gone", m.name)
        return True

    def _remove(self, m: _Machine) -> None:
        for j in self._jobs_on(m.name):  # the deadline came with jobs still on it
            w = self.admitted_obj[j]
            self._release(w)
            self._evict(j, "SpotInterrupted")
            self.stopping[j].eviction_time = None
        self.provider.delete(m.name)
        self.empty_since.pop(m.name, None)
        self._rebuild()

    # -- the planner's view --------------------------------------------------------------------

    def _pools(self) -> list[Pool]:
        alive: dict[str, int] = {}
        for m in self.provider.machines.values():
            if m.gone_at is None:
                alive[m.pool.name] = alive.get(m.pool.name, 0) + 1
        return [
            Pool(
                p.name,
                _node(f"{p.name}-template", p),
                price=p.price,
                max_nodes=p.max_nodes,
                min_nodes=p.min_nodes,
                nodes=alive.get(p.name, 0),
                spot=p.spot,
                weight=p.weight,
                ttl=p.ttl,
                eta=p.delay,
            )
            for p in self.elastic.pools
        ]

    def _bins(self) -> list[Bin]:
        out = []
        table = self.table
        free_rows = table.gpu_free.tolist()
        for i, name in enumerate(table.names):
            m = self.provider.machines.get(name)
            if m is not None and m.draining:
                continue
            gpus = [v for v in free_rows[i] if v >= 0]
            if m is not None:
                if sum(gpus) == GPU_MILLI * len(gpus):
                    self.empty_since.setdefault(name, self.now)
                else:
                    self.empty_since.pop(name, None)
            pool = m.pool.name if m else None
            out.append(
                Bin(
                    self._plain(name, len(gpus), m.pool.gpu_model if m else self.cluster.gpu_model),
                    {},
                    gpus,
                    pool=pool,
                    ready=True,
                    empty_since=self.empty_since.get(name) if m else None,
                    kind=(pool, len(gpus)),
                )
            )
        for m in self.provider.machines.values():
            if m.gone_at is None and not m.up:
                out.append(
                    Bin(
                        _node(m.name, m.pool),
                        {},
                        [GPU_MILLI] * m.pool.gpus,
                        pool=m.pool.name,
                        ready=False,
                        eta=max(0.0, m.ready_at - self.now),
                        kind=(m.pool.name, m.pool.gpus),
                    )
                )
        return out

    def _plain(self, name: str, gpus: int, model: str) -> Node:
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = Node(name, gpus=gpus, gpu_model=model)
        return node

    def _gangs(self) -> list[Gang]:
        out = []
        for j in np.flatnonzero(self.state == PENDING):
            w = self.pending_obj.get(int(j))
            if w is None:
                continue
            ps = w.pod_sets[0]
            out.append(
                Gang(
                    w.namespace,
                    w.name,
                    [PodSet(ps.name, ps.count, gpus=ps.gpus)],
                    priority=w.priority,
                    queue_time=w.queue_time,
                )
            )
        return out

    # -- nodes ----------------------------------------------------------------------------------

    def _rebuild(self) -> None:
        """The node table of the nodes up now, charged with the running jobs."""
        nodes = [
            Node(n, gpus=self.cluster.gpus_per_node, gpu_model=self.cluster.gpu_model) for n in self.static
        ]
        for m in self.provider.machines.values():
            if m.up and m.gone_at is None:
                nodes.append(_node(m.name, m.pool, unschedulable=m.draining))
        table = NodeTable.from_nodes(nodes)
        for w in self.admitted_obj.values():
            for ps in w.pod_sets:
                for pod in ps.pods:
                    if pod.node in table.index:
                        milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                        bind_pod(table, table.index[pod.node], ps.requests, pod.gpus, milli)
        self.table = table
        self.peak_nodes = max(self.peak_nodes, len(nodes))

    def _jobs_on(self, node: str) -> list[int]:
        return [
            j
            for j, w in self.admitted_obj.items()
            if self.state[j] == RUNNING and any(p.node == node for ps in w.pod_sets for p in ps.pods)
        ]

    def _empty(self, node: str) -> bool:
        """No job on the node: every GPU of it is free (every job here asks for GPUs)."""
        i = self.table.index.get(node)
        if i is None:
            return not self._jobs_on(node)
        return bool(self.table.full_free[i] == self.table.gpu_total[i])

    def _gpus_up(self) -> int:
        up = sum(
            m.pool.gpus
            for m in self.provider.machines.values()
            if m.gone_at is None and m.ready_at <= self.now
        )
        return up + self.cluster.gpus

    def _push(self, t: float, kind: str, name: str) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, name))

    # -- results ----------------------------------------------------------------------------------

    def run_elastic(self) -> ElasticResult:
        result = self.run()
        end = result.end_time
        node_hours: dict[str, float] = {}
        pool_cost: dict[str, float] = {}
        for m in self.provider.machines.values():
            until = m.gone_at if m.gone_at is not None else end
            hours = max(0.0, until - m.asked) / 3600.0
            node_hours[m.pool.name] = node_hours.get(m.pool.name, 0.0) + hours
            pool_cost[m.pool.name] = pool_cost.get(m.pool.name, 0.0) + hours * m.pool.price
        static_hours = len(self.static) * end / 3600.0
        if self.static:
            node_hours["(static)"] = static_hours
            pool_cost["(static)"] = static_hours * self.elastic.static_price
        return ElasticResult(
            replay=result,
            cost=sum(pool_cost.values()),
            node_hours=node_hours,
            pool_cost=pool_cost,
            launched=dict(self.launched),
            interruptions=self.interruptions,
            interrupted_lost_gpu_seconds=self.spot_lost,
            provisioned_gpu_seconds=self.prov_seconds,
            allocated_gpu_seconds=self.alloc_seconds,
            plans=self.plans,
            plan_seconds=self.plan_seconds,
            peak_nodes=self.peak_nodes,
        )


def _node(name: str, pool: SimPool, unschedulable: bool = False) -> Node:
    return Node(
        name,
        labels={POOL_LABEL: pool.name},
        gpus=pool.gpus,
        gpu_model=pool.gpu_model,
        unschedulable=unschedulable,
    )


def peak_demand(jobs: PhillyJobs) -> int:
    """The most GPUs the jobs ask for at once if each ran from its submission: what a fixed
    cluster must have for no job to wait."""
    events: list[tuple[float, int]] = []
    for s, d, g in zip(jobs.submit.tolist(), jobs.duration.tolist(), jobs.gpus.tolist(), strict=True):
        events.append((s, g))
        events.append((s + d, -g))
    events.sort(key=lambda e: (e[0], e[1]))
    now = best = 0
    for _, g in events:
        now += g
        best = max(best, now)
    return best


def pools_from(docs: Iterable[dict]) -> list[SimPool]:
    """NodePool wire dicts (validated) as the replay's pools."""
    out = []
    for doc in docs:
        spec = doc["spec"]
        template = spec.get("template") or {}
        out.append(
            SimPool(
                name=doc["metadata"]["name"],
                gpus=int(template.get("gpus") or 0),
                price=float(spec.get("pricePerHour") or 0.0),
                max_nodes=int(spec.get("maxNodes", 10)),
                min_nodes=int(spec.get("minNodes") or 0),
                spot=spec.get("capacityType") == "spot",
                delay=float(spec.get("provisioningDelaySeconds", 60.0)),
                ttl=float((spec.get("consolidation") or {}).get("ttlSecondsAfterEmpty", 300.0)),
                weight=int(spec.get("weight") or 0),
                gpu_model=str(template.get("gpuModel") or "V100"),
            )
        )
    return out
