"""A gang as one Ray placement group whose bundles are pinned to the nodes Muster chose.

One bundle per pod: the GPUs it is bound to (a share as a fraction of one), the CPU and memory
its containers request, so Ray's own accounting agrees with Muster's and no other Ray work
takes them. Each bundle carries the label selector ``ray.io/node-id = <the Ray node of the
pod's Muster node>``: Ray may place it there or nowhere, so Ray's scheduler never picks a node
(strategy ``PACK`` only orders the search; the selectors decide). Ray reserves a placement
group as a whole or not at all, so the gang starts only once every bundle is reserved.

Waiting never blocks: the group's ``ready()`` ObjectRef is waited on with everything else the
runtime waits for. A group not ready by its deadline (``GangLaunch.timeout_seconds``), or
pinned to a node Ray reports dead, is removed and the gang fails with a message naming what
each bundle needed and where; nothing of it ran.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group

from muster.api.quantity import Quantity, QuantityError
from muster.runtime.base import GPU_RESOURCE, DeviceBinding, GangLaunch, LaunchError, PodLaunch

__all__ = ["MIN_MEMORY", "Gang", "bundle", "create_group", "describe", "gang_key"]

# A bundle may not be empty: a pod that asks for nothing reserves this much memory.
MIN_MEMORY = 1 << 20


@dataclass
class Gang:
    """One gang being placed or placed: its group, the Ray node of each bundle, its deadline."""

    launch: GangLaunch
    bundles: list[dict[str, float]]
    node_ids: list[str]
    deadline: float  # monotonic
    group: PlacementGroup | None = None
    ready_ref: Any = None  # the group's ready() ObjectRef while it is being placed
    placed: bool = False
    failed: str | None = None
    members: list[str] = field(default_factory=list)  # pod uids, in bundle order
    shutdowns: list[Any] = field(default_factory=list)  # members' shutdown() refs, once released

    @property
    def key(self) -> str:
        return gang_key(self.launch)


def gang_key(gang: GangLaunch) -> str:
    """One start of one Workload's gang. A requeued Workload keeps its uid while the earlier
    start's group may still be waiting to be removed (its members not yet released), so the
    key (and the group's name) also names the first member pod: every start makes new pods."""
    first = gang.members[0].pod.ref.uid[:8] if gang.members else ""
    return f"{gang.namespace}/{gang.workload}/{gang.uid[:8]}/{first}"


def bundle(pod: PodLaunch, devices: DeviceBinding) -> dict[str, float]:
    """What Ray reserves for ``pod``: its bound GPUs, its containers' CPU and memory requests."""
    cpu = Fraction(0)
    memory = Fraction(0)
    for i, c in enumerate(pod.containers):
        cpu += _request(c.requests, "cpu", f"spec.containers[{i}].resources.requests.cpu")
        memory += _request(c.requests, "memory", f"spec.containers[{i}].resources.requests.memory")
    out: dict[str, float] = {}
    if devices.gpus:
        out["GPU"] = len(devices.gpus) if devices.gpu_milli >= 1000 else devices.gpu_milli / 1000
    if cpu > 0:
        out["CPU"] = round(float(cpu), 4)
    if memory > 0:
        out["memory"] = float(int(memory))
    if not out:
        out["memory"] = float(MIN_MEMORY)
    return out


def create_group(gang: Gang) -> None:
    """Ask Ray for the pinned group (returns at once; ``gang.ready_ref`` tells when it is placed)."""
    selectors = [{"ray.io/node-id": node_id} for node_id in gang.node_ids]
    name = f"muster/{gang.key}"
    gang.group = placement_group(gang.bundles, strategy="PACK", name=name, bundle_label_selector=selectors)
    gang.ready_ref = gang.group.ready()


def remove_group(gang: Gang) -> None:
    """Give the reservation back (kills whatever still runs in it)."""
    if gang.group is not None:
        try:
            remove_placement_group(gang.group)
        except Exception:  # already gone (its creator's job ended, a retried removal)
            pass
        gang.group = None
    gang.ready_ref = None


def describe(gang: Gang, names: dict[str, str], waited: float) -> str:
    """Why the gang was not placed: what each bundle needs and on which node."""
    state = ""
    if gang.group is not None:
        try:
            state = str(ray.util.placement_group_table(gang.group).get("state") or "")
        except Exception:
            state = ""
    wants = "; ".join(
        f"{m.pod.ref.name} needs {_fmt(b)} on node {names.get(n, n[:8])}"
        for m, b, n in zip(gang.launch.members, gang.bundles, gang.node_ids, strict=True)
    )
    where = f" (placement group {state})" if state else ""
    return f"Ray did not reserve the gang within {waited:.0f}s{where}: {wants}"


def deadline_for(gang: GangLaunch) -> float:
    return time.monotonic() + max(0.0, gang.timeout_seconds)


def _request(requests: Any, name: str, path: str) -> Fraction:
    text = requests.get(name)
    if text is None:
        return Fraction(0)
    try:
        return Quantity.parse(text).value
    except QuantityError as exc:
        raise LaunchError(path, str(exc)) from None


def _fmt(b: dict[str, float]) -> str:
    parts = []
    for k, v in b.items():
        if k == "memory":
            parts.append(f"memory {_bytes(v)}")
        elif k == "GPU":
            parts.append(f"{GPU_RESOURCE} {v:g}")
        else:
            parts.append(f"{k} {v:g}")
    return "{" + ", ".join(parts) + "}"


def _bytes(v: float) -> str:
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if v >= size:
            return f"{v / size:g}{unit}"
    return f"{v:g}"
