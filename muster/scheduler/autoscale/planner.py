"""The planner behind :func:`muster.scheduler.autoscale.plan`: gangs placed one by one on the
room there is, then on new nodes of the best pool; idle pool nodes found for removal."""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Hashable, Sequence

from muster.scheduler.autoscale.model import Bin, Gang, NewNode, Pool, ScalePlan
from muster.scheduler.autoscale.rooms import (
    OpenRooms,
    PlanPod,
    Room,
    Way,
    fresh,
    launched_per_pool,
    placement_problem,
    pods_of,
    resource_problem,
    shape_of,
    share_milli,
    statics,
    topology_of,
)
from muster.scheduler.snapshot import GPU_MILLI, Flavor, Node


class Planner:
    def __init__(self, pools: Sequence[Pool], bins: Sequence[Bin], ready_verdict: bool = True) -> None:
        self.ready_verdict = ready_verdict
        self.pools = {p.name: p for p in pools}
        self._ids: dict[tuple, int] = {}
        self.classes = {p.name: self._intern((p.name, statics(p.template))) for p in pools}
        self.headroom = {p.name: p.headroom() for p in pools}
        self.rooms: list[Room] = []
        self._added = 0  # rooms opened so far
        self._nofit: dict[tuple, int] = {}  # pod kind -> rooms opened when it last found no room
        self._hopeless: dict[tuple, tuple] = {}  # gang shapes -> (what it depends on, its state, why)
        self._class_added: dict[int, int] = defaultdict(int)  # rooms opened per class
        by_kind: dict[tuple, int] = {}  # bins of one declared kind read alike: class them once
        for b in bins:
            cls = by_kind.get((b.pool, b.kind)) if b.kind is not None else None
            if cls is None:
                cls = self._intern((b.pool, statics(b.node)))
                if b.kind is not None:
                    by_kind[(b.pool, b.kind)] = cls
            room = Room(b.node, dict(b.free), list(b.gpu_free), b.pool, cls)
            room.ready, room.eta, room.source, room.slot = b.ready, b.eta, b, len(self.rooms)
            self.rooms.append(room)
        self.open: dict[int, OpenRooms] = {}  # rooms that may take a pod, by class
        for room in self.rooms:
            self._opened(room)
        for pool in pools:  # every class a new room can have is known from the start
            if self.classes[pool.name] not in self.open:
                self.open[self.classes[pool.name]] = OpenRooms(fresh(pool, self.classes[pool.name]))
        self.planned: set[str] = set()  # existing nodes some gang is planned onto
        self._static: dict[tuple, str] = {}
        self._placement: dict[tuple[int, int], str] = {}
        self._ranked: dict[tuple, tuple[list[tuple[tuple, str]], list[str]]] = {}
        self._counts: dict[tuple[Hashable, str], int | None] = {}
        self._fits: dict[tuple, int] = {}
        self._compat: dict[int, tuple[list[int], list[int]]] = {}
        self._compat_rooms: dict[int, list[OpenRooms]] = {}
        self._option_cache: dict[tuple, list[tuple]] = {}
        self._packed: dict[tuple[Hashable, str], list[Room]] = {}  # per (pods left, pool)
        self._viable: dict[int, int] = {}  # per cached options list, the first that may still be
        self._pods_of: dict[int, list[PlanPod]] = {}  # per gang shape
        self._kinds_of: dict[int, tuple] = {}  # per gang shape, its kinds of pod
        self._protos: dict[str, Room] = {}  # per pool, an empty new node
        self._words: dict[str | tuple, str] = {}  # per reason a pool cannot take a gang, in words
        self._placed_pools: dict[int, dict[str, Pool]] = {}  # per placement key

    # -- scale up ------------------------------------------------------------------------------

    def place(self, gang: Gang, out: ScalePlan) -> None:
        key = gang.key  # a property that formats: taken once
        options = gang.options or [[()] * len(gang.pod_sets)]
        # a shape is interned once per gang: the caches below hash an int, not nested tuples
        shapes = tuple([self._intern(shape_of(gang, option)) for option in options])
        hopeless = self._hopeless.get(shapes)
        if hopeless is not None and self._still_hopeless(*hopeless[:2]):
            # No room of a class it may use was opened, and no pool it may use changed its
            # headroom, since a gang of this shape found no way: it finds none either.
            out.unplaceable[key] = hopeless[2]
            return
        best: Way | None = None
        why: list = []  # reasons (tuples, worded when needed) why pools cannot take it
        for option, shape in zip(options, shapes, strict=True):
            way = self._way(gang, key, option, shape, why)
            if way is not None and (best is None or way.rank < best.rank):
                best = way
        if best is None:
            reason = "; ".join(dict.fromkeys(map(self._said, why))) or "no NodePool can make a node for it"
            out.unplaceable[key] = reason
            classes = self._deps(shapes)
            self._hopeless[shapes] = (classes, self._added_in(classes), reason)
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
                out.launch[live.launch].gangs.append(key)
            if not live.ready:
                waits.append(live.name)
        for packed in best.new:
            room = packed.copy(users={key})
            room.launch, room.slot = len(out.launch), len(self.rooms)
            out.launch.append(NewNode(best.pool, [key]))
            self.rooms.append(room)
            self._opened(room)
            waits.append(room.name)
        if best.new:
            self.headroom[best.pool] -= len(best.new)
        out.waits[key] = list(dict.fromkeys(waits))

    def _said(self, why: str | tuple) -> str:
        """:meth:`_say`, once per reason (gangs alike fail alike)."""
        hit = self._words.get(why)
        if hit is None:
            hit = self._words[why] = self._say(why)
        return hit

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

    def _way(
        self, gang: Gang, key: str, option: list[tuple[Flavor, ...]], shape: int, why: list
    ) -> Way | None:
        pods = self._pods_of.get(shape)
        if pods is None:  # gangs of one shape have the same pods (what the checks read is the shape)
            pods = self._pods_of[shape] = pods_of(gang, option)
        topology = topology_of(gang)
        ranked = self._ranking(shape, pods, why)
        if topology is None:
            way = self._onto_rooms(key, pods, ready=True)
            if self.ready_verdict and not way.new and way.changed and all(r.ready for r in way.changed):
                # Everything fits the Ready nodes by this arithmetic, yet the scheduler found
                # no room there: its verdict wins, so plan without the Ready nodes.
                way = self._onto_rooms(key, pods, ready=False)
            if not way.new:
                return Way((0,), way.changed, "", [])
            return self._new_nodes(self._left(shape, way), ranked, way, False, why)
        # A topology level: one pool's nodes (coming up or new) share its domain, so the gang
        # goes to one pool; a level the pool does not label (the hostname) means one node.
        found: list[Way] = []
        for rank, name in ranked:
            per_node = topology not in self.pools[name].template.labels
            way = self._onto(key, pods, self._pool_classes(name), ready=False)
            if per_node and way.changed and (way.new or len(way.changed) > 1):
                way = Way((), [], "", pods)
            if not way.new:
                return Way((0,), way.changed, "", [])
            pick = self._new_nodes(self._left(shape, way), [(rank, name)], way, per_node, why, topology)
            if pick is not None:
                found.append(pick)
        return min(found, key=lambda w: w.rank) if found else None

    @staticmethod
    def _left(shape: int, way: Way) -> Hashable:
        """What the new nodes depend on: the pods ``way`` left (of the shape's pods, which live
        as long as the plan: their ids name them)."""
        return shape if not way.changed else (shape, *map(id, way.new))

    def _new_nodes(
        self,
        left: Hashable,
        ranked: list[tuple[tuple, str]],
        way: Way,
        per_node: bool,
        why: list,
        topology: str | None = None,
    ) -> Way | None:
        """The best pool for the pods ``way`` left: by rank, then the cost of the nodes needed,
        then their number, then the name; among the pools with room for them."""
        options = self._options(left, ranked, way.new, per_node)
        # Headroom only shrinks, so an option once without room stays so: the search resumes
        # where the last gang that left these pods stopped.
        i = self._viable.get(id(options), 0)
        headroom = self.headroom
        while i < len(options) and (options[i][-2] is None or options[i][-2] > headroom[options[i][-1]]):
            i += 1
        self._viable[id(options)] = i
        if i == len(options):
            for count, name in (o[-2:] for o in options):  # worded only if it ends unplaceable
                why.append(
                    ("topology", name, topology)
                    if count is None
                    else ("headroom", name, count, headroom[name])
                )
            return None
        best = options[i]  # the options come best first
        name = best[-1]
        # gangs that leave the same pods need the same new nodes of a pool: pack once, copy after
        packed = self._packed.get((left, name))
        if packed is None:
            packed = self._packed[(left, name)] = self._pack(way.new, name, "")
        return Way(best, way.changed, name, packed)

    def _options(
        self, left: Hashable, ranked: list[tuple[tuple, str]], pods: list[PlanPod], per_node: bool
    ) -> list[tuple]:
        """Every pool's way to hold ``pods`` on new nodes, best first (rank, cost, nodes, name;
        the count None where it cannot); cached per pods left and the pools ranked (all those
        that may host the shape, or the one a topology level allows)."""
        key = (left, per_node, ranked[0][1] if len(ranked) == 1 else None)
        hit = self._option_cache.get(key)
        if hit is None:
            options = []
            kinds = dict.fromkeys(pods)
            one = next(iter(kinds)) if len(kinds) == 1 else None
            for rank, name in ranked:
                count = self._count(left, pods, one, name, per_node)
                cost = float("inf") if count is None else self.pools[name].price * count
                options.append((1, *rank, cost, count if count is not None else 1 << 30, name))
            options.sort()
            hit = self._option_cache[key] = [
                (*o[:-2], None if o[-2] == 1 << 30 else o[-2], o[-1]) for o in options
            ]
        return hit

    def _onto_rooms(self, key: str, pods: list[PlanPod], ready: bool) -> Way:
        return self._onto(key, pods, self.open, ready)

    def _onto(self, key: str, pods: list[PlanPod], classes: dict[int, OpenRooms], ready: bool) -> Way:
        """Place what fits on the open rooms of ``classes`` (Ready ones too when ``ready``);
        the rooms changed are copies; ``new`` holds the pods left."""
        copies: dict[int, Room] = {}
        left: list[PlanPod] = []
        failed: set[int] = set()  # pods like one that found no room find none either
        # Per kind of pod, where its search resumes: rooms only lose room while the gang is
        # placed, so the classes before the one that took its last pod have none left for it.
        start: dict[int, int] = {}
        orders: dict[int, list[OpenRooms]] = {}  # per kind of pod, the classes to try, in order
        everywhere = classes is self.open
        j, n = 0, len(pods)
        while j < n:
            pod = pods[j]
            j += 1
            pid = id(pod)
            if pid in failed:
                left.append(pod)
                continue
            nofit = None
            if everywhere:
                nofit = (pod.kid, pod.requests, pod.milli, pod.memory, ready)
                if self._nofit.get(nofit) == self._added:
                    left.append(pod)
                    continue
            order = orders.get(pid)
            if order is None:
                order = orders[pid] = (
                    self._compatible_rooms(pod)
                    if everywhere
                    else [o for c, o in classes.items() if not self._problem(pod, o.sample.node, c)]
                )
            # Open rooms are bucketed by their whole free GPUs, so a pod asking for g of them
            # looks only at rooms with at least g (fewest first: best fit); a class whose
            # roomiest open room lacks them has none.
            need = pod.gpus if pod.gpus and pod.whole else 0
            trial = None
            for i in range(start.get(pid, 0), len(order)):
                opened = order[i]
                if opened.most < need or (opened.all_ready and not ready):
                    continue
                keys, buckets = opened.keys, opened.buckets
                for k in keys[bisect_left(keys, need) :]:
                    for room in buckets[k]:
                        if room.ready and not ready:
                            continue
                        trial = copies.get(room.slot) or room
                        if trial.fits(pod, key):
                            if trial is room:
                                trial = copies[room.slot] = room.copy()
                            break
                        trial = None
                    if trial is not None:
                        break
                if trial is not None:
                    break
            else:
                i = len(order)
            start[pid] = i
            if trial is None:
                failed.add(pid)
                if not copies and nofit is not None:  # a fact about the open rooms, not this gang
                    self._nofit[nofit] = self._added
                left.append(pod)
                continue
            trial.take(pod, key)
            # the rooms before this one had no room for a pod like it, and still have none:
            # the next like it goes here while it fits
            while j < n and pods[j] is pod and trial.fits(pod, key):
                trial.take(pod, key)
                j += 1
        return Way((), list(copies.values()), "", left)  # type: ignore[arg-type]

    def _pool_classes(self, pool: str) -> dict[int, OpenRooms]:
        """The open rooms of ``pool`` by class (a pool's nodes are of one class)."""
        cls = self.classes[pool]
        return {cls: self.open[cls]} if cls in self.open else {}

    def _compatible_rooms(self, pod: PlanPod) -> list[OpenRooms]:
        """:meth:`_compatible`, the open rooms of each class (the classes never change)."""
        classes = self._compatible(pod)
        hit = self._compat_rooms.get(pod.kid)
        if hit is None or len(hit) != len(classes):
            hit = self._compat_rooms[pod.kid] = [self.open[c] for c in classes]
        return hit

    def _compatible(self, pod: PlanPod) -> list[int]:
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

    def _opened(self, room: Room) -> None:
        opened = self.open.get(room.cls)
        if opened is None:
            opened = self.open[room.cls] = OpenRooms(room)
        opened.add(room)
        self._added += 1  # rooms only lose room otherwise: a pod that found none may find this
        self._class_added[room.cls] += 1

    def _deps(self, shapes: tuple[int, ...]) -> tuple[int, ...]:
        """The classes of rooms a gang of these shapes (one per option) could ever use."""
        classes: dict[int, None] = {}
        for shape in shapes:
            for pod in dict.fromkeys(self._pods_of[shape]):
                classes.update(dict.fromkeys(self._compatible(pod)))
        return tuple(classes)

    def _added_in(self, classes: tuple[int, ...]) -> int:
        """Rooms opened so far in ``classes`` (a sum: each count only grows)."""
        return sum(map(self._class_added.__getitem__, classes))

    def _still_hopeless(self, classes: tuple[int, ...], added: int) -> bool:
        """No room of those classes was opened since. (Every pool it could use still has less
        headroom than the nodes it would need: headroom only shrinks, needs only grow as rooms
        fill.)"""
        return self._added_in(classes) == added

    def _ranking(self, shape: int, pods: list[PlanPod], why: list) -> list[tuple[tuple, str]]:
        """Pools that could ever host the gang, with their rank: weight first, then spot."""
        kinds = self._kinds_of.get(shape)
        if kinds is None:
            for pod in pods:
                if pod.kid < 0:
                    pod.kid = self._intern(pod.key)
            # which pools may host it depends on its kinds of pod, not on how many there are
            kinds = self._kinds_of[shape] = tuple(sorted({(p.kid, p.requests, p.milli) for p in pods}))
        hit = self._ranked.get(kinds)
        if hit is None:
            unique = list(dict.fromkeys(pods))
            # most pools fail on labels or taints, which few kinds of pod differ in: those
            # pools are left out first, per placement key
            placed = [self._placed(pod) for pod in unique]
            ranked = [
                ((-pool.weight, 0 if pool.spot else 1), pool.name)
                for pool in placed[0].values()
                if all(pool.name in other for other in placed[1:]) and not self._unfit(unique, pool)
            ]
            hit = self._ranked[kinds] = (ranked, [] if ranked else self._unfit_all(unique))
        why.extend(hit[1])
        return hit[0]

    def _placed(self, pod: PlanPod) -> dict[str, Pool]:
        """The pools whose nodes pass the pod's label, affinity and taint checks, in order."""
        if pod.kid < 0:
            pod.kid = self._intern(pod.key)
        if pod.pid < 0:
            pod.pid = self._intern(pod.key[:4])
        hit = self._placed_pools.get(pod.pid)
        if hit is None:
            hit = self._placed_pools[pod.pid] = {
                name: pool
                for name, pool in self.pools.items()
                if not self._placement_problem(pod, pool.template, self.classes[name])
            }
        return hit

    def _unfit_all(self, kinds: list[PlanPod]) -> list[str]:
        if not self.pools:
            return ["no NodePool exists"]
        return [f"pool {p.name}: {self._unfit(kinds, p)}" for p in self.pools.values()]

    def _unfit(self, kinds: list[PlanPod], pool: Pool) -> str:
        """Why no node of ``pool`` can ever hold one of ``kinds`` (distinct pods); "" if it can."""
        for pod in kinds:
            problem = self._problem(pod, pool.template, self.classes[pool.name])
            if problem:
                return problem
            if not self._per_node(pod, pool):
                return "a pod needs more than one of its nodes has"
        return ""

    def _per_node(self, pod: PlanPod, pool: Pool) -> int:
        """How many pods like ``pod`` one empty node of ``pool`` holds (anti-affinity: 1)."""
        key = (pod.kid if pod.kid >= 0 else pod.key, pod.requests, pod.milli, pod.anti, pool.name)
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
                    need = share_milli(pod, t)
                    most = min(most, t.gpus * (GPU_MILLI // need) if need <= GPU_MILLI else 0)
            hit = self._fits[key] = max(most, 0)
        return hit

    def _count(
        self, left: Hashable, pods: list[PlanPod], one: PlanPod | None, pool: str, per_node: bool
    ) -> int | None:
        """How many new nodes of ``pool`` hold ``pods`` (all like ``one``, if given); None when
        the gang must share one node (a per-node topology level) and does not fit one."""
        key = (left, pool)
        count: int | None = self._counts.get(key, -1)
        if count != -1:
            return count
        if one is not None:
            # one kind of pod (the usual gang): identical nodes each hold per_node of them
            per = self._per_node(one, self.pools[pool])
            count = -(-len(pods) // per) if per else None
        else:
            count = len(self._pack(pods, pool, ""))
        if count is None or (per_node and count != 1):
            count = None
        self._counts[key] = count
        return count

    def _pack(self, pods: list[PlanPod], pool: str, gang: str) -> list[Room]:
        """New nodes of ``pool`` holding ``pods``: first fit, largest pods first."""
        if pods and pods.count(pods[0]) == len(pods):  # one kind of pod (PlanPods compare by identity)
            per = self._per_node(pods[0], self.pools[pool])
            if per:
                return self._pack_alike(pods[0], len(pods), per, pool, gang)
        rooms: list[Room] = []
        for pod in pods:
            for room in rooms:
                if room.fits(pod, gang):
                    room.take(pod, gang)
                    break
            else:
                room = self._fresh(pool)
                room.take(pod, gang)
                rooms.append(room)
        return rooms

    def _pack_alike(self, pod: PlanPod, n: int, per: int, pool: str, gang: str) -> list[Room]:
        """First fit of ``n`` pods like ``pod``, ``per`` to a node (:meth:`_per_node`): the nodes
        fill one after the other, so one full node is filled once and copied."""
        rooms: list[Room] = []
        full: Room | None = None
        while n > 0:
            k = min(per, n)
            if k == per and full is not None:
                rooms.append(full.copy())
            else:
                room = self._fresh(pool)
                for _ in range(k):
                    room.take(pod, gang)
                if k == per:
                    full = room
                rooms.append(room)
            n -= k
        return rooms

    def _fresh(self, pool: str) -> Room:
        """An empty new node of ``pool`` (a copy of one made once)."""
        proto = self._protos.get(pool)
        if proto is None:
            proto = self._protos[pool] = fresh(self.pools[pool], self.classes[pool])
        return proto.copy(users=set())

    def _problem(self, pod: PlanPod, node: Node, cls: int) -> str:
        if pod.kid < 0:
            pod.kid = self._intern(pod.key)
        key = (pod.kid, cls)
        hit = self._static.get(key)
        if hit is None:
            where = self._placement_problem(pod, node, cls)
            hit = self._static[key] = where or resource_problem(pod, node)
        return hit

    def _placement_problem(self, pod: PlanPod, node: Node, cls: int) -> str:
        # Labels, affinity and taints are the costly checks and depend on few of the pod's
        # fields: pods that differ only in their GPUs share them.
        if pod.pid < 0:
            pod.pid = self._intern(pod.key[:4])
        placement = (pod.pid, cls)
        where = self._placement.get(placement)
        if where is None:
            where = self._placement[placement] = placement_problem(pod, node)
        return where

    def _intern(self, key: tuple) -> int:
        return self._ids.setdefault(key, len(self._ids))

    def top_up(self, out: ScalePlan) -> None:
        launched = launched_per_pool(out)
        for pool in self.pools.values():
            missing = pool.min_nodes - pool.nodes - launched.get(pool.name, 0)
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
        launched = launched_per_pool(out)
        for name, idle in sorted(removable.items()):
            pool = self.pools[name]
            spare = pool.nodes + launched.get(name, 0) - pool.min_nodes
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
