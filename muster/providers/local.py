"""The ``local`` provider: fake-GPU nodes inside ``muster up``, after the pool's delay.

A machine is a virtual node of the local runtime (:mod:`muster.runtime.local.virtual`) named
after its claim, offered once its ``ready_in_seconds`` have passed; deleting it switches it
off (its remaining processes die). The runtime keeps its virtual nodes on disk, so a
restarted server finds them again and ``create`` for a known claim returns the same node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from muster.providers.base import Instance, NodeRequest, ProviderError
from muster.runtime.base import SupportsVirtualNodes, VirtualNodeSpec

__all__ = ["LocalProvider"]


class LocalProvider:
    """Virtual nodes on a runtime that hosts them; ``clock`` gives epoch seconds."""

    name = "local"

    def __init__(self, runtime: Any, clock: Callable[[], float]) -> None:
        if not isinstance(runtime, SupportsVirtualNodes):
            raise ProviderError(
                f"the local provider adds nodes to muster up's local runtime; the {runtime.name} runtime "
                "cannot host them (use the kubernetes or hook provider there)"
            )
        self.runtime = runtime
        self.clock = clock

    def create(self, request: NodeRequest) -> Instance:
        spec = self.runtime.add_virtual_node(
            VirtualNodeSpec(
                name=request.claim,
                gpus=request.gpus,
                gpu_model=request.gpu_model,
                gpu_memory_bytes=request.gpu_memory_bytes,
                cpu=request.cpu,
                memory=request.memory,
                labels=dict(request.labels),
                taints=tuple(request.taints),
                mig_profile=request.mig_profile,
                mig_slices=request.mig_slices,
                ready_at=self.clock() + request.ready_in_seconds,
            )
        )
        return self._instance(spec)

    def get(self, claim: str) -> Instance | None:
        spec = next((s for s in self.runtime.virtual_nodes() if s.name == claim), None)
        return None if spec is None else self._instance(spec)

    def list(self) -> list[Instance]:
        return [self._instance(s) for s in self.runtime.virtual_nodes()]

    def delete(self, claim: str) -> None:
        self.runtime.remove_virtual_node(claim)

    def _instance(self, spec: VirtualNodeSpec) -> Instance:
        up = spec.ready_at <= self.clock()
        return Instance(
            claim=spec.name,
            provider_id=f"local://{spec.name}",
            state="running" if up else "pending",
            node_name=spec.name,
            message="" if up else f"booting; up in {spec.ready_at - self.clock():.0f}s",
        )
