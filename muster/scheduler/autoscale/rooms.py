"""What the planner fills: the pods of a gang (:class:`PlanPod`), room on a node being filled
(:class:`Room`), the open rooms of one class (:class:`OpenRooms`), a way to place a gang
(:class:`Way`), and the static checks of a pod against a node."""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass

from muster.scheduler.autoscale.model import Bin, Gang, Pool, ScalePlan
from muster.scheduler.snapshot import GPU, GPU_MILLI, Flavor, Node, PodSet

BLOCKING = ("NoSchedule", "NoExecute")


@dataclass(slots=True, eq=False)
class PlanPod:
    """One pod to place: its pod set and flavors (static checks), requests and GPU demand."""

    pod_set: PodSet
    flavors: tuple[Flavor, ...]
    requests: tuple[tuple[str, int], ...]
    gpus: int
    milli: int
    memory: int  # bytes of one GPU, for memory-sized shares
    key: tuple  # everything the static checks read
    kid: int = -1  # ``key`` interned by the planner (cheap to hash)
    pid: int = -1  # ``key[:4]`` (what the placement checks read) interned by the planner
    anti: bool = False  # one per node per gang (the pod set's anti-affinity)
    whole: bool = False  # whole devices, not shares

    def __post_init__(self) -> None:
        self.anti = self.pod_set.anti_affinity
        self.whole = self.milli >= GPU_MILLI and not self.memory


class Room:
    """Room being filled by the plan: free resources and devices, and the gangs on it."""

    __slots__ = (
        "cls",
        "eta",
        "free",
        "gpu",
        "launch",
        "max_free",
        "node",
        "pool",
        "ready",
        "slot",
        "source",
        "users",
        "whole",
    )

    def __init__(self, node: Node, free: dict[str, int], gpu: list[int], pool: str | None, cls: int) -> None:
        self.node = node
        self.free = free
        self.gpu = gpu
        self.pool = pool
        self.ready = False
        self.eta = 0.0
        self.source: Bin | None = None  # None for a node this plan launches
        self.launch = -1  # its index in ScalePlan.launch
        self.slot = -1  # its index in Planner.rooms
        self.users: set[str] = set()
        # Rooms of one class look the same to the static checks (labels, taints, GPUs, pool).
        self.cls = cls
        self.whole = gpu.count(GPU_MILLI)  # devices entirely free
        self.max_free = max(gpu, default=0)  # the most free milli on one device

    @property
    def name(self) -> str:
        return self.node.name if self.source is not None else f"{self.pool}#{self.launch}"

    def fits(self, pod: PlanPod, gang: str) -> bool:
        if pod.anti and gang in self.users:
            return False
        free = self.free
        for r, v in pod.requests:
            if free.get(r, 0) < v:
                return False
        if not pod.gpus:
            return True
        if pod.whole:
            return self.whole >= pod.gpus
        need = share_milli(pod, self.node)
        return need <= self.max_free

    def take(self, pod: PlanPod, gang: str) -> None:
        free = self.free
        for r, v in pod.requests:
            free[r] = free.get(r, 0) - v
        if pod.gpus:
            gpu = self.gpu
            if pod.whole:
                # the first whole devices are taken; while whole ones are left, the most free
                # on one device is what it was
                taken = min(pod.gpus, self.whole)
                i = -1
                for _ in range(taken):
                    i = gpu.index(GPU_MILLI, i + 1)
                    gpu[i] = 0
                self.whole -= taken
                if not self.whole:
                    self.max_free = max(gpu, default=0)
            else:
                need = share_milli(pod, self.node)
                best = min((d, i) for i, d in enumerate(gpu) if d >= need)[1]
                gpu[best] -= need
                self.whole = gpu.count(GPU_MILLI)
                self.max_free = max(gpu, default=0)
        self.users.add(gang)

    def copy(self, users: set[str] | None = None) -> Room:
        """An independent copy (with ``users`` in place of the gangs on it, if given)."""
        other = Room.__new__(Room)  # the derived counts are copied, not counted again
        other.node, other.free, other.gpu, other.pool, other.cls = (
            self.node,
            self.free.copy(),
            self.gpu.copy(),
            self.pool,
            self.cls,
        )
        other.ready, other.eta, other.source = self.ready, self.eta, self.source
        other.launch, other.slot, other.whole, other.max_free = (
            self.launch,
            self.slot,
            self.whole,
            self.max_free,
        )
        other.users = set(self.users) if users is None else users
        return other

    def keep(self, other: Room) -> None:
        """Take the state of ``other`` (a copy that placed pods)."""
        self.free, self.gpu, self.users = other.free, other.gpu, other.users
        self.whole, self.max_free = other.whole, other.max_free


class OpenRooms:
    """The rooms of one class that may still take a pod, bucketed by their whole free GPUs, so
    a pod asking for g GPUs looks only at rooms with at least g (fewest first: best fit)."""

    __slots__ = ("all_ready", "buckets", "keys", "most", "pool", "sample")

    def __init__(self, sample: Room) -> None:
        self.sample = sample  # any room of the class (the static checks read its node)
        self.pool = sample.pool
        self.buckets: dict[int, list[Room]] = {}
        self.keys: list[int] = []  # the buckets' keys, sorted
        self.most = -1  # the most whole GPUs free on one open room (-1: no open room)
        self.all_ready = True  # no room that is not Ready was ever added

    def add(self, room: Room) -> None:
        if not room.ready:
            self.all_ready = False
        if room.max_free > 0 or not room.node.gpus:
            members = self.buckets.get(room.whole)
            if members is None:
                self.buckets[room.whole] = [room]
                insort(self.keys, room.whole)
                if room.whole > self.most:
                    self.most = room.whole
            else:
                members.append(room)

    def moved(self, room: Room, was: int) -> None:
        """``room`` had ``was`` whole GPUs free before a commit."""
        members = self.buckets.get(was)
        if members is not None and room in members:
            members.remove(room)
            if not members:
                del self.buckets[was]
                self.keys.remove(was)
                self.most = self.keys[-1] if self.keys else -1
        self.add(room)


@dataclass(slots=True)
class Way:
    """One way to place a gang: its rank, the rooms it changes (copies) and the new nodes (shared
    by the gangs that need the same: copied when the way is taken)."""

    rank: tuple
    changed: list[Room]
    pool: str
    new: list[Room]


def statics(node: Node) -> tuple:
    """What the static checks read of a node (two nodes alike here are alike to them)."""
    return (
        tuple(sorted(node.labels.items())),
        node.taints,
        node.gpus,
        node.gpu_model,
        node.gpu_memory,
        tuple(sorted(node.allocatable)),
    )


def launched_per_pool(out: ScalePlan) -> dict[str, int]:
    """New nodes planned so far, per pool."""
    counts: dict[str, int] = {}
    for n in out.launch:
        counts[n.pool] = counts.get(n.pool, 0) + 1
    return counts


def fresh(pool: Pool, cls: int) -> Room:
    t = pool.template
    room = Room(t, {r: v for r, v in t.allocatable.items() if r != GPU}, [GPU_MILLI] * t.gpus, pool.name, cls)
    room.eta = pool.eta
    return room


def pods_of(gang: Gang, option: list[tuple[Flavor, ...]]) -> list[PlanPod]:
    pods = []
    for i, ps in enumerate(gang.pod_sets):
        flavors = tuple(option[i]) if i < len(option) else ()
        requests = tuple(sorted((r, v) for r, v in ps.requests.items() if v and r != GPU))
        memory = ps.gpu_memory if ps.gpus else 0
        key = (
            tuple(sorted(ps.node_selector.items())),
            ps.node_affinity,
            ps.tolerations,
            tuple(f.name for f in flavors),  # what the placement checks read ends here
            ps.gpu_models if ps.gpus else (),
            tuple(r for r, _ in requests),
            ps.gpus,
            memory,
        )
        pod = PlanPod(ps, flavors, requests, ps.gpus, ps.gpu_milli if ps.gpus else 0, memory, key)
        pods.extend([pod] * ps.count)
    if len(gang.pod_sets) > 1:  # largest first; one pod set is one kind of pod
        pods.sort(key=lambda p: (-(p.gpus * min(p.milli, GPU_MILLI)), -sum(v for _, v in p.requests)))
    return pods


def shape_of(gang: Gang, option: list[tuple[Flavor, ...]]) -> tuple:
    """Everything of a gang and flavor option that the planner reads (taken once per gang: a
    plain loop, dict items sorted only when there are several)."""
    key = []
    for ps in gang.pod_sets:
        req, sel = ps.requests, ps.node_selector
        key.append(
            (
                ps.count,
                tuple(sorted(req.items())) if len(req) > 1 else tuple(req.items()),
                ps.gpus,
                ps.gpu_milli,
                ps.gpu_memory,
                ps.gpu_models,
                tuple(sorted(sel.items())) if len(sel) > 1 else tuple(sel.items()),
                ps.node_affinity,
                ps.tolerations,
                ps.topology_required,
                ps.anti_affinity,
            )
        )
    names = tuple(tuple(f.name for f in fl) for fl in option) if gang.options else ((),) * len(key)
    return (tuple(key), names)


def topology_of(gang: Gang) -> str | None:
    return next((ps.topology_required for ps in gang.pod_sets if ps.topology_required), None)


def share_milli(pod: PlanPod, node: Node) -> int:
    if pod.memory:
        if node.gpu_memory < pod.memory or node.gpu_memory <= 0:
            return GPU_MILLI + 1
        return -(-pod.memory * GPU_MILLI // node.gpu_memory)
    return pod.milli


def placement_problem(pod: PlanPod, node: Node) -> str:
    """Why the pod can never go to ``node`` ("" when it may), by the scheduler's static filters
    that read the pod's labels, affinity and tolerations (``key[:4]``); :func:`resource_problem`
    has the others."""
    ps = pod.pod_set
    wanted: dict[str, str] = {}
    for f in pod.flavors:
        wanted.update(f.node_labels)
    wanted.update(ps.node_selector)
    for k, v in wanted.items():
        if node.labels.get(k) != v:
            return f"its nodes lack the label {k}={v}"
    if ps.node_affinity and not any(t.matches(node.labels) for t in ps.node_affinity):
        return "its nodes do not match the pods' required node affinity"
    tolerations = ps.tolerations + tuple(t for f in pod.flavors for t in f.tolerations)
    for taint in node.taints:
        if taint.effect in BLOCKING and not any(t.tolerates(taint) for t in tolerations):
            return f"the pods do not tolerate its taint {taint}"
    return ""


def resource_problem(pod: PlanPod, node: Node) -> str:
    """The static filters that read the pod's GPUs and the names of its requests."""
    ps = pod.pod_set
    if pod.gpus:
        if node.gpus < pod.gpus:
            return f"its nodes have {node.gpus} GPU(s) and a pod needs {pod.gpus}"
        if ps.gpu_models and node.gpu_model not in ps.gpu_models:
            return f"its GPU model {node.gpu_model or '(none)'} is not one of {', '.join(ps.gpu_models)}"
        if pod.memory and node.gpu_memory < pod.memory:
            return "its GPUs have too little memory for the pods' share"
    for r, _ in pod.requests:
        if r not in node.allocatable:
            return f"its nodes offer no {r}"
    return ""
