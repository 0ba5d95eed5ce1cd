"""Every GPU of every node as one row: who holds it, its health, its latest reading and its
recent history. ``GET /api/v1/gpus`` serves it (the dashboard's GPU grid and sparklines);
``muster doctor`` and the metrics read the same rows. A pure function over wire dicts and
the GPU monitor's history (joined by GPU UUID)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from muster.api.labels import JOB_NAME_LABEL, WORKFLOW_LABEL
from muster.api.lifecycle import is_final
from muster.api.quantity import amount_of
from muster.controllers.nodes.gpumonitor import GpuReading, History

__all__ = ["GpuHolding", "GpuRow", "gpu_rows", "pod_gpu_milli"]

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class GpuHolding:
    """A pod bound to the GPU (a whole GPU: ``milli`` 1000)."""

    namespace: str
    pod: str
    job: str | None
    workflow: str | None  # the Workflow of a task's pod (a TrainingJob task's pods have both)
    milli: int
    since: str | None  # when the pod started running (status.startTime), None until it runs
    phase: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "pod": self.pod,
            "job": self.job,
            "workflow": self.workflow,
            "milli": self.milli,
            "since": self.since,
            "phase": self.phase,
        }


@dataclass(frozen=True)
class GpuRow:
    node: str
    index: int
    uuid: str
    model: str
    memory: str
    health: str
    health_reason: str
    holders: tuple[GpuHolding, ...]
    latest: GpuReading | None = None
    history: tuple[GpuReading, ...] = field(default=())

    @property
    def allocated_milli(self) -> int:
        return min(1000, sum(h.milli for h in self.holders))

    def to_dict(self, with_history: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "memory": self.memory,
            "health": self.health,
            "healthReason": self.health_reason,
            "allocatedMilli": self.allocated_milli,
            "holders": [h.to_dict() for h in self.holders],
            "latest": self.latest.to_dict() if self.latest else None,
        }
        if with_history:
            out["history"] = [r.to_dict() for r in self.history]
        return out


def gpu_rows(nodes: Iterable[Obj], pods: Iterable[Obj], history: History | None = None) -> list[GpuRow]:
    """One row per GPU of every node (by node name, then index), with the pods that hold it
    (bound and not ended) and its readings from ``history`` (uuid -> readings, oldest first)."""
    history = history or {}
    holding: dict[tuple[str, int], list[GpuHolding]] = {}
    node_list = sorted(nodes, key=lambda n: n["metadata"]["name"])
    devices_of = {n["metadata"]["name"]: (n.get("status") or {}).get("gpus") or [] for n in node_list}
    for pod in pods:
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or is_final(pod) or not spec.get("gpus"):
            continue
        meta = pod["metadata"]
        status = pod.get("status") or {}
        held = GpuHolding(
            namespace=meta.get("namespace") or "default",
            pod=meta["name"],
            job=(meta.get("labels") or {}).get(JOB_NAME_LABEL),
            workflow=(meta.get("labels") or {}).get(WORKFLOW_LABEL),
            milli=pod_gpu_milli(pod, devices_of.get(node, [])),
            since=status.get("startTime") if status.get("phase") == "Running" else None,
            phase=status.get("phase") or "Pending",
        )
        for index in spec["gpus"]:
            holding.setdefault((node, int(index)), []).append(held)
    rows = []
    for node in node_list:
        name = node["metadata"]["name"]
        for gpu in sorted(devices_of[name], key=lambda g: g["index"]):
            uuid = str(gpu.get("uuid") or "")
            series: Sequence[GpuReading] = history.get(uuid, ()) if uuid else ()
            rows.append(
                GpuRow(
                    node=name,
                    index=int(gpu["index"]),
                    uuid=uuid,
                    model=str(gpu.get("model") or ""),
                    memory=str(gpu.get("memory") or ""),
                    health=str(gpu.get("health") or "Healthy"),
                    health_reason=str(gpu.get("healthReason") or ""),
                    holders=tuple(
                        sorted(holding.get((name, int(gpu["index"])), []), key=lambda h: (h.namespace, h.pod))
                    ),
                    latest=series[-1] if series else None,
                    history=tuple(series),
                )
            )
    return rows


def pod_gpu_milli(pod: Obj, devices: Sequence[Obj] = ()) -> int:
    """How much of each bound GPU the pod holds, in thousandths: ``gpuMilli`` for a share, the
    reserved memory over the device's memory for a memory-sized share, else the whole GPU."""
    spec = pod.get("spec") or {}
    if spec.get("gpuMilli"):
        return int(spec["gpuMilli"])
    if spec.get("gpuMemory") and spec.get("gpus"):
        index = int(spec["gpus"][0])
        device = next((d for d in devices if int(d.get("index", -1)) == index), None)
        total = amount_of(device.get("memory")) if device else Fraction(0)
        if total:
            return min(1000, max(1, round(1000 * amount_of(spec["gpuMemory"]) / total)))
    return 1000
