"""The scheduler's output, and a helper that applies it to a snapshot.

:class:`Decisions` lists, in the order the cycle made them, the workloads admitted (with
flavors and per-pod node and device indices), the workloads preempted (victim, reason,
preemptor) and the workloads still pending (a stable reason code from
:mod:`muster.scheduler.reasons`, a sentence with the numbers, and the same facts as a
dict). A preemptor is pending with ``WaitingForPreemption``: it is admitted in a later
cycle, once its victims are gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from muster.scheduler.nodes import NodeTable, gpu_tag
from muster.scheduler.snapshot import (
    AdmittedPodSet,
    AdmittedWorkload,
    Node,
    PendingWorkload,
    PodBinding,
    Snapshot,
)

__all__ = [
    "Admission",
    "Decisions",
    "GrowthHeld",
    "NodePlacement",
    "Pending",
    "PodSetAdmission",
    "Preemption",
    "Resize",
    "apply_decisions",
    "bind_pod",
    "unbind_pod",
]


@dataclass(slots=True)
class NodePlacement:
    """Pods of one pod set on one node; ``gpus`` holds each pod's device indices, each
    device charged ``gpu_milli`` (a memory-sized share differs per node model)."""

    node: str
    gpus: list[tuple[int, ...]] = field(default_factory=list)
    gpu_milli: int = 1000

    @property
    def pods(self) -> int:
        return len(self.gpus)


@dataclass(slots=True)
class PodSetAdmission:
    """How many pods of a pod set were admitted (less than asked under partial admission),
    the flavor of each resource, and where they run (empty in a quota-only snapshot)."""

    name: str
    count: int
    flavors: dict[str, str]
    placements: list[NodePlacement] = field(default_factory=list)


class _Named:
    """``name``/``namespace`` of the workload a decision is about."""

    __slots__ = ()
    workload: PendingWorkload | AdmittedWorkload

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def namespace(self) -> str:
        return self.workload.namespace


@dataclass(slots=True)
class Admission(_Named):
    """An admitted workload. ``flavors`` merges the pod sets' resource -> flavor maps."""

    workload: PendingWorkload
    cluster_queue: str
    flavors: dict[str, str]
    pod_sets: list[PodSetAdmission]


@dataclass(slots=True)
class Preemption(_Named):
    """A victim: InClusterQueue, InCohortReclamation, InCohortFairSharing or
    InCohortReclaimWhileBorrowing, and the pending workload it makes room for."""

    workload: AdmittedWorkload
    reason: str
    preemptor: PendingWorkload


@dataclass(slots=True)
class Pending(_Named):
    """A workload left pending: reason code, human message, and the facts behind it."""

    workload: PendingWorkload
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Resize(_Named):
    """An admitted elastic workload grown in place: per grown pod set its new ``count`` and,
    in ``placements``, where the added pods go (the pods it has keep their nodes and devices).
    ``previous`` is each grown pod set's count before."""

    workload: AdmittedWorkload
    pod_sets: list[PodSetAdmission]
    previous: dict[str, int]


@dataclass(slots=True)
class GrowthHeld(_Named):
    """An elastic workload below its full size that did not grow (fully): a reason code of
    :mod:`muster.scheduler.grow`, the sentence, and the facts behind it."""

    workload: AdmittedWorkload
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Decisions:
    """One cycle's result; ``workloads_considered`` counts pending workloads decided and
    ``pods_placed`` the pods bound to nodes by the admissions (and resizes)."""

    admitted: list[Admission] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    resized: list[Resize] = field(default_factory=list)
    held: list[GrowthHeld] = field(default_factory=list)
    workloads_considered: int = 0
    pods_placed: int = 0


def bind_pod(table: NodeTable, node: int, requests: dict[str, int], gpus: Sequence[int], milli: int) -> None:
    """Charge one pod with ``requests`` (units, no GPUs) and ``milli`` on each of ``gpus``."""
    cols, vals = _cols(table, requests)
    table.bind(node, cols, vals, gpus, milli, gpu_tag(len(gpus), milli))


def unbind_pod(
    table: NodeTable, node: int, requests: dict[str, int], gpus: Sequence[int], milli: int
) -> None:
    """Release what :func:`bind_pod` charged."""
    cols, vals = _cols(table, requests)
    table.unbind(node, cols, vals, gpus, milli, gpu_tag(len(gpus), milli))


def apply_decisions(snapshot: Snapshot, decisions: Decisions, now: float = 0.0) -> Snapshot:
    """The snapshot after the decisions took effect, for drivers that loop cycles.

    Admitted workloads leave ``pending`` and join ``admitted`` (admission time ``now``) with
    their pods bound; preempted workloads are removed and their pods released (drivers that
    requeue victims add them back to ``pending`` themselves). Pending workloads stay. The
    input is not modified; ``nodes`` comes back as a :class:`NodeTable`.
    """
    table: NodeTable | None = None
    if snapshot.nodes is not None:
        table = as_table(snapshot.nodes).copy()
    victims = {id(p.workload) for p in decisions.preempted}
    admitted = [w for w in snapshot.admitted if id(w) not in victims]
    if table is not None:
        for p in decisions.preempted:
            for ps in p.workload.pod_sets:
                for pod in ps.pods:
                    milli = ps.gpu_milli if pod.gpu_milli is None else pod.gpu_milli
                    unbind_pod(table, table.index[pod.node], ps.requests, pod.gpus, milli)
    done = set()
    for a in decisions.admitted:
        done.add(id(a.workload))
        specs = {ps.name: ps for ps in a.workload.pod_sets}
        pod_sets = []
        for psa in a.pod_sets:
            spec = specs[psa.name]
            pods = tuple(
                PodBinding(pl.node, g, None if pl.gpu_milli == spec.gpu_milli else pl.gpu_milli)
                for pl in psa.placements
                for g in pl.gpus
            )
            if table is not None:
                for pl in psa.placements:
                    for g in pl.gpus:
                        bind_pod(table, table.index[pl.node], spec.requests, g, pl.gpu_milli)
            pod_sets.append(
                AdmittedPodSet(
                    name=psa.name,
                    count=psa.count,
                    requests=spec.requests,
                    gpus=spec.gpus,
                    gpu_milli=spec.gpu_milli,
                    flavors=psa.flavors,
                    pods=pods,
                )
            )
        w = a.workload
        admitted.append(
            AdmittedWorkload(
                name=w.name,
                queue=a.cluster_queue,
                pod_sets=pod_sets,
                namespace=w.namespace,
                priority=w.priority,
                creation_time=w.creation_time,
                admission_time=now,
            )
        )
    grown = {id(r.workload): r for r in decisions.resized}
    admitted = [_grown(w, grown[id(w)], table) if id(w) in grown else w for w in admitted]
    pending = [w for w in snapshot.pending if id(w) not in done]
    return replace(snapshot, admitted=admitted, pending=pending, nodes=table)


def _grown(w: AdmittedWorkload, r: Resize, table: NodeTable | None) -> AdmittedWorkload:
    """``w`` after the resize ``r``: grown pod sets with the added pods bound."""
    by_name = {psa.name: psa for psa in r.pod_sets}
    pod_sets = []
    for ps in w.pod_sets:
        psa = by_name.get(ps.name)
        if psa is None:
            pod_sets.append(ps)
            continue
        added = []
        for pl in psa.placements:
            for g in pl.gpus:
                added.append(PodBinding(pl.node, g, None if pl.gpu_milli == ps.gpu_milli else pl.gpu_milli))
                if table is not None:
                    bind_pod(table, table.index[pl.node], ps.requests, g, pl.gpu_milli)
        pod_sets.append(replace(ps, count=psa.count, pods=ps.pods + tuple(added)))
    return replace(w, pod_sets=pod_sets)


def as_table(nodes: list[Node] | NodeTable) -> NodeTable:
    """``nodes`` as a table (built when given as a list)."""
    return nodes if isinstance(nodes, NodeTable) else NodeTable.from_nodes(nodes)


def _cols(table: NodeTable, requests: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    cols, vals, _ = table.request_columns(requests)
    return cols, vals
