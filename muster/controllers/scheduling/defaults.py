"""What a single user needs on first start (DESIGN §4): a ``default`` ResourceFlavor, a
``default`` ClusterQueue whose quota is the registered Nodes' capacity, and a ``default``
LocalQueue in namespace ``default``, so ``muster apply -f job.yaml`` just works.

With NodePools the quota is what the cluster can ever hold: the Nodes no pool made, plus
each pool's ``maxNodes`` nodes, so work may queue for nodes a pool has not made yet (the
autoscaler makes them; docs/capacity.md).

The default ClusterQueue's quota follows the Nodes while it carries the annotation
:data:`MANAGED_ANNOTATION`: the Node controller calls :func:`sync_default_cluster_queue`
whenever Nodes change. A user who applies their own ``default`` ClusterQueue replaces the
annotations, which hands the quota over to them for good.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.gpusharing import gpu_replicas
from muster.api.labels import NODEPOOL_LABEL as POOL_LABEL
from muster.api.quantity import Quantity, parse_quantity
from muster.store.base import ApplyResult, Conflict, NotFound, Obj, Store, Writer

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_NAMESPACE",
    "DEFAULT_RESOURCES",
    "MANAGED_ANNOTATION",
    "create_defaults",
    "default_cluster_queue",
    "default_objects",
    "node_quota",
    "sync_default_cluster_queue",
]

DEFAULT_NAME = "default"
DEFAULT_NAMESPACE = "default"
DEFAULT_RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
MANAGED_ANNOTATION = "muster.dev/quota-from-nodes"
_RETRIES = 10


def create_defaults(store: Store) -> list[ApplyResult]:
    """Create the defaults, in one transaction, when the store has no queue set-up at all
    (no ResourceFlavor, ClusterQueue or LocalQueue): on the first start, and never over a
    set-up of the user's own (a default they deleted while keeping other queues stays
    deleted). Returns what was created.
    """
    if any(store.list(kind).items for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue")):
        return []
    nodes = store.list("Node").items
    return store.apply(default_objects(nodes))


def default_objects(nodes: Iterable[Obj] = ()) -> list[Obj]:
    """The default flavor, ClusterQueue and LocalQueue as validated wire dicts."""
    docs: list[dict[str, Any]] = [
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": DEFAULT_NAME}},
        default_cluster_queue(node_quota(nodes)),
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": DEFAULT_NAME, "namespace": DEFAULT_NAMESPACE},
            "spec": {"clusterQueue": DEFAULT_NAME},
        },
    ]
    return [_validated(doc) for doc in docs]


def default_cluster_queue(quota: Mapping[str, Quantity]) -> dict[str, Any]:
    """The managed ``default`` ClusterQueue for ``quota`` (cpu, memory and GPUs at least)."""
    resources = [*DEFAULT_RESOURCES, *sorted(set(quota) - set(DEFAULT_RESOURCES))]
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": DEFAULT_NAME, "annotations": {MANAGED_ANNOTATION: "true"}},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": resources,
                    "flavors": [
                        {
                            "name": DEFAULT_NAME,
                            "resources": [
                                {"name": r, "nominalQuota": str(quota.get(r, Quantity(0)))} for r in resources
                            ],
                        }
                    ],
                }
            ],
            "preemption": {"withinClusterQueue": "LowerPriority"},
        },
    }


def node_quota(nodes: Iterable[Obj], pools: Iterable[Obj] = ()) -> dict[str, Quantity]:
    """The sum of the Nodes' allocatable (capacity where a Node reports no allocatable) of
    cpu, memory and whole GPUs (times the replicas of a time-sliced node's GPUs, as the device
    plugin advertises them): what the default queue may hand out. With ``pools``
    (NodePools), their nodes count as ``maxNodes`` of the pool's template instead."""
    total: dict[str, Quantity | None] = dict.fromkeys(DEFAULT_RESOURCES)
    pools = list(pools)
    pool_names = {p["metadata"]["name"] for p in pools}
    for pool in pools:
        spec = pool.get("spec") or {}
        template = spec.get("template") or {}
        count = int(spec.get("maxNodes", 10))
        each = {"cpu": template.get("cpu") or "8", "memory": template.get("memory") or "64Gi"}
        if int(template.get("gpus") or 0) and not template.get("mig"):
            each["nvidia.com/gpu"] = str(template["gpus"])
        for name, value in each.items():
            q = parse_quantity(value) * count
            total[name] = q if total[name] is None else total[name] + q
    for node in nodes:
        if (node["metadata"].get("labels") or {}).get(POOL_LABEL) in pool_names:
            continue  # counted with its pool

        status = node.get("status") or {}
        resources = status.get("allocatable") or status.get("capacity") or {}
        replicas = gpu_replicas(node)
        for name in DEFAULT_RESOURCES:
            if name in resources:
                q = parse_quantity(resources[name])
                if name == "nvidia.com/gpu" and replicas > 1:
                    q = q * replicas
                # Start from the first node's value, not 0, so the sum keeps its units (64Gi).
                total[name] = q if total[name] is None else total[name] + q
    return {name: q if q is not None else Quantity(0) for name, q in total.items()}


def sync_default_cluster_queue(store: Writer, nodes: Iterable[Obj], pools: Iterable[Obj] = ()) -> Obj | None:
    """Set the managed default ClusterQueue's quota to the sum of ``nodes`` (every Node) and
    what ``pools`` (every NodePool) may add (see :func:`node_quota`).

    Returns the updated ClusterQueue, or None when there is nothing to do: it is gone, no
    longer managed (the annotation was removed), or already in sync.
    """
    for _ in range(_RETRIES):
        try:
            current = store.get("ClusterQueue", DEFAULT_NAME)
        except NotFound:
            return None
        if (current["metadata"].get("annotations") or {}).get(MANAGED_ANNOTATION) != "true":
            return None
        wanted = _validated(default_cluster_queue(node_quota(nodes, pools)))
        if wanted["spec"] == current["spec"]:
            return None
        current["spec"] = wanted["spec"]
        try:
            return store.update(current)
        except Conflict:
            continue  # someone changed it meanwhile: re-read and decide again
        except NotFound:
            return None
    raise Conflict("could not sync the default ClusterQueue's quota: it keeps changing")


def _validated(doc: dict[str, Any]) -> Obj:
    obj = registry.validate(doc).obj
    assert obj is not None  # native kinds always give an object
    return obj
