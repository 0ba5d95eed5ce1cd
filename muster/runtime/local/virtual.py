"""Virtual nodes: more nodes than this machine, each with fake GPUs, for the local runtime.

The local provider of a NodePool (docs/capacity.md) "boots" a machine by adding a virtual
node here; the runtime offers it from its ``ready_at`` time on, and pods bound to it run as
local processes that see that node's GPUs (``CUDA_VISIBLE_DEVICES`` counts them from 0, as on
any node). So the whole capacity flow (a node asked for, coming up after the pool's delay,
jobs placed on it, drained on a spot notice, removed when idle) runs on a laptop and in tests.

Each node is a JSON file under ``$MUSTER_HOME/run/local/nodes/`` written atomically before
:meth:`VirtualNodes.add` returns, so a restarted server finds the same nodes (as a cloud keeps
its machines while the control plane restarts). GPU UUIDs derive from the node's name.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, replace
from pathlib import Path

from muster.api.quantity import parse_quantity
from muster.runtime.base import GpuDevice, NodeInfo, NodeTaint, VirtualNodeSpec
from muster.runtime.local.fake import FakeGpu, FakeGpus, parse_fake_gpus
from muster.runtime.local.files import write_json
from muster.runtime.local.node import local_node

__all__ = ["VirtualNodes"]


class VirtualNodes:
    """The virtual nodes of one runtime, by name, with their GPUs and injected health."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._specs: dict[str, VirtualNodeSpec] = {}
        self._gpus: dict[str, FakeGpus] = {}
        for path in sorted(self.dir.glob("*.json")):
            spec = _read(path)
            if spec is not None:
                self._keep(spec)

    def add(self, spec: VirtualNodeSpec) -> VirtualNodeSpec:
        known = self._specs.get(spec.name)
        if known is not None:
            return known
        data = asdict(spec)
        data["taints"] = [asdict(t) for t in spec.taints]
        write_json(self.dir / f"{spec.name}.json", data)
        self._keep(spec)
        return spec

    def remove(self, name: str) -> None:
        self._specs.pop(name, None)
        self._gpus.pop(name, None)
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{name}.json").unlink()

    def specs(self) -> list[VirtualNodeSpec]:
        return [self._specs[n] for n in sorted(self._specs)]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def ready(self, now: float) -> list[str]:
        """Names of the nodes that finished booting by ``now``."""
        return [n for n in sorted(self._specs) if self._specs[n].ready_at <= now]

    def gpus(self, name: str) -> FakeGpus:
        """The fake GPUs of node ``name``; KeyError for an unknown node."""
        return self._gpus[name]

    def devices(self, name: str) -> list[GpuDevice]:
        """Its GPUs as they are now (injected faults included)."""
        return sorted(self._gpus[name].devices(), key=lambda d: d.index)

    def info(self, name: str) -> NodeInfo:
        """The node as the runtime offers it."""
        spec = self._specs[name]
        node = local_node(
            self._gpus[name],
            name=name,
            cpu=parse_quantity(spec.cpu),
            memory=parse_quantity(spec.memory),
            labels=spec.labels,
        )
        return replace(node, initial_taints=tuple(spec.taints))

    def _keep(self, spec: VirtualNodeSpec) -> None:
        self._specs[spec.name] = spec
        gpus: list[FakeGpu] = []
        if spec.gpus:
            gpus = parse_fake_gpus(
                f"{spec.gpus}:{spec.gpu_model}:{spec.gpu_memory_bytes}", node_name=spec.name
            )
            for g in gpus:
                g.mig_profile, g.mig_slices = spec.mig_profile, spec.mig_slices
        self._gpus[spec.name] = FakeGpus(gpus)


def _read(path: Path) -> VirtualNodeSpec | None:
    try:
        data = json.loads(path.read_text())
        data["taints"] = tuple(NodeTaint(**t) for t in data.get("taints") or ())
        data["labels"] = dict(data.get("labels") or {})
        return VirtualNodeSpec(**data)
    except (OSError, ValueError, TypeError):
        return None  # half-written by a crash before the rename: never added
