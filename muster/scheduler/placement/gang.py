"""All-or-nothing placement of a workload's pods onto nodes and devices.

:class:`Placer` owns one cycle's node table, the policy's scorer and the caches that keep
placement fast: a static node mask per distinct set of constraints, and per distinct pod
shape the feasibility and score of every node, recomputed only for nodes whose state
changed since (the table's change log). Placing a gang binds its pods one at a time, the
largest pod sets first (by GPU, then CPU demand), each on the best-scoring feasible node,
or through :mod:`.topology` when it asks for a topology
level; if any pod finds no node, every pod bound so far is released and the failure says
why, for the pod that failed.

Ties between equally scored nodes go to the node ranked first in a seeded random
permutation drawn once per cycle (the ``random`` policy alone picks uniformly among them).
A fixed order is what the FGD simulator does: its kube-scheduler fork picks the smallest
node name among the top scores, and node names carry a seeded random prefix. Because the
policies' integer scores tie often, the order matters: a fresh random pick per pod spreads
pods over equally scored nodes (FGD ends near 90% allocation on openb instead of the
paper's 95%), a fixed order keeps filling the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from muster.scheduler.nodes import NodeTable
from muster.scheduler.placement.devices import choose_devices
from muster.scheduler.placement.filters import PodSpec, dynamic_mask, explain, static_mask
from muster.scheduler.placement.fragmentation import FragModel
from muster.scheduler.placement.scores import SCORERS, ScoreContext
from muster.scheduler.placement.topology import TopologyFailure, node_capacity, plan_topology
from muster.scheduler.policy import Policy, TypicalPod
from muster.scheduler.snapshot import CPU, Flavor, PodSet

__all__ = ["BoundPod", "GangItem", "GangPlacement", "PlacementFailure", "Placer"]

_NEG = -np.inf


@dataclass(slots=True)
class GangItem:
    """``count`` pods of ``spec``; ``topology`` is (levels, level, required) when asked."""

    spec: PodSpec
    count: int
    topology: tuple[tuple[str, ...], str, bool] | None = None


@dataclass(slots=True)
class BoundPod:
    """One bound pod: which gang item, where, which devices and milli on each."""

    item: int
    spec: PodSpec
    node: int
    devices: tuple[int, ...]
    milli: int


@dataclass(slots=True)
class GangPlacement:
    """Where every pod of the gang went (in binding order)."""

    pods: list[BoundPod] = field(default_factory=list)


@dataclass(slots=True)
class PlacementFailure:
    """InsufficientResources, TopologyUnsatisfiable or GangIncomplete, with the sentence."""

    code: str
    message: str
    details: dict = field(default_factory=dict)
    spec: PodSpec | None = None  # the pod that found no node


class _Entry:
    __slots__ = ("pos", "scores")

    def __init__(self, n: int) -> None:
        self.scores = np.full(n, _NEG)
        self.pos = -1


class Placer:
    """Gang placement against one mutable node table."""

    def __init__(
        self, table: NodeTable, policy: Policy, rng: np.random.Generator, typical: Sequence[TypicalPod]
    ):
        self.table = table
        self.policy = policy
        self.rng = rng
        self.rank = rng.permutation(len(table))  # tie order, see the module doc
        frag = FragModel(table, typical) if policy.placement == "fgd" else None
        self.ctx = ScoreContext(policy, frag)
        self.score_fn = SCORERS[policy.placement]
        self._specs: dict[tuple, PodSpec] = {}
        self._static: dict[tuple, np.ndarray] = {}
        self._entries: dict[tuple, _Entry] = {}

    # -- specs and masks ------------------------------------------------------------------

    def spec(self, pod_set: PodSet, flavors: Sequence[Flavor], shape: tuple | None = None) -> PodSpec:
        """The pod spec of ``pod_set`` under ``flavors``; pod sets with the same ``shape``
        (all that decides placement) share one."""
        key = (shape if shape is not None else id(pod_set), tuple(f.name for f in flavors))
        hit = self._specs.get(key)
        if hit is None:
            hit = self._specs[key] = PodSpec.build(self.table, pod_set, flavors)
        return hit

    def static(self, spec: PodSpec) -> np.ndarray:
        hit = self._static.get(spec.key)
        if hit is None:
            hit = self._static[spec.key] = static_mask(self.table, spec)
        return hit

    def scores(self, spec: PodSpec) -> np.ndarray:
        """Each node's score for one more pod of ``spec`` (-inf where it does not fit)."""
        table = self.table
        key = spec.shape_key
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(len(table))
        log = table.log
        if entry.pos < 0 or len(log) - entry.pos > len(table) // 8:
            self._score_rows(spec, entry, np.arange(len(table)))
        elif entry.pos < len(log):
            tail = log[entry.pos :]
            changed = (
                np.fromiter(set(tail), dtype=np.intp) if len(tail) > 1 else np.array(tail, dtype=np.intp)
            )
            self._score_rows(spec, entry, changed)
        entry.pos = len(log)
        return entry.scores

    def _score_rows(self, spec: PodSpec, entry: _Entry, idx: np.ndarray) -> None:
        ok = self.static(spec)[idx] & dynamic_mask(self.table, spec, idx)
        good = idx[ok]
        entry.scores[idx] = _NEG
        if len(good):
            entry.scores[good] = self.score_fn(self.table, good, spec, self.ctx)

    def best_node(self, spec: PodSpec, exclude: np.ndarray | None = None) -> int:
        """The best node for one more pod of ``spec`` (-1 when none fits)."""
        scores = self.scores(spec)
        if exclude is not None:
            scores = np.where(exclude, _NEG, scores)
        best = scores.max() if len(scores) else _NEG
        if best == _NEG:
            return -1
        ties = np.flatnonzero(scores == best)
        if len(ties) == 1:
            return int(ties[0])
        if self.policy.placement == "random":
            return int(ties[self.rng.integers(len(ties))])
        return int(ties[np.argmin(self.rank[ties])])

    # -- gangs ----------------------------------------------------------------------------

    def place(self, items: Sequence[GangItem], explain: bool = True) -> GangPlacement | PlacementFailure:
        """Bind every pod of the gang, or none (then say why; with ``explain`` False the
        failure only names the pod that found no node, which is cheaper)."""
        placement = GangPlacement()
        anti = (
            np.zeros(len(self.table), dtype=bool)
            if any(i.spec.pod_set.anti_affinity for i in items)
            else None
        )
        total = sum(i.count for i in items)
        for ii in sorted(range(len(items)), key=lambda i: (*_size_key(items[i].spec), i)):
            item = items[ii]
            spec = item.spec
            excl = anti if spec.pod_set.anti_affinity else None
            if item.topology is not None and item.count:
                failure = self._place_topology(ii, item, placement, excl, total, explain)
                if failure is not None:
                    self.release(placement)
                    return failure
                continue
            for k in range(item.count):
                node = self.best_node(spec, excl)
                if node < 0:
                    failure = (
                        self._explain(spec, k, excl, len(placement.pods), total)
                        if explain
                        else PlacementFailure("InsufficientResources", "", spec=spec)
                    )
                    self.release(placement)
                    return failure
                self._bind(ii, spec, node, placement)
                if excl is not None:
                    excl[node] = True
        return placement

    def release(self, placement: GangPlacement) -> None:
        """Unbind a placement (a failed gang, a trial, or an admission taken back)."""
        for pod in reversed(placement.pods):
            s = pod.spec
            self.table.unbind(pod.node, s.cols, s.vals, pod.devices, pod.milli, s.tag)
        placement.pods.clear()

    # -- internals ------------------------------------------------------------------------

    def _bind(self, item: int, spec: PodSpec, node: int, placement: GangPlacement) -> None:
        devices, milli = choose_devices(self.table, node, spec, self.ctx, self.rng)
        self.table.bind(node, spec.cols, spec.vals, devices, milli, spec.tag)
        placement.pods.append(BoundPod(item, spec, node, devices, milli))

    def _place_topology(
        self,
        ii: int,
        item: GangItem,
        placement: GangPlacement,
        excl: np.ndarray | None,
        total: int,
        explain: bool,
    ) -> PlacementFailure | None:
        spec = item.spec
        levels, level, required = item.topology  # type: ignore[misc]
        mask = self.static(spec)
        if excl is not None:
            mask = mask & ~excl
        cap = node_capacity(self.table, spec, mask, excl is not None)
        plan = plan_topology(self.table, cap, levels, level, required, item.count)
        if isinstance(plan, TopologyFailure):
            if not explain:
                return PlacementFailure("TopologyUnsatisfiable", "", spec=spec)
            if int(cap.sum()) < item.count:
                return self._explain(spec, int(cap.sum()), excl, len(placement.pods), total)
            kind = "required" if required else "preferred"
            msg = (
                f"topology {plan.level} ({kind} by pod set {spec.pod_set.name}) allows to fit only "
                f"{plan.fit} out of {plan.count} pods in one domain"
                + (f" (largest: {plan.largest})" if plan.largest else "")
                + f"; {int(cap.sum())} pods would fit across domains, which a required level never allows"
            )
            facts = {"level": plan.level, "fit": plan.fit, "count": plan.count}
            return PlacementFailure("TopologyUnsatisfiable", msg, facts, spec)
        for node in plan:
            self._bind(ii, spec, node, placement)
            if excl is not None:
                excl[node] = True
        return None

    def _explain(
        self, spec: PodSpec, k: int, excl: np.ndarray | None, placed: int, total: int
    ) -> PlacementFailure:
        name = f"{spec.pod_set.name}-{k}"
        scores = self.scores(spec)
        prefix = f"after placing {placed} of the gang's {total} pods, " if placed else ""
        if excl is not None and bool((excl & (scores > _NEG)).any()):
            hosts = int((scores > _NEG).sum())
            msg = (
                f"{prefix}pod {name} needs a node of its own (anti-affinity within the gang) but only "
                f"{hosts} nodes that could take it are left, all already used by the gang"
            )
            facts = {"placed": placed, "pods": total, "hosts": hosts}
            return PlacementFailure("GangIncomplete", msg, facts, spec)
        text, details = explain(self.table, spec, name, excl)
        details.update({"placed": placed, "pods": total})
        return PlacementFailure("InsufficientResources", prefix + text, details, spec)


def _size_key(spec: PodSpec) -> tuple:
    cpu = spec.pod_set.requests.get(CPU, 0)
    return (-spec.gpus * max(spec.milli, 1), -cpu)
