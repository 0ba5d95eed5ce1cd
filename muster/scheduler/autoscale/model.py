"""The autoscaler's inputs and output: pools, room on nodes, pending gangs, the plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from muster.scheduler.snapshot import GPU, GPU_MILLI, Flavor, Node, PodSet

__all__ = ["Bin", "Gang", "NewNode", "Pool", "ScalePlan", "template_totals"]


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
        per = template_totals(self.template)
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


def template_totals(node: Node) -> dict[str, int]:
    out = {r: v for r, v in node.allocatable.items() if r != GPU}
    out[GPU] = node.gpus * GPU_MILLI
    return out
