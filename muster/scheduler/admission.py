"""The scheduling cycle: :func:`schedule` decides every pending workload once.

One cycle considers every pending workload, not one head per queue. It runs in rounds, as
repeated Kueue cycles on a state that carries over: each round takes the head of every
ClusterQueue (its queue order is priority, then FIFO time), orders the heads (classical:
no borrowing first, then priority, then FIFO; fair sharing: lowest dominant resource share
after admission first) and processes them in that order, each against the state left by
the ones before it:

1. flavors are assigned against current usage (see :mod:`.flavors`);
2. the first assignment whose quota fits and whose gang can be placed is admitted;
3. otherwise preemption is tried (see :mod:`.preemption`); a preemptor whose victims are
   chosen stays pending (WaitingForPreemption) but keeps its claim: its quota and
   placement are charged for the rest of the cycle, so nothing later takes them;
4. otherwise, with ``minCount``, the largest proportional reduction that fits is admitted
   (Kueue's pod set reducer; failing that, preemption for the minimum counts);
   before all of these, the counts must fit the namespace's quotas (ResourceQuota,
   :mod:`.namespaces`): no preemption makes room there;
5. otherwise it stays pending with a reason. A workload whose quota needs preemption but
   finds no candidate, in a queue that cannot always reclaim (``reclaimWithinCohort`` is
   not Any), reserves its queue's unused nominal quota (up to the borrowing limit when it
   would borrow) as Kueue does (``reserveCapacityForUnreclaimablePreempt``): other queues
   of the cohort may not borrow it in the same round, or the queue might never get it
   back. The reservation lasts for the round; under StrictFIFO the head stays the head,
   so it lasts for the rest of the cycle.

After the rounds, admitted elastic workloads below their full size grow into what is left
(:mod:`.grow`: never by preemption, and yielding to waiting workloads of their priority or
higher).

Under StrictFIFO a head that is not admitted blocks the rest of its queue
(StrictFIFOBlocked); under BestEffortFIFO the next workload becomes the head. Admissions
and claims are committed immediately, so the cycle never over-admits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from muster.scheduler import reasons as R
from muster.scheduler.cycle import Cycle
from muster.scheduler.decisions import (
    Admission,
    Decisions,
    NodePlacement,
    Pending,
    PodSetAdmission,
    Preemption,
)
from muster.scheduler.flavors import Assignment, FlavorPlan, Mode
from muster.scheduler.grow import grow
from muster.scheduler.ordering import classical_head_key, fair_head_key, queue_key
from muster.scheduler.placement.gang import GangItem, GangPlacement, PlacementFailure
from muster.scheduler.policy import Policy
from muster.scheduler.preemption import PreemptionCtx, Target, find_targets
from muster.scheduler.quota import FR, QuotaNode
from muster.scheduler.snapshot import PendingWorkload, Snapshot

__all__ = ["schedule"]


def schedule(snapshot: Snapshot, policy: Policy | None = None) -> Decisions:
    """Run one scheduling cycle and return its decisions. Pure: the snapshot is not changed,
    and the same snapshot and policy always give the same decisions."""
    cycle = Cycle(snapshot, policy or Policy())
    _Admitter(cycle).run()
    grow(cycle)  # elastic workloads grow into what is left (muster.scheduler.grow)
    return cycle.decisions


@dataclass(slots=True)
class _Outcome:
    """What one attempt at some pod counts came to."""

    kind: str  # admit | preempt | fail
    assignment: Assignment | None = None
    placement: GangPlacement | None = None
    targets: list[Target] = field(default_factory=list)
    evals: list[Assignment] = field(default_factory=list)
    failures: list[tuple[Assignment, PlacementFailure]] = field(default_factory=list)
    candidates: bool = False  # some preemption attempt found victims (its placement then failed)
    namespace_block: tuple[str, dict] | None = None  # a ResourceQuota of the namespace is full


class _Admitter:
    def __init__(self, cycle: Cycle) -> None:
        self.c = cycle
        self.d: Decisions = cycle.decisions
        self._plans: dict[int, FlavorPlan] = {}
        self._sigs: dict[int, int] = {}  # id of a PendingWorkload -> its signature's number
        self._sig_ids: dict[tuple, int] = {}
        # by the id of a pod set list: workloads of one shape may share theirs (the snapshot
        # holds every list for the whole cycle, so an id is not reused meanwhile)
        self._shapes: dict[int, tuple[tuple, int]] = {}  # id of a pod set list -> shape, number
        self._shape_ids: dict[tuple, int] = {}
        self._roots: dict[int, int] = {}  # id of a quota node -> id of its tree's root
        self._fail_cache: dict[int, tuple[tuple, Pending]] = {}
        self._epoch = 0  # bumps whenever capacity or candidates may have been freed
        self._root_epoch: dict[int, int] = {}
        # Pending workloads that reserve quota (see the module docstring): by signature, the
        # assignment a workload of that shape reserves for; and this round's reservations.
        self._reserving: dict[int, Assignment] = {}
        self._reserved: list[tuple[QuotaNode, dict[FR, int]]] = []
        # What is reserved in each cohort tree now: part of the key of a cached failure, so
        # one cached under a reservation is not trusted once it is lifted, and is again when
        # the same reservation is made in a later round (as it is, head after head).
        self._reserved_key: dict[int, tuple] = {}

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        c = self.c
        queues: dict[str, list[PendingWorkload]] = {}
        for w in c.snapshot.pending:
            node = c.tree.queues.get(w.queue)
            if node is None:
                self._pending(
                    w, R.INADMISSIBLE, f"cluster queue {w.queue} does not exist; submit to an existing queue"
                )
                continue
            if node.cq.stopped:  # type: ignore[union-attr]
                self._pending(
                    w, R.QUEUE_STOPPED, f"cluster queue {w.queue} is stopped; it admits nothing until resumed"
                )
                continue
            queues.setdefault(w.queue, []).append(w)
        for lst in queues.values():
            lst.sort(key=queue_key)
        active = [q for q in c.tree.queues if q in queues]
        if len(active) == 1:  # one queue: its workloads in order, a round each (the same result)
            self._run_one(active[0], queues[active[0]])
        else:
            self._run_rounds(queues, active)

    def _run_rounds(self, queues: dict[str, list[PendingWorkload]], active: list[str]) -> None:
        c = self.c
        pos = dict.fromkeys(queues, 0)
        while active:
            heads = [(q, queues[q][pos[q]]) for q in active]
            if len(heads) > 1:
                heads.sort(key=lambda h: self._head_key(h[1]))
            for q, w in heads:
                admitted = self._process(w)
                pos[q] += 1
                lst = queues[q]
                if not admitted and c.tree.queues[q].cq.queueing_strategy == "StrictFIFO":  # type: ignore[union-attr]
                    self._block(q, w, lst[pos[q] :])
                    pos[q] = len(lst)
            self._end_round()
            active = [q for q in active if pos[q] < len(queues[q])]

    def _run_one(self, q: str, waiting: list[PendingWorkload]) -> None:
        node = self.c.tree.queues[q]
        strict = node.cq.queueing_strategy == "StrictFIFO"  # type: ignore[union-attr]
        i = 0
        while i < len(waiting):
            w = waiting[i]
            admitted = self._process(w)
            if not admitted and strict:
                self._block(q, w, waiting[i + 1 :])
                self._end_round()
                return
            self._end_round()
            i = i + 1 if admitted else self._alike(node, w, waiting, i + 1)

    def _alike(self, node: QuotaNode, w: PendingWorkload, waiting: list[PendingWorkload], i: int) -> int:
        """After ``w`` failed (in the one-queue path, so no other queue acts in between), the
        workloads from ``waiting[i]`` on that share its signature would each hit its cached
        failure and change nothing, as long as that failure reserves nothing: decided here in
        one loop, without the caches' lookups per workload (a long queue of one shape is the
        common backlog). Returns the index of the first workload not decided."""
        sig = self._sig(w, node)
        hit = self._fail_cache.get(sig)
        if hit is None or self._reserving.get(sig) is not None or hit[0] != self._epochs(node):
            return i
        cached, start = hit[1], i
        by_time = node.cq.preemption.within_cluster_queue == "LowerOrNewerEqualPriority"  # type: ignore[union-attr]
        limited = self.c.namespaces.limited
        # What _sig compares, with the pod set list's identity for its shape (the snapshot
        # shares one list among Workloads of one shape).
        while i < len(waiting):
            v = waiting[i]
            if (
                v.pod_sets is not w.pod_sets
                or v.priority != w.priority
                or v.can_preempt != w.can_preempt
                or (by_time and v.queue_time != w.queue_time)
                or (v.namespace != w.namespace and (limited(v.namespace) or limited(w.namespace)))
            ):
                break
            self.d.pending.append(Pending(v, cached.reason, cached.message, cached.details))
            i += 1
        self.d.workloads_considered += i - start
        return i

    def _block(self, q: str, head: PendingWorkload, rest: list[PendingWorkload]) -> None:
        """StrictFIFO: nothing overtakes a head that was not admitted."""
        why = self.d.pending[-1].reason if self.d.pending else "pending"
        for w in rest:
            self._pending(
                w,
                R.STRICT_FIFO_BLOCKED,
                f"queue {q} is StrictFIFO and its head {head.namespace}/{head.name} is not admitted ({why}); "
                "nothing may overtake it until the head is admitted",
                {"head": head.name, "headReason": why},
            )

    def _head_key(self, w: PendingWorkload) -> tuple:
        node = self.c.tree.queues[w.queue]
        sig = self._sig(w, node)
        if self._cached_failure(sig, node) is not None:
            # it will stay pending whatever comes first; let the others go ahead
            return (float("inf"), *queue_key(w))
        plan = self._plan(sig, w, node)
        a = None
        if plan.admissible:
            counts = [ps.count for ps in w.pod_sets]
            evals = [plan.evaluate(self.c.tree, node, combo, counts, self.c.fair) for combo in plan.combos()]
            a = next((e for e in evals if e.mode == Mode.FIT), evals[0] if evals else None)
        if self.c.fair:
            share = self.c.tree.dominant_share(node, a.usage if a else None)
            return fair_head_key(w, share)
        return classical_head_key(w, a.borrow if a else 0)

    # -- one workload ---------------------------------------------------------------------

    def _process(self, w: PendingWorkload) -> bool:
        """Decide one head; True when admitted."""
        c = self.c
        self.d.workloads_considered += 1
        node = c.tree.queues[w.queue]
        sig = self._sig(w, node)  # once: the caches below all look it up
        plan = self._plan(sig, w, node)
        if plan.errors:
            self._pending(
                w, R.INADMISSIBLE, "; ".join(plan.errors) + "; add quota for it or drop the request"
            )
            return False
        if plan.no_match:
            msg = "no flavor of cluster queue " + w.queue + " matches: " + "; ".join(plan.no_match)
            self._pending(
                w, R.NO_MATCHING_FLAVOR, msg + "; change the node selector or tolerations, or add a flavor"
            )
            return False
        cached = self._cached_failure(sig, node)
        if cached is not None:
            self.d.pending.append(Pending(w, cached.reason, cached.message, cached.details))
            reserving = self._reserving.get(sig)
            if reserving is not None:
                self._reserve(node, reserving)
            return False
        counts = [ps.count for ps in w.pod_sets]
        out = self._attempt(w, node, plan, counts, w.can_preempt)
        if out.kind == "fail" and self._partial_possible(w):
            out = self._partial(w, node, plan, out)
        if out.kind == "admit":
            self._admit(w, node, out)
            return True
        if out.kind == "preempt":
            self._claim(w, node, out)
            return False
        pending = self._fail_reason(w, node, plan, out)
        self.d.pending.append(pending)
        self._fail_cache[sig] = (self._epochs(node), pending)
        reserving = self._unreclaimable(node, out)
        if reserving is None:
            self._reserving.pop(sig, None)
        else:
            self._reserving[sig] = reserving
            self._reserve(node, reserving)
        return False

    def _attempt(
        self, w: PendingWorkload, node: QuotaNode, plan: FlavorPlan, counts: list[int], preempt: bool
    ) -> _Outcome:
        c = self.c
        cq = node.cq
        assert cq is not None
        blocked = c.namespaces.blocked(w.namespace, w.pod_sets, counts)
        if blocked is not None:
            return _Outcome("fail", namespace_block=blocked)
        evals = [plan.evaluate(c.tree, node, combo, counts, c.fair) for combo in plan.combos()]
        fits: list[Assignment] = []
        deferred: list[Assignment] = []
        for a in evals:
            if a.mode == Mode.FIT:
                (deferred if a.borrow and cq.when_can_borrow == "TryNextFlavor" else fits).append(a)
            elif a.mode == Mode.PREEMPT and cq.when_can_preempt == "MayStopSearch":
                break
        failures: list[tuple[Assignment, PlacementFailure]] = []
        failed: set[int] = set()
        candidates = False
        for a in fits + deferred:
            placed = self._place(w, plan, a, explain=False)
            if isinstance(placed, GangPlacement):
                return _Outcome("admit", a, placed, evals=evals)
            failures.append((a, placed))
            failed.add(id(a))
        if preempt:
            for a in evals:
                if a.mode != Mode.PREEMPT and id(a) not in failed:
                    continue
                ctx = PreemptionCtx(c, w, node, a, self._items(w, plan, a))
                targets = self._targets(ctx, node, a)
                if not targets:
                    continue
                placed = self._place(w, plan, a)
                if isinstance(placed, GangPlacement):
                    return _Outcome("preempt", a, placed, targets, evals)
                for t in reversed(targets):  # could not reproduce the trial placement
                    c.restore(t.info)
                candidates = True
        return _Outcome("fail", evals=evals, failures=failures, candidates=candidates)

    def _place(
        self, w: PendingWorkload, plan: FlavorPlan, a: Assignment, explain: bool = True
    ) -> GangPlacement | PlacementFailure:
        placer = self.c.placer
        if placer is None:
            return GangPlacement()
        return placer.place(self._items(w, plan, a), explain)

    def _items(self, w: PendingWorkload, plan: FlavorPlan, a: Assignment) -> list[GangItem]:
        c = self.c
        out = []
        if c.placer is None:
            return out
        for i, ps in enumerate(w.pod_sets):
            if not a.counts[i]:
                continue
            names = list(dict.fromkeys(a.flavors[i].values()))
            flavors = [c.flavor(n) for n in names]
            topology = None
            level = ps.topology_required or ps.topology_preferred
            if level:
                levels = next((f.topology_levels for f in flavors if f.topology_levels), ())
                if level not in levels:
                    levels = (level,)
                topology = (levels, level, ps.topology_required is not None)
            shape = self._shape_of(w)[0][i]
            out.append(GangItem(c.placer.spec(ps, flavors, shape), a.counts[i], topology))
        return out

    # -- partial admission ----------------------------------------------------------------

    def _partial_possible(self, w: PendingWorkload) -> bool:
        return any(ps.min_count is not None and ps.min_count < ps.count for ps in w.pod_sets)

    def _partial(self, w: PendingWorkload, node: QuotaNode, plan: FlavorPlan, full: _Outcome) -> _Outcome:
        deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in w.pod_sets]
        total = sum(deltas)

        def counts(k: int) -> list[int]:
            return [ps.count - d * k // total for ps, d in zip(w.pod_sets, deltas, strict=True)]

        def fits(k: int) -> bool:
            out = self._attempt(w, node, plan, counts(k), False)
            if out.kind == "admit" and out.placement is not None and self.c.placer is not None:
                self.c.placer.release(out.placement)
            return out.kind == "admit"

        if fits(total):
            lo, hi = 1, total
            while lo < hi:
                mid = (lo + hi) // 2
                if fits(mid):
                    hi = mid
                else:
                    lo = mid + 1
            out = self._attempt(w, node, plan, counts(lo), False)
            if out.kind == "admit":
                return out
        if w.can_preempt:
            out = self._attempt(w, node, plan, counts(total), True)
            if out.kind == "preempt":
                return out
        return full

    # -- commits --------------------------------------------------------------------------

    def _admit(self, w: PendingWorkload, node: QuotaNode, out: _Outcome) -> None:
        a = out.assignment
        assert a is not None and out.placement is not None
        self.c.tree.add_usages(node, a.usage)
        self.c.namespaces.charge(w.namespace, w.pod_sets, a.counts)
        self._bump(node)
        pod_sets = self._pod_sets(w, a, out.placement)
        merged: dict[str, str] = {}
        for fl in a.flavors:
            merged.update(fl)
        self.d.admitted.append(Admission(w, node.name, merged, pod_sets))
        self.d.pods_placed += len(out.placement.pods)

    def _claim(self, w: PendingWorkload, node: QuotaNode, out: _Outcome) -> None:
        a = out.assignment
        assert a is not None
        for t in out.targets:  # victims stay removed: candidate scans skip them
            self.d.preempted.append(Preemption(t.info.wl, t.reason, w))
        self.c.tree.add_usages(node, a.usage)  # the preemptor keeps its claim for the cycle
        self.c.namespaces.charge(w.namespace, w.pod_sets, a.counts)
        self._epoch += 1
        msg, details = R.waiting_message([(t.info.wl.name, t.reason) for t in out.targets], node.name)
        placement = out.placement if out.placement is not None else GangPlacement()
        details["claim"] = [
            {
                "podSet": p.name,
                "count": p.count,
                "flavors": p.flavors,
                "placements": [{"node": pl.node, "gpus": [list(g) for g in pl.gpus]} for pl in p.placements],
            }
            for p in self._pod_sets(w, a, placement)
        ]
        self.d.pending.append(Pending(w, R.WAITING_FOR_PREEMPTION, msg, details))

    def _pod_sets(self, w: PendingWorkload, a: Assignment, placement: GangPlacement) -> list[PodSetAdmission]:
        table = self.c.table
        item_ps = [i for i, ps in enumerate(w.pod_sets) if a.counts[i]]
        per_ps: dict[int, dict[str, NodePlacement]] = {}
        for pod in placement.pods:
            ps_i = item_ps[pod.item]
            assert table is not None
            name = table.names[pod.node]
            by_node = per_ps.setdefault(ps_i, {})
            key = f"{name}\0{pod.milli}"
            pl = by_node.get(key)
            if pl is None:
                pl = by_node[key] = NodePlacement(name, gpu_milli=pod.milli or w.pod_sets[ps_i].gpu_milli)
            pl.gpus.append(pod.devices)
        return [
            PodSetAdmission(ps.name, a.counts[i], dict(a.flavors[i]), list(per_ps.get(i, {}).values()))
            for i, ps in enumerate(w.pod_sets)
            if a.counts[i]
        ]

    # -- capacity reservation -------------------------------------------------------------

    def _unreclaimable(self, node: QuotaNode, out: _Outcome) -> Assignment | None:
        """The assignment whose quota ``node`` reserves after this failure, or None: only when
        quota (not placement) needed preemption, no candidate was found, and the queue
        cannot always reclaim what others borrow (Kueue's CanAlwaysReclaim). A queue
        outside a cohort lends to no one and reserves nothing."""
        cq = node.cq
        if node.parent is None or cq is None or cq.preemption.reclaim_within_cohort == "Any":
            return None
        if out.failures or out.candidates or any(a.mode == Mode.FIT for a in out.evals):
            return None
        return next((a for a in out.evals if a.mode == Mode.PREEMPT), None)

    def _reserve(self, node: QuotaNode, a: Assignment) -> None:
        """Charge ``node`` with what Kueue's quotaResourcesToReserve gives: its unused nominal
        quota up to the request, or (when the assignment would borrow) the request up to
        nominal plus borrowing limit."""
        amounts: dict[FR, int] = {}
        for fr, val in a.usage.items():
            used, nominal = node.usage.get(fr, 0), node.nominal.get(fr, 0)
            if a.borrow:
                limit = node.borrowing_limit.get(fr)
                amount = val if limit is None else min(val, nominal + limit - used)
            else:
                amount = min(val, nominal - used)
            if amount > 0:
                amounts[fr] = amount
        if amounts:
            self.c.tree.add_usages(node, amounts)
            self._reserved.append((node, amounts))
            self._rekey(node)

    def _targets(self, ctx: PreemptionCtx, node: QuotaNode, a: Assignment) -> list[Target] | None:
        """Victims for ``a`` chosen as if nothing were reserved, as Kueue chooses them before
        any reservation is made: a reservation is not usage, so it must not make its queue
        look like it borrows (and its workloads reclaimable). The preemptor must still fit
        with the reservations in place, or it preempts no one."""
        if not self._reserved:
            return find_targets(ctx)
        tree = self.c.tree
        for rnode, amounts in self._reserved:
            tree.add_usages(rnode, amounts, sign=-1)
        try:
            targets = find_targets(ctx)
        finally:
            for rnode, amounts in self._reserved:
                tree.add_usages(rnode, amounts)
        if targets and not tree.fits(node, a.usage, a.borrow):
            for t in reversed(targets):
                self.c.restore(t.info)
            return None
        return targets

    def _end_round(self) -> None:
        """Lift the round's reservations, but a StrictFIFO queue's: its head stays the head."""
        if not self._reserved:
            return
        kept, lifted = [], []
        for node, amounts in self._reserved:
            if node.cq is not None and node.cq.queueing_strategy == "StrictFIFO":
                kept.append((node, amounts))
            else:
                self.c.tree.add_usages(node, amounts, sign=-1)
                lifted.append(node)
        self._reserved = kept
        for node in lifted:
            self._rekey(node)

    def _rekey(self, node: QuotaNode) -> None:
        root = node.root()
        self._reserved_key[id(root)] = tuple(
            (n.name, tuple(sorted(a.items()))) for n, a in self._reserved if n.root() is root
        )

    # -- reasons --------------------------------------------------------------------------

    def _fail_reason(self, w: PendingWorkload, node: QuotaNode, plan: FlavorPlan, out: _Outcome) -> Pending:
        if out.namespace_block is not None:
            message, details = out.namespace_block
            return Pending(w, R.RESOURCE_QUOTA_EXCEEDED, message, details)
        if out.failures:
            # placement failed quietly (it is cheaper, and preemption might have helped):
            # place the first assignment again to explain why, against the same state
            first, f = out.failures[0]
            again = self._place(w, plan, first)
            if isinstance(again, GangPlacement):  # only seeded ties differ: keep the quiet failure
                self.c.placer.release(again)  # type: ignore[union-attr]
            else:
                f = again
            # The flavor choices whose quota fit: what the autoscaler may add nodes for.
            details = {**f.details, "flavorOptions": [[dict(m) for m in a.flavors] for a, _ in out.failures]}
            return Pending(w, f.code, f.message or "no node can take the gang", details)
        evals = out.evals
        quota_limited = next((a for a in evals if not a.exceeds_max), None)
        if quota_limited is None and evals:
            msg, details = R.exceeds_max_message(node.name, evals[0].shortfalls)
            return Pending(w, R.EXCEEDS_MAX_QUOTA, msg, details)
        shortfalls = quota_limited.shortfalls if quota_limited else []
        msg, details = R.quota_message(node.name, shortfalls, node.cq.preemption, w.can_preempt)  # type: ignore[union-attr]
        return Pending(w, R.QUOTA_EXHAUSTED, msg, details)

    def _pending(self, w: PendingWorkload, reason: str, message: str, details: dict | None = None) -> None:
        self.d.pending.append(Pending(w, reason, message, details or {}))

    # -- caches ---------------------------------------------------------------------------

    def _plan(self, sig: int, w: PendingWorkload, node: QuotaNode) -> FlavorPlan:
        """Flavor plans are shared by workloads of the same signature (``sig``: see _sig)."""
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = FlavorPlan(node.cq, w.pod_sets, self.c.flavors)  # type: ignore[arg-type]
        return plan

    def _cached_failure(self, sig: int, node: QuotaNode) -> Pending | None:
        """The outcome of an identical workload (of signature ``sig``) that failed since
        capacity last grew."""
        hit = self._fail_cache.get(sig)
        if hit is not None and hit[0] == self._epochs(node):
            return hit[1]
        return None

    def _sig(self, w: PendingWorkload, node: QuotaNode) -> int:
        """Everything about a workload that decides its outcome, but its identity: as a small
        int (the caches look it up several times per waiting workload; a nested tuple is hashed
        anew each time)."""
        sig = self._sigs.get(id(w))
        if sig is not None:
            return sig
        within = node.cq.preemption.within_cluster_queue  # type: ignore[union-attr]
        ts = w.queue_time if within == "LowerOrNewerEqualPriority" else None
        # A namespace with quotas decides too: its workloads share outcomes only among themselves.
        ns = w.namespace if self.c.namespaces.limited(w.namespace) else ""
        full = (node.name, w.priority, w.can_preempt, ts, self._shape_of(w)[1], ns)
        sig = self._sigs[id(w)] = self._sig_ids.setdefault(full, len(self._sig_ids))
        return sig

    def _shape_of(self, w: PendingWorkload) -> tuple[tuple, int]:
        """``w``'s shape and its number: a signature holds the number, as one holding the
        nested tuple would hash it anew each time (Python does not keep a tuple's hash)."""
        known = self._shapes.get(id(w.pod_sets))
        if known is None:
            shape = tuple(ps.shape() for ps in w.pod_sets)
            known = self._shapes[id(w.pod_sets)] = (
                shape,
                self._shape_ids.setdefault(shape, len(self._shape_ids)),
            )
        return known

    def _epochs(self, node: QuotaNode) -> tuple:
        root = self._root(node)
        return (self._epoch, self._root_epoch.get(root, 0), self._reserved_key.get(root, ()))

    def _bump(self, node: QuotaNode) -> None:
        # an admission into a cohort may make a queue borrow, which creates reclaim candidates
        if node.parent is not None:
            root = self._root(node)
            self._root_epoch[root] = self._root_epoch.get(root, 0) + 1

    def _root(self, node: QuotaNode) -> int:
        """The id of ``node``'s tree root (asked for every waiting workload: walked once a queue)."""
        root = self._roots.get(id(node))
        if root is None:
            root = self._roots[id(node)] = id(node.root())
        return root
