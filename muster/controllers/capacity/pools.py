"""NodePools and NodeClaims read into what the autoscaler and the providers need.

A pool's node, as it will be once up, is a Node wire dict (:func:`template_node`) carrying the
template's labels plus the ones every pool node gets (``muster.dev/nodepool``, the capacity
type under Muster's and Karpenter's keys, the price, the GPU feature discovery labels) and the
template's taints plus, on spot, ``muster.dev/capacity-type=spot:NoSchedule``. The planner
sees it through the same conversion as a real Node, so what it plans the scheduler places.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from muster.api.conditions import epoch
from muster.api.labels import (
    CAPACITY_TYPE_LABEL,
    KARPENTER_CAPACITY_TYPE_LABEL,
    NODECLAIM_LABEL,
    NODEPOOL_LABEL,
    PRICE_LABEL,
    SPOT_TAINT_KEY,
)
from muster.api.quantity import parse_quantity
from muster.controllers.scheduling.cluster import scheduler_node
from muster.providers.base import NodeRequest
from muster.runtime.base import GPU_COUNT_LABEL, GPU_MEMORY_LABEL, GPU_PRODUCT_LABEL, NodeTaint
from muster.scheduler import GPU, Node, to_units
from muster.scheduler.autoscale import Pool

__all__ = [
    "ACTIVE_PHASES",
    "claim_of_node",
    "claims_of",
    "eta_of",
    "node_labels",
    "node_request",
    "node_taints",
    "phase",
    "pool_view",
    "price_of",
    "scheduler_template",
    "template_node",
]

Obj = dict[str, Any]
# Claims that count against their pool: every phase but the end of the line.
ACTIVE_PHASES = ("Pending", "Launched", "Ready", "Draining")
SPOT_TAINT = {"key": SPOT_TAINT_KEY, "value": "spot", "effect": "NoSchedule"}


def phase(claim: Obj) -> str:
    return str((claim.get("status") or {}).get("phase") or "Pending")


def node_labels(pool_name: str, spec: Obj, claim: str | None = None) -> dict[str, str]:
    """The labels every node of the pool carries (``claim``: the NodeClaim it was made for)."""
    template = spec.get("template") or {}
    capacity = spec.get("capacityType") or "on-demand"
    labels = dict(template.get("labels") or {})
    labels.update(
        {
            NODEPOOL_LABEL: pool_name,
            CAPACITY_TYPE_LABEL: capacity,
            KARPENTER_CAPACITY_TYPE_LABEL: capacity,
            PRICE_LABEL: _price_text(float(spec.get("pricePerHour") or 0.0)),
        }
    )
    if claim:
        labels[NODECLAIM_LABEL] = claim
    return labels


def node_taints(spec: Obj) -> list[Obj]:
    """The template's taints, plus the spot taint on a spot pool."""
    taints = [dict(t) for t in (spec.get("template") or {}).get("taints") or []]
    if spec.get("capacityType") == "spot" and not any(t.get("key") == SPOT_TAINT_KEY for t in taints):
        taints.append(dict(SPOT_TAINT))
    return taints


def template_node(pool_name: str, spec: Obj) -> Obj:
    """A Node wire dict for one node of the pool, as it will register."""
    template = spec.get("template") or {}
    gpus = int(template.get("gpus") or 0)
    model = str(template.get("gpuModel") or "")
    memory = parse_quantity(template.get("gpuMemory") or "16Gi")
    labels = node_labels(pool_name, spec)
    allocatable: dict[str, str] = {
        "cpu": str(template.get("cpu") or "8"),
        "memory": str(template.get("memory") or "64Gi"),
    }
    devices = []
    mig = template.get("mig")
    if gpus:
        labels.update(
            {
                GPU_PRODUCT_LABEL: model,
                GPU_MEMORY_LABEL: str(memory.as_int() // (1 << 20)),
                GPU_COUNT_LABEL: str(gpus),
            }
        )
        if mig:
            allocatable[f"nvidia.com/mig-{mig['profile']}"] = str(gpus * int(mig["slicesPerGpu"]))
        else:
            allocatable[GPU] = str(gpus)
        devices = [
            {"index": i, "model": model, "memory": str(memory), "health": "Healthy", "migMode": bool(mig)}
            for i in range(gpus)
        ]
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Node",
        "metadata": {"name": f"{pool_name} (new node)", "labels": labels},
        "spec": {"taints": node_taints(spec)},
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "gpus": devices,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pool_view(pool: Obj, claims: Iterable[Obj], now: float) -> Pool:
    """The pool as the planner sees it: its template, price, bounds and the nodes it has."""
    name = pool["metadata"]["name"]
    spec = pool["spec"]
    node = scheduler_node(template_node(name, spec))
    mine = [c for c in claims if c["spec"].get("nodePool") == name and phase(c) in ACTIVE_PHASES]
    limits = {r: to_units(r, q) for r, q in (spec.get("limits") or {}).items()}
    per = {r: v for r, v in node.allocatable.items()}
    per[GPU] = node.gpus * 1000
    usage = {r: per.get(r, 0) * len(mine) for r in limits}
    return Pool(
        name=name,
        template=node,
        price=float(spec.get("pricePerHour") or 0.0),
        max_nodes=int(spec.get("maxNodes", 10)),
        min_nodes=int(spec.get("minNodes") or 0),
        nodes=len(mine),
        spot=spec.get("capacityType") == "spot",
        weight=int(spec.get("weight") or 0),
        limits=limits,
        usage=usage,
        ttl=float((spec.get("consolidation") or {}).get("ttlSecondsAfterEmpty", 300.0)),
        eta=float(spec.get("provisioningDelaySeconds", 60.0)),
    )


def node_request(claim: Obj) -> NodeRequest:
    """What the provider is asked to make for ``claim``."""
    spec = claim["spec"]
    name = claim["metadata"]["name"]
    template = spec.get("template") or {}
    pool_spec = {
        "template": template,
        "capacityType": spec.get("capacityType"),
        "pricePerHour": spec.get("pricePerHour"),
    }
    mig = template.get("mig") or {}
    return NodeRequest(
        claim=name,
        pool=spec["nodePool"],
        capacity_type=spec.get("capacityType") or "on-demand",
        price_per_hour=float(spec.get("pricePerHour") or 0.0),
        gpus=int(template.get("gpus") or 0),
        gpu_model=str(template.get("gpuModel") or ""),
        gpu_memory_bytes=parse_quantity(template.get("gpuMemory") or "16Gi").as_int(),
        cpu=str(template.get("cpu") or "8"),
        memory=str(template.get("memory") or "64Gi"),
        labels=node_labels(spec["nodePool"], pool_spec, claim=name),
        taints=tuple(
            NodeTaint(t["key"], t.get("value") or "", t.get("effect") or "NoSchedule")
            for t in node_taints(pool_spec)
        ),
        mig_profile=str(mig.get("profile") or ""),
        mig_slices=int(mig.get("slicesPerGpu") or 0),
        ready_in_seconds=float(spec.get("provisioningDelaySeconds") or 0.0),
        config=dict(spec.get("providerConfig") or {}),
    )


def scheduler_template(claim: Obj) -> Node:
    """The node a claim asked for, as the scheduler will see it once up."""
    spec = claim["spec"]
    pool_spec = {
        "template": spec.get("template") or {},
        "capacityType": spec.get("capacityType"),
        "pricePerHour": spec.get("pricePerHour"),
    }
    return scheduler_node(template_node(spec["nodePool"], pool_spec))


def claims_of(claims: Iterable[Obj], pool: str) -> list[Obj]:
    return [c for c in claims if c["spec"].get("nodePool") == pool]


def claim_of_node(node: Obj, claims: Iterable[Obj]) -> Obj | None:
    """The NodeClaim a Node was made for: by its label, else by the claim's recorded node."""
    name = node["metadata"]["name"]
    label = (node["metadata"].get("labels") or {}).get(NODECLAIM_LABEL)
    for c in claims:
        cname = c["metadata"]["name"]
        if cname == label or (c.get("status") or {}).get("nodeName") == name:
            return c
    return None


def price_of(node: Obj) -> float | None:
    """A node's price per hour from its label, or None when it has none (or a bad one)."""
    text = (node["metadata"].get("labels") or {}).get(PRICE_LABEL)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def eta_of(claim: Obj, now: float) -> float:
    """Seconds until the claim's node should be Ready (0 when overdue or unknown)."""
    at = epoch((claim.get("status") or {}).get("expectedReadyAt"))
    return max(0.0, at - now) if at is not None else 0.0


def _price_text(price: float) -> str:
    text = f"{price:.6f}".rstrip("0").rstrip(".")
    return text or "0"
