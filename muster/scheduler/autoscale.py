"""The autoscaler's decision: which nodes to ask of which pools, and which idle ones to give back.

Pure, like the rest of the core (no I/O, no clock: ``now`` is passed in), so the control plane
and the simulator run the same decision and a benchmark can time it. Decide-then-apply, as in
Ray's autoscaler v2: :func:`plan` reads the cluster and the *scheduler's own verdicts* (the
gangs it left pending because no node could take them) and returns a :class:`ScalePlan`; the
caller applies it (writes NodeClaims and events, asks providers).

**Scale up.** Gangs are taken in queue order (priority, then queue time). Each is placed, pod
by pod (largest first), on the room there is: free room on Ready nodes, nodes coming up, and
nodes this plan already asked for (so two 4-GPU jobs share one new 8-GPU node). Whatever is
left goes onto new nodes of *one* pool (new nodes of one pool share its topology labels, so a
gang stays in one zone or rack), the pool chosen as Karpenter chooses: highest ``weight``
first, then spot where the gang tolerates it (the spot taint), then the lowest cost of the
nodes needed, then the fewest nodes, then the name. A gang needing a topology level the
pool's template does not label (per-node levels such as the hostname) must fit one node. A
gang the scheduler could not place on the Ready nodes is never planned onto them alone: the
scheduler's verdict wins over this simpler arithmetic. Pools below ``min_nodes`` are topped
up.

**Scale down.** A node of a pool that is empty (nothing runs there), planned for no gang, and
has been empty for the pool's TTL is removed, oldest-empty first, as long as the pool keeps
``min_nodes``.

Speed: gangs are grouped by shape (pod sets, flavors); per shape the pools that could host
it are ranked once, and the nodes one pool needs for a shape are computed once, so a plan for
1,000 pending gangs and 50 pools takes milliseconds (``benchmarks/autoscale_decision.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from muster.scheduler.snapshot import GPU, GPU_MILLI, Flavor, Node, PodSet

__all__ = ["Bin", "Gang", "NewNode", "Pool", "ScalePlan", "plan"]

_BLOCKING = ("NoSchedule", "NoExecute")


@dataclass(slots=True)
class Pool:
    """A NodePool as the planner sees it. ``template`` is one of its nodes once up (labels
    as the node will carry them); ``nodes`` counts its nodes that exist or are coming up;
    ``limits``/``usage`` (units) cap the pool's totals (``nvidia.com/gpu`` in milli-GPU);
    ``ttl`` is how long a node may stay empty; ``eta`` how long a node takes to come up."""

    name: str
    template: Node
    price: float
    max_nodes: int
    min_nodes: int = 0
    nodes: int = 0
    spot: bool = False
    weight: int = 0
    limits: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    ttl: float = 300.0
    eta: float = 0.0

    def headroom(self) -> int:
        """How many more nodes the pool may make."""
        room = self.max_nodes - self.nodes
        per = _template_totals(self.template)
        for r, limit in self.limits.items():
            each = per.get(r, 0)
            if each > 0:
                room = min(room, (limit - self.usage.get(r, 0)) // each)
        return max(room, 0)


@dataclass(slots=True)
class Bin:
    """Room on a node: a Ready node's free resources, or a node coming up (``ready`` False,
    ``eta`` seconds from now). ``node`` holds labels, taints and GPUs; ``free`` the free
    units of the other resources; ``gpu_free`` each device's free milli-GPU. ``empty_since``
    (a pool node with nothing on it) lets the planner remove it. ``kind`` may name what the
    static checks read of the node (labels, taints, GPUs), so that bins of one kind are checked
    once; two bins of one kind must agree on those (None: the planner reads them)."""

    node: Node
    free: dict[str, int]
    gpu_free: list[int]
    pool: str | None = None
    ready: bool = True
    eta: float = 0.0
    empty_since: float | None = None
    kind: tuple | None = None  # what the static checks read of ``node``, when the caller knows it


@dataclass(slots=True)
class Gang:
    """A pending workload the scheduler found no room for. ``options`` are the flavor choices
    the scheduler tried (per option, per pod set, the flavors of its resources); empty means
    no flavor constraint."""

    namespace: str
    name: str
    pod_sets: list[PodSet]
    priority: int = 0
    queue_time: float = 0.0
    options: list[list[tuple[Flavor, ...]]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class NewNode:
    """One node to ask of ``pool``, and the gangs planned onto it (empty: for minNodes)."""

    pool: str
    gangs: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ScalePlan:
    """What to do. ``launch``: new nodes; ``waits``: per gang, the nodes it waits for (names of
    nodes coming up, or ``"<pool>#<i>"`` for the i-th of ``launch``); ``unplaceable``: per gang,
    why no pool can make room for it; ``remove``: idle nodes to give back, with the reason."""

    launch: list[NewNode] = field(default_factory=list)
    waits: dict[str, list[str]] = field(default_factory=dict)
    unplaceable: dict[str, str] = field(default_factory=dict)
    remove: list[tuple[str, str]] = field(default_factory=list)


def plan(
    gangs: Sequence[Gang],
    pools: Sequence[Pool],
    bins: Sequence[Bin],
    now: float = 0.0,
    *,
    ready_verdict: bool = True,
) -> ScalePlan:
    """Decide the scale-up for ``gangs`` and the scale-down of idle pool nodes (module doc).

    ``ready_verdict`` False drops the rule that a gang the scheduler could not place is never
    planned onto Ready nodes alone: for gangs that run (may they move elsewhere?), and for
    verdicts older than a Ready node (the scheduler has not seen its room yet). Nothing
    passed in is changed."""
    planner = _Planner(pools, bins, ready_verdict)
    out = ScalePlan()
    for gang in sorted(gangs, key=lambda g: (-g.priority, g.queue_time, g.namespace, g.name)):
        planner.place(gang, out)
    planner.top_up(out)
    out.remove = planner.idle(now, out)
    return out


# -- internals -----------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Pod:
    """One pod to place: its pod set and flavors (static checks), requests and GPU demand."""

    pod_set: PodSet
    flavors: tuple[Flavor, ...]
    requests: tuple[tuple[str, int], ...]
    gpus: int
    milli: int
    memory: int  # bytes of one GPU, for memory-sized shares
    key: tuple  # everything the static checks read
    kid: int = -1  # ``key`` interned by the planner (cheap to hash)

    @property
    def anti(self) -> bool:
        return self.pod_set.anti_affinity

    @property
    def whole(self) -> bool:
        return self.milli >= GPU_MILLI and not self.memory


class _Room:
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
        self.slot = -1  # its index in _Planner.rooms
        self.users: set[str] = set()
        # Rooms of one class look the same to the static checks (labels, taints, GPUs, pool).
        self.cls = cls
        self.whole = gpu.count(GPU_MILLI)  # devices entirely free
        self.max_free = max(gpu, default=0)  # the most free milli on one device

    @property
    def name(self) -> str:
        return self.node.name if self.source is not None else f"{self.pool}#{self.launch}"

    def fits(self, pod: _Pod, gang: str) -> bool:
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
        need = _share_milli(pod, self.node)
        return need <= self.max_free

    def take(self, pod: _Pod, gang: str) -> None:
        for r, v in pod.requests:
            self.free[r] = self.free.get(r, 0) - v
        if pod.gpus:
            if pod.whole:
                left = pod.gpus
                for i, d in enumerate(self.gpu):
                    if left and d == GPU_MILLI:
                        self.gpu[i] = 0
                        left -= 1
            else:
                need = _share_milli(pod, self.node)
                best = min((d, i) for i, d in enumerate(self.gpu) if d >= need)[1]
                self.gpu[best] -= need
            self.whole = self.gpu.count(GPU_MILLI)
            self.max_free = max(self.gpu, default=0)
        self.users.add(gang)

    def copy(self) -> _Room:
        other = _Room(self.node, dict(self.free), list(self.gpu), self.pool, self.cls)
        other.ready, other.eta, other.source = self.ready, self.eta, self.source
        other.launch, other.slot, other.users = self.launch, self.slot, set(self.users)
        return other

    def keep(self, other: _Room) -> None:
        """Take the state of ``other`` (a copy that placed pods)."""
        self.free, self.gpu, self.users = other.free, other.gpu, other.users
        self.whole, self.max_free = other.whole, other.max_free

    def has_room(self) -> bool:
        return self.max_free > 0 or not self.node.gpus


class _Open:
    """The rooms of one class that may still take a pod, bucketed by their whole free GPUs, so
    a pod asking for g GPUs looks only at rooms with at least g (fewest first: best fit)."""

    __slots__ = ("buckets", "most", "pool", "sample")

    def __init__(self, sample: _Room) -> None:
        self.sample = sample  # any room of the class (the static checks read its node)
        self.pool = sample.pool
        self.buckets: dict[int, list[_Room]] = {}
        self.most = -1  # the most whole GPUs free on one open room (-1: no open room)

    def add(self, room: _Room) -> None:
        if room.has_room():
            self.buckets.setdefault(room.whole, []).append(room)
            self.most = max(self.most, room.whole)

    def moved(self, room: _Room, was: int) -> None:
        """``room`` had ``was`` whole GPUs free before a commit."""
        members = self.buckets.get(was)
        if members is not None and room in members:
            members.remove(room)
            if not members:
                del self.buckets[was]
                self.most = max(self.buckets, default=-1)
        self.add(room)

    def may_fit(self, pod: _Pod) -> bool:
        return self.most >= (pod.gpus if pod.gpus and pod.whole else 0)

    def candidates(self, pod: _Pod) -> Iterator[_Room]:
        need = pod.gpus if pod.gpus and pod.whole else 0
        for k in sorted(self.buckets):
            if k >= need:
                yield from self.buckets[k]


@dataclass(slots=True)
class _Way:
    """One way to place a gang: its rank, the rooms it changes (copies) and the new nodes."""

    rank: tuple
    changed: list[_Room]
    pool: str
    new: list[_Room]


class _Planner:
    def __init__(self, pools: Sequence[Pool], bins: Sequence[Bin], ready_verdict: bool = True) -> None:
        self.ready_verdict = ready_verdict
        self.pools = {p.name: p for p in pools}
        self._ids: dict[tuple, int] = {}
        self.classes = {p.name: self._intern((p.name, _statics(p.template))) for p in pools}
        self.headroom = {p.name: p.headroom() for p in pools}
        self.rooms: list[_Room] = []
        self._added = 0  # rooms opened so far
        self._nofit: dict[tuple, int] = {}  # pod kind -> rooms opened when it last found no room
        self._hopeless: dict[tuple, tuple] = {}  # gang shapes -> (what it depends on, its state, why)
        self._class_added: dict[int, int] = {}  # rooms opened per class
        for b in bins:
            room = _Room(
                b.node, dict(b.free), list(b.gpu_free), b.pool, self._intern((b.pool, _statics(b.node)))
            )
            room.ready, room.eta, room.source, room.slot = b.ready, b.eta, b, len(self.rooms)
            self.rooms.append(room)
        self.open: dict[int, _Open] = {}  # rooms that may take a pod, by class
        for room in self.rooms:
            self._opened(room)
        for pool in pools:  # every class a new room can have is known from the start
            if self.classes[pool.name] not in self.open:
                self.open[self.classes[pool.name]] = _Open(_fresh(pool, self.classes[pool.name]))
        self.planned: set[str] = set()  # existing nodes some gang is planned onto
        self._static: dict[tuple, str] = {}
        self._ranked: dict[tuple, tuple[list[tuple[tuple, str]], list[str]]] = {}
        self._counts: dict[tuple, int | None] = {}
        self._fits: dict[tuple, int] = {}
        self._compat: dict[int, tuple[list[int], list[int]]] = {}
        self._option_cache: dict[tuple, list[tuple]] = {}

    # -- scale up ------------------------------------------------------------------------------

    def place(self, gang: Gang, out: ScalePlan) -> None:
        options = gang.options or [[() for _ in gang.pod_sets]]
        shapes = tuple(_shape(gang, option) for option in options)
        hopeless = self._hopeless.get(shapes)
        if hopeless is not None and self._still_hopeless(*hopeless[:2]):
            # No room of a class it may use was opened, and no pool it may use changed its
            # headroom, since a gang of this shape found no way: it finds none either.
            out.unplaceable[gang.key] = hopeless[2]
            return
        best: _Way | None = None
        why: list = []  # reasons (tuples, worded when needed) why pools cannot take it
        for option, shape in zip(options, shapes, strict=True):
            way = self._way(gang, option, shape, why)
            if way is not None and (best is None or way.rank < best.rank):
                best = way
        if best is None:
            reason = (
                "; ".join(dict.fromkeys(self._say(w) for w in why)) or "no NodePool can make a node for it"
            )
            out.unplaceable[gang.key] = reason
            need: dict[str, float] = {}  # per pool, the fewest new nodes it would have needed
            for w in why:
                if isinstance(w, tuple):
                    count = float("inf") if w[0] == "topology" else w[2]
                    need[w[1]] = min(need.get(w[1], float("inf")), count)
            classes = self._deps(gang, options)
            self._hopeless[shapes] = (classes, (self._added_in(classes), need), reason)
            return
        waits: list[str] = []
        for changed in best.changed:
            live = self.rooms[changed.slot]
            was = live.whole
            live.keep(changed)
            self.open[live.cls].moved(live, was)
            if live.source is not None:
                self.planned.add(live.name)
            else:
                out.launch[live.launch].gangs.append(gang.key)
            if not live.ready:
                waits.append(live.name)
        for room in best.new:
            room.launch, room.slot = len(out.launch), len(self.rooms)
            out.launch.append(NewNode(best.pool, [gang.key]))
            self.rooms.append(room)
            self._opened(room)
            waits.append(room.name)
        if best.new:
            self.headroom[best.pool] -= len(best.new)
        out.waits[gang.key] = list(dict.fromkeys(waits))

    def _say(self, why: str | tuple) -> str:
        """A reason a pool cannot take a gang, in words."""
        if isinstance(why, str):
            return why
        if why[0] == "topology":
            return f"pool {why[1]}: one of its nodes cannot hold the whole gang (topology {why[2]})"
        pool = self.pools[why[1]]
        limits = ", or its resource limits" if pool.limits else ""
        return (
            f"pool {why[1]} would need {why[2]} more node(s) and may make {why[3]} "
            f"({pool.nodes} of at most {pool.max_nodes}{limits})"
        )

    def _way(self, gang: Gang, option: list[tuple[Flavor, ...]], shape: tuple, why: list) -> _Way | None:
        pods = _pods(gang, option)
        topology = _topology(gang)
        ranked = self._ranking(shape, pods, why)
        if topology is None:
            way = self._onto_rooms(gang, pods, ready=True)
            if self.ready_verdict and not way.new and way.changed and all(r.ready for r in way.changed):
                # Everything fits the Ready nodes by this arithmetic, yet the scheduler found
                # no room there: its verdict wins, so plan without the Ready nodes.
                way = self._onto_rooms(gang, pods, ready=False)
            if not way.new:
                return _Way((0,), way.changed, "", [])
            return self._new_nodes(shape if not way.changed else None, ranked, way, gang, False, why)
        # A topology level: one pool's nodes (coming up or new) share its domain, so the gang
        # goes to one pool; a level the pool does not label (the hostname) means one node.
        found: list[_Way] = []
        for rank, name in ranked:
            per_node = topology not in self.pools[name].template.labels
            way = self._onto(gang, pods, self._pool_classes(name), ready=False)
            if per_node and way.changed and (way.new or len(way.changed) > 1):
                way = _Way((), [], "", pods)
            if not way.new:
                return _Way((0,), way.changed, "", [])
            pick = self._new_nodes(
                shape if not way.changed else None, [(rank, name)], way, gang, per_node, why, topology
            )
            if pick is not None:
                found.append(pick)
        return min(found, key=lambda w: w.rank) if found else None

    def _new_nodes(
        self,
        shape: tuple | None,
        ranked: list[tuple[tuple, str]],
        way: _Way,
        gang: Gang,
        per_node: bool,
        why: list,
        topology: str | None = None,
    ) -> _Way | None:
        """The best pool for the pods ``way`` left: by rank, then the cost of the nodes needed,
        then their number, then the name; among the pools with room for them."""
        best: tuple | None = None
        for key in self._options(shape, ranked, way.new, gang.key, per_node):
            count, name = key[-2], key[-1]
            if count is None:
                why.append(("topology", name, topology))  # worded only if it ends unplaceable
                continue
            if count > self.headroom[name]:
                why.append(("headroom", name, count, self.headroom[name]))
                continue
            best = key  # the options come best first
            break
        if best is None:
            return None
        name = best[-1]
        pack = self._pack(way.new, name, gang.key)
        return _Way(best, way.changed, name, pack)

    def _options(
        self,
        shape: tuple | None,
        ranked: list[tuple[tuple, str]],
        pods: list[_Pod],
        gang: str,
        per_node: bool,
    ) -> list[tuple]:
        """Every pool's way to hold ``pods`` on new nodes, best first (rank, cost, nodes, name;
        the count None where it cannot); cached per gang shape."""
        key = (shape, per_node)
        hit = self._option_cache.get(key) if shape is not None else None
        if hit is None:
            options = []
            for rank, name in ranked:
                count = self._count(shape, pods, name, gang, per_node)
                cost = float("inf") if count is None else self.pools[name].price * count
                options.append((1, *rank, cost, count if count is not None else 1 << 30, name))
            options.sort()
            hit = [(*o[:-2], None if o[-2] == 1 << 30 else o[-2], o[-1]) for o in options]
            if shape is not None:
                self._option_cache[key] = hit
        return hit

    def _onto_rooms(self, gang: Gang, pods: list[_Pod], ready: bool) -> _Way:
        return self._onto(gang, pods, self.open, ready)

    def _onto(self, gang: Gang, pods: list[_Pod], classes: dict[int, _Open], ready: bool) -> _Way:
        """Place what fits on the open rooms of ``classes`` (Ready ones too when ``ready``);
        the rooms changed are copies; ``new`` holds the pods left."""
        copies: dict[int, _Room] = {}
        left: list[_Pod] = []
        failed: set[int] = set()  # pods like one that found no room find none either
        spent: dict[int, set[int]] = {}  # per kind of pod, classes with no room left for it
        for pod in pods:
            nofit = (pod.kid, pod.requests, pod.milli, pod.memory, ready) if classes is self.open else None
            if id(pod) in failed or (nofit is not None and self._nofit.get(nofit) == self._added):
                left.append(pod)
                continue
            placed = False
            skip = spent.setdefault(id(pod), set())
            for cls in self._compatible(pod):
                opened = classes.get(cls)
                if opened is None or cls in skip or not opened.may_fit(pod):
                    continue
                for room in opened.candidates(pod):
                    if room.ready and not ready:
                        continue
                    trial = copies.get(room.slot) or room
                    if trial.fits(pod, gang.key):
                        if trial is room:
                            trial = copies[room.slot] = room.copy()
                        trial.take(pod, gang.key)
                        placed = True
                        break
                if placed:
                    break
                skip.add(cls)  # rooms only lose room while the gang is placed
            if not placed:
                failed.add(id(pod))
                if not copies and nofit is not None:  # a fact about the open rooms, not this gang
                    self._nofit[nofit] = self._added
                left.append(pod)
        return _Way((), list(copies.values()), "", left)  # type: ignore[arg-type]

    def _pool_classes(self, pool: str) -> dict[int, _Open]:
        """The open rooms of ``pool`` by class (a pool's nodes are of one class)."""
        cls = self.classes[pool]
        return {cls: self.open[cls]} if cls in self.open else {}

    def _compatible(self, pod: _Pod) -> list[int]:
        """The classes of rooms the pod may ever go to (cached per kind of pod)."""
        if pod.kid < 0:
            pod.kid = self._intern(pod.key)
        hit = self._compat.get(pod.kid)
        if hit is None or len(hit[0]) != len(self.open):
            known = list(self.open)
            hit = self._compat[pod.kid] = (
                known,
                [c for c in known if not self._problem(pod, self.open[c].sample.node, c)],
            )
        return hit[1]

    def _opened(self, room: _Room) -> None:
        opened = self.open.get(room.cls)
        if opened is None:
            opened = self.open[room.cls] = _Open(room)
        opened.add(room)
        self._added += 1  # rooms only lose room otherwise: a pod that found none may find this
        self._class_added[room.cls] = self._class_added.get(room.cls, 0) + 1

    def _deps(self, gang: Gang, options: list[list[tuple[Flavor, ...]]]) -> tuple[int, ...]:
        """The classes of rooms a gang could ever use (whatever its counts)."""
        classes: dict[int, None] = {}
        for option in options:
            for pod in dict.fromkeys(_pods(gang, option)):
                classes.update(dict.fromkeys(self._compatible(pod)))
        return tuple(classes)

    def _added_in(self, classes: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self._class_added.get(c, 0) for c in classes)

    def _still_hopeless(self, classes: tuple[int, ...], state: tuple) -> bool:
        """No room of those classes was opened since, and every pool still has less headroom
        than the nodes it would need (headroom only shrinks, needs only grow as rooms fill)."""
        added, need = state
        if self._added_in(classes) != added:
            return False
        return all(self.headroom.get(name, 0) < count for name, count in need.items())

    def _ranking(self, shape: tuple, pods: list[_Pod], why: list) -> list[tuple[tuple, str]]:
        """Pools that could ever host the gang, with their rank: weight first, then spot."""
        for pod in pods:
            if pod.kid < 0:
                pod.kid = self._intern(pod.key)
        # which pools may host it depends on its kinds of pod, not on how many there are
        shape = tuple(sorted({(p.kid, p.requests, p.milli) for p in pods}))
        hit = self._ranked.get(shape)
        if hit is None:
            ranked = [
                ((-pool.weight, 0 if pool.spot else 1), pool.name)
                for pool in self.pools.values()
                if not self._unfit(pods, pool)
            ]
            hit = self._ranked[shape] = (ranked, [] if ranked else self._unfit_all(pods))
        why.extend(hit[1])
        return hit[0]

    def _unfit_all(self, pods: list[_Pod]) -> list[str]:
        if not self.pools:
            return ["no NodePool exists"]
        return [f"pool {p.name}: {self._unfit(pods, p)}" for p in self.pools.values()]

    def _unfit(self, pods: list[_Pod], pool: Pool) -> str:
        for pod in dict.fromkeys(pods):
            problem = self._problem(pod, pool.template, self.classes[pool.name])
            if problem:
                return problem
            if not self._per_node(pod, pool):
                return "a pod needs more than one of its nodes has"
        return ""

    def _per_node(self, pod: _Pod, pool: Pool) -> int:
        """How many pods like ``pod`` one empty node of ``pool`` holds (anti-affinity: 1)."""
        key = (pod.kid if pod.kid >= 0 else pod.key, pod.requests, pod.milli, pool.name)
        hit = self._fits.get(key)
        if hit is None:
            t = pool.template
            most = 1 if pod.anti else 1 << 30
            for r, v in pod.requests:
                most = min(most, t.allocatable.get(r, 0) // v)
            if pod.gpus:
                if pod.whole:
                    most = min(most, t.gpus // pod.gpus)
                else:
                    need = _share_milli(pod, t)
                    most = min(most, t.gpus * (GPU_MILLI // need) if need <= GPU_MILLI else 0)
            hit = self._fits[key] = max(most, 0)
        return hit

    def _count(
        self, shape: tuple | None, pods: list[_Pod], pool: str, gang: str, per_node: bool
    ) -> int | None:
        """How many new nodes of ``pool`` hold ``pods``; None when the gang must share one node
        (a per-node topology level) and does not fit one."""
        key = (shape, pool)
        if shape is not None and key in self._counts:
            return self._counts[key]
        kinds = dict.fromkeys(pods)
        if len(kinds) == 1:
            # one kind of pod (the usual gang): identical nodes each hold per_node of them
            per = self._per_node(next(iter(kinds)), self.pools[pool])
            count: int | None = -(-len(pods) // per) if per else None
        else:
            count = len(self._pack(pods, pool, gang))
        if count is None or (per_node and count != 1):
            count = None
        if shape is not None:
            self._counts[key] = count
        return count

    def _pack(self, pods: list[_Pod], pool: str, gang: str) -> list[_Room]:
        """New nodes of ``pool`` holding ``pods``: first fit, largest pods first."""
        template = self.pools[pool]
        rooms: list[_Room] = []
        for pod in pods:
            for room in rooms:
                if room.fits(pod, gang):
                    room.take(pod, gang)
                    break
            else:
                room = _fresh(template, self.classes[pool])
                room.take(pod, gang)
                rooms.append(room)
        return rooms

    def _problem(self, pod: _Pod, node: Node, cls: int) -> str:
        if pod.kid < 0:
            pod.kid = self._intern(pod.key)
        key = (pod.kid, cls)
        hit = self._static.get(key)
        if hit is None:
            hit = self._static[key] = _static_problem(pod, node)
        return hit

    def _intern(self, key: tuple) -> int:
        return self._ids.setdefault(key, len(self._ids))

    def top_up(self, out: ScalePlan) -> None:
        for pool in self.pools.values():
            missing = pool.min_nodes - pool.nodes - sum(1 for n in out.launch if n.pool == pool.name)
            for _ in range(max(0, min(missing, self.headroom[pool.name]))):
                out.launch.append(NewNode(pool.name))
                self.headroom[pool.name] -= 1

    # -- scale down ----------------------------------------------------------------------------

    def idle(self, now: float, out: ScalePlan) -> list[tuple[str, str]]:
        removable: dict[str, list[Bin]] = {}
        for room in self.rooms:
            src = room.source
            if src is None or src.pool not in self.pools or src.empty_since is None:
                continue
            if room.name in self.planned or room.users:
                continue
            if now - src.empty_since >= self.pools[src.pool].ttl:
                removable.setdefault(src.pool, []).append(src)
        removed = []
        for name, idle in sorted(removable.items()):
            pool = self.pools[name]
            launched = sum(1 for n in out.launch if n.pool == name)
            spare = pool.nodes + launched - pool.min_nodes
            idle.sort(key=lambda b: (b.empty_since, b.node.name))
            for b in idle[: max(0, spare)]:
                gone = now - b.empty_since  # type: ignore[operator]
                removed.append(
                    (
                        b.node.name,
                        f"empty for {gone:.0f}s (pool {name} removes idle nodes after {pool.ttl:.0f}s)",
                    )
                )
        return removed


def _statics(node: Node) -> tuple:
    """What the static checks read of a node (two nodes alike here are alike to them)."""
    return (
        tuple(sorted(node.labels.items())),
        node.taints,
        node.gpus,
        node.gpu_model,
        node.gpu_memory,
        tuple(sorted(node.allocatable)),
    )


def _fresh(pool: Pool, cls: int) -> _Room:
    t = pool.template
    room = _Room(
        t, {r: v for r, v in t.allocatable.items() if r != GPU}, [GPU_MILLI] * t.gpus, pool.name, cls
    )
    room.eta = pool.eta
    return room


def _template_totals(node: Node) -> dict[str, int]:
    out = {r: v for r, v in node.allocatable.items() if r != GPU}
    out[GPU] = node.gpus * GPU_MILLI
    return out


def _pods(gang: Gang, option: list[tuple[Flavor, ...]]) -> list[_Pod]:
    pods = []
    for i, ps in enumerate(gang.pod_sets):
        flavors = tuple(option[i]) if i < len(option) else ()
        requests = tuple(sorted((r, v) for r, v in ps.requests.items() if v and r != GPU))
        memory = ps.gpu_memory if ps.gpus else 0
        key = (
            tuple(sorted(ps.node_selector.items())),
            ps.node_affinity,
            ps.tolerations,
            ps.gpu_models if ps.gpus else (),
            tuple(f.name for f in flavors),
            tuple(r for r, _ in requests),
            ps.gpus,
            memory,
        )
        pod = _Pod(ps, flavors, requests, ps.gpus, ps.gpu_milli if ps.gpus else 0, memory, key)
        pods.extend([pod] * ps.count)
    if len(gang.pod_sets) > 1:  # largest first; one pod set is one kind of pod
        pods.sort(key=lambda p: (-(p.gpus * min(p.milli, GPU_MILLI)), -sum(v for _, v in p.requests)))
    return pods


def _shape(gang: Gang, option: list[tuple[Flavor, ...]]) -> tuple:
    return (
        tuple(
            (
                ps.count,
                tuple(sorted(ps.requests.items())),
                ps.gpus,
                ps.gpu_milli,
                ps.gpu_memory,
                ps.gpu_models,
                tuple(sorted(ps.node_selector.items())),
                ps.node_affinity,
                ps.tolerations,
                ps.topology_required,
                ps.anti_affinity,
            )
            for ps in gang.pod_sets
        ),
        tuple(tuple(f.name for f in fl) for fl in option),
    )


def _topology(gang: Gang) -> str | None:
    return next((ps.topology_required for ps in gang.pod_sets if ps.topology_required), None)


def _share_milli(pod: _Pod, node: Node) -> int:
    if pod.memory:
        if node.gpu_memory < pod.memory or node.gpu_memory <= 0:
            return GPU_MILLI + 1
        return -(-pod.memory * GPU_MILLI // node.gpu_memory)
    return pod.milli


def _static_problem(pod: _Pod, node: Node) -> str:
    """Why the pod can never go to ``node``, by the scheduler's static filters; "" when it may."""
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
        if taint.effect in _BLOCKING and not any(t.tolerates(taint) for t in tolerations):
            return f"the pods do not tolerate its taint {taint}"
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
