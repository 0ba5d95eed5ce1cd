"""A runtime whose pods are puppets: tests say when each one runs, exits or is lost.

:class:`FakeRuntime` keeps the :class:`muster.runtime.base.Runtime` contract (statuses
through ``poll``, at most one change per pod per call, final statuses until ``release``) so
the controllers can be driven through every path deterministically, without processes:

    rt = FakeRuntime(gpus=4)
    ...                     # the manager starts pods
    rt.run("default/job-worker-0")
    rt.exit("default/job-worker-0", 137, reason=PodReason.OOM_KILLED)

A stop ends the pod at once with the stop reason (exit code 143, as a process that
checkpoints and exits on SIGTERM would) unless ``hold_stops`` is set, in which case
:meth:`finish_stop` ends it.

Several nodes (``nodes={"node-a": 4, "node-b": 8}``) have fake GPUs whose readings and
faults are those of :class:`muster.runtime.local.fake.FakeGpu` (GPU metrics and fault
injection work as on the local runtime); :meth:`lose_node` makes a node vanish as a machine
that lost power does: no more heartbeats, and its pods are gone with it. Virtual nodes (the
local provider's, :class:`SupportsVirtualNodes`) are offered once ``time_source()`` reaches
their ``ready_at``; removing one fails its pods NodeLost (or with the stop reason asked).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from muster.runtime.base import (
    ContainerStatus,
    DeviceBinding,
    GpuDevice,
    GpuFault,
    GpuSample,
    NodeCondition,
    NodeInfo,
    PodExists,
    PodLaunch,
    PodNotFound,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
    PodStillRunning,
    StopReason,
    SupportsFaultInjection,
    SupportsGpuMetrics,
    SupportsNodeWatch,
    SupportsVirtualNodes,
    VirtualNodeSpec,
    iso_from_epoch,
)
from muster.runtime.local.fake import FakeGpu, FakeGpus

__all__ = ["FakePod", "FakeRuntime", "WatchingFakeRuntime"]


@dataclass
class FakePod:
    launch: PodLaunch
    devices: DeviceBinding
    phase: PodPhase = PodPhase.PENDING
    reason: PodReason | None = None
    exit_code: int | None = None
    message: str = ""
    stop: StopReason | None = None
    grace: float | None = None
    reported: PodPhase = PodPhase.PENDING
    started_at: float | None = None

    @property
    def ref(self) -> PodRef:
        return self.launch.ref

    @property
    def env(self) -> dict[str, str]:
        return dict(self.launch.containers[0].env)


class FakeRuntime(SupportsGpuMetrics, SupportsFaultInjection, SupportsVirtualNodes):
    """One node named ``node`` with ``gpus`` fake GPUs (or the ``nodes`` given, name -> GPU
    count, of ``model`` or the node's entry in ``models``); pods change only when told to."""

    name = "local"

    def __init__(
        self,
        gpus: int = 4,
        node: str = "node-0",
        hold_stops: bool = False,
        nodes: Mapping[str, int] | None = None,
        model: str = "FAKE-GPU",
        models: Mapping[str, str] | None = None,
    ) -> None:
        self.gpus = gpus
        self.node = node
        self.hold_stops = hold_stops
        self.model = model
        self.devices: dict[str, FakeGpus] = {
            name: FakeGpus(
                [
                    FakeGpu(i, f"GPU-{name}-{i}", (models or {}).get(name, model), 16 << 30)
                    for i in range(count)
                ]
            )
            for name, count in (nodes or {node: gpus}).items()
        }
        self.lost: set[str] = set()
        self.pods_by_uid: dict[str, FakePod] = {}
        self.started: list[str] = []  # "namespace/name" in start order
        self.stops: list[tuple[str, str]] = []  # ("namespace/name", reason) in stop order
        self.clock = 1_000_000.0
        self.virtual: dict[str, VirtualNodeSpec] = {}
        self.time_source: Callable[[], float] = lambda: self.clock

    # -- the contract --------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        now = self.time_source()
        return [
            self._node(name, gpus)
            for name, gpus in self.devices.items()
            if name not in self.lost and (name not in self.virtual or self.virtual[name].ready_at <= now)
        ]

    def _node(self, name: str, source: FakeGpus) -> NodeInfo:
        gpus = tuple(
            GpuDevice(
                index=d.index,
                uuid=d.uuid,
                model=d.model,
                memory_bytes=d.memory_bytes,
                domain="nvlink-0",
                health=d.health,
                health_reason=d.health_reason,
            )
            for d in source.devices()
        )
        healthy = sum(g.health == "Healthy" for g in gpus)
        model = source.gpus[0].model if source.gpus else self.model
        spec = self.virtual.get(name)
        labels = {
            **(spec.labels if spec else {}),
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.product": model,
        }
        resources = {
            "cpu": spec.cpu if spec else "64",
            "memory": spec.memory if spec else "256Gi",
            "nvidia.com/gpu": str(len(gpus)),
        }
        bad = [g for g in gpus if g.health != "Healthy"]
        gpu_condition = (
            NodeCondition(
                "GPUHealthy",
                "False",
                "GPUUnhealthy",
                ", ".join(f"GPU {g.index}: {g.health_reason}" for g in bad),
            )
            if bad
            else NodeCondition("GPUHealthy", "True", "AllHealthy", f"{len(gpus)} GPU(s) healthy")
        )
        return NodeInfo(
            name=name,
            capacity=resources,
            allocatable={**resources, "nvidia.com/gpu": str(healthy)},
            labels=labels,
            gpus=gpus,
            conditions=(NodeCondition("Ready", "True", "FakeRuntimeReady"), gpu_condition),
            warnings=source.warnings,
            initial_taints=spec.taints if spec else (),
        )

    def gpu_samples(self) -> list[GpuSample]:
        return [s for name, gpus in self.devices.items() if name not in self.lost for s in gpus.samples()]

    def inject_gpu_fault(self, node: str, fault: GpuFault) -> GpuDevice:
        if node not in self.devices or node in self.lost:
            raise KeyError(f"no node {node} (nodes: {sorted(set(self.devices) - self.lost)})")
        self.devices[node].gpu(fault.gpu).apply(fault)
        return next(d for d in self.devices[node].devices() if d.index == fault.gpu)

    def start(self, pod: PodLaunch, devices: DeviceBinding) -> list[str]:
        if pod.ref.uid in self.pods_by_uid:
            raise PodExists(f"pod {pod.ref} is already started")
        self.pods_by_uid[pod.ref.uid] = FakePod(pod, devices)
        self.started.append(str(pod.ref))
        return []

    def stop(self, pod: PodRef, grace_seconds: float | None, reason: StopReason) -> None:
        fake = self._get(pod)
        if fake.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            return
        if fake.stop is None:
            fake.stop, fake.grace = reason, grace_seconds
            self.stops.append((str(pod), reason.value))
        if not self.hold_stops:
            self.finish_stop(str(pod))

    def poll(self, timeout: float = 0.0) -> list[PodStatusChange]:
        changes = []
        for fake in self.pods_by_uid.values():
            if fake.phase != fake.reported and fake.phase is not PodPhase.PENDING:
                fake.reported = fake.phase
                changes.append(self._status(fake))
        return changes

    def pods(self) -> list[PodStatusChange]:
        return [self._status(f) for f in self.pods_by_uid.values()]

    def release(self, pod: PodRef) -> None:
        fake = self.pods_by_uid.get(pod.uid)
        if fake is None:
            return
        if fake.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            raise PodStillRunning(f"pod {pod} is {fake.phase}")
        del self.pods_by_uid[pod.uid]

    def close(self) -> None:
        return None

    def add_virtual_node(self, spec: VirtualNodeSpec) -> VirtualNodeSpec:
        if spec.name in self.virtual:
            return self.virtual[spec.name]
        self.virtual[spec.name] = spec
        self.devices[spec.name] = FakeGpus(
            [
                FakeGpu(i, f"GPU-{spec.name}-{i}", spec.gpu_model, spec.gpu_memory_bytes)
                for i in range(spec.gpus)
            ]
        )
        self.lost.discard(spec.name)
        return spec

    def remove_virtual_node(self, name: str) -> None:
        if self.virtual.pop(name, None) is None:
            return
        self.devices.pop(name, None)
        for fake in self.pods_by_uid.values():
            if fake.launch.node == name and fake.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
                fake.phase = PodPhase.FAILED
                fake.reason = PodReason(fake.stop.value) if fake.stop else PodReason.NODE_LOST
                fake.exit_code = 137
                fake.message = f"node {name} was terminated with the pod's processes on it"

    def virtual_nodes(self) -> list[VirtualNodeSpec]:
        return [self.virtual[n] for n in sorted(self.virtual)]

    # -- puppetry --------------------------------------------------------------------------------

    def gpu(self, node: str, index: int) -> FakeGpu:
        """The fake GPU whose readings a test sets."""
        return self.devices[node].gpu(index)

    def lose_node(self, node: str) -> None:
        """The node is gone: it is no longer offered, and its pods vanish without a status."""
        self.lost.add(node)
        for uid, fake in list(self.pods_by_uid.items()):
            if fake.launch.node == node:
                del self.pods_by_uid[uid]

    def find(self, key: str) -> FakePod:
        """The newest live record of ``namespace/name``."""
        for fake in reversed(list(self.pods_by_uid.values())):
            if str(fake.ref) == key:
                return fake
        raise KeyError(f"no pod {key} (have {sorted(str(f.ref) for f in self.pods_by_uid.values())})")

    def running(self) -> list[str]:
        return sorted(str(f.ref) for f in self.pods_by_uid.values() if f.phase is PodPhase.RUNNING)

    def run(self, key: str) -> None:
        fake = self.find(key)
        fake.phase = PodPhase.RUNNING
        fake.started_at = self.clock

    def run_all(self) -> None:
        for fake in self.pods_by_uid.values():
            if fake.phase is PodPhase.PENDING and fake.stop is None:
                fake.phase, fake.started_at = PodPhase.RUNNING, self.clock

    def exit(self, key: str, code: int, reason: PodReason | None = None, message: str = "") -> None:
        fake = self.find(key)
        fake.started_at = fake.started_at or self.clock
        fake.exit_code = code
        fake.phase = PodPhase.SUCCEEDED if code == 0 and reason is None else PodPhase.FAILED
        fake.reason = reason or (PodReason.COMPLETED if code == 0 else PodReason.ERROR)
        fake.message = message or ("" if code == 0 else f"exited with code {code}")

    def finish_stop(self, key: str, code: int = 143) -> None:
        fake = self.find(key)
        assert fake.stop is not None, f"{key} was not asked to stop"
        fake.exit_code = code
        fake.phase = PodPhase.FAILED
        fake.reason = PodReason(fake.stop.value)
        fake.message = f"stopped ({fake.stop.value})"

    def _get(self, pod: PodRef) -> FakePod:
        fake = self.pods_by_uid.get(pod.uid)
        if fake is None:
            raise PodNotFound(f"pod {pod} is not known")
        return fake

    def _status(self, fake: FakePod) -> PodStatusChange:
        final = fake.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)
        started = iso_from_epoch(fake.started_at) if fake.started_at else None
        containers = tuple(
            ContainerStatus(
                name=c.name,
                state="terminated" if final else ("running" if fake.phase is PodPhase.RUNNING else "waiting"),
                exit_code=fake.exit_code if final else None,
                reason=fake.reason if final else None,
                message=fake.message,
                started_at=started,
            )
            for c in fake.launch.containers
        )
        return PodStatusChange(
            ref=fake.ref,
            phase=fake.phase,
            reason=fake.reason if final else None,
            message=fake.message,
            exit_code=fake.exit_code if final else None,
            containers=containers,
            started_at=started,
            finished_at=iso_from_epoch(self.clock) if final else None,
        )


class WatchingFakeRuntime(FakeRuntime, SupportsNodeWatch):
    """A :class:`FakeRuntime` that watches its nodes as the local runtime does: a virtual node
    that came up or was removed is news (the Node appears or is deleted at once), and a node it
    no longer lists is gone (its Node is deleted rather than turning NotReady)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._offered: list[str] | None = None

    def nodes(self) -> list[NodeInfo]:
        out = super().nodes()
        self._offered = [n.name for n in out]
        return out

    def nodes_changed(self) -> bool:
        if self._offered is None:
            return False
        now = self.time_source()
        listed = [
            n
            for n in self.devices
            if n not in self.lost and (n not in self.virtual or self.virtual[n].ready_at <= now)
        ]
        return listed != self._offered
