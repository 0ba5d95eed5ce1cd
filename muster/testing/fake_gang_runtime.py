"""A puppet runtime that starts gangs as one unit, as Ray and Kubernetes do.

:class:`GangFakeRuntime` is a :class:`muster.testing.fake_runtime.FakeRuntime` with
:class:`muster.runtime.base.SupportsGangStart` and several nodes: the executor hands it every
pod of an admitted Workload at once; the members stay Pending until the test places the gang
(``place``) or gives up on it (``fail_gang``, reported ``GangStartFailed`` as a runtime whose
placement group timed out would), and a node can die with its pods (``kill_node``):

    rt = GangFakeRuntime(nodes=("node-0", "node-1"), gpus=4)
    ...                              # the manager admits a job and starts its gang
    rt.place("train")                # every member runs
    rt.kill_node("node-1")           # node-1 is NotReady, its pods Failed NodeLost
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from muster.runtime.base import (
    GangLaunch,
    NodeCondition,
    NodeInfo,
    PodExists,
    PodLaunch,
    PodPhase,
    PodReason,
    SupportsGangStart,
)
from muster.testing.fake_runtime import FakePod, FakeRuntime

__all__ = ["GangFakeRuntime"]


class GangFakeRuntime(FakeRuntime, SupportsGangStart):
    """``nodes`` (names) with ``gpus`` fake GPUs each, at 10.0.0.1, 10.0.0.2, ...; gangs start
    when the test says."""

    def __init__(self, nodes: Sequence[str] = ("node-0",), gpus: int = 4, hold_stops: bool = False) -> None:
        super().__init__(gpus=gpus, node=nodes[0], hold_stops=hold_stops)
        self.node_names = tuple(nodes)
        self.dead: dict[str, str] = {}  # node -> why it is not ready
        self.gangs: list[GangLaunch] = []  # in start order
        self.singles: list[str] = []  # pods started alone ("namespace/name")

    # -- the contract --------------------------------------------------------------------------

    def nodes(self) -> list[NodeInfo]:
        base = super().nodes()[0]
        out = []
        for name in self.node_names:
            ready = (
                NodeCondition("Ready", "False", "NodeLost", self.dead[name])
                if name in self.dead
                else NodeCondition("Ready", "True", "FakeRuntimeReady")
            )
            labels = {**base.labels, "kubernetes.io/hostname": name}
            address = f"10.0.0.{self.node_names.index(name) + 1}"
            out.append(replace(base, name=name, labels=labels, conditions=(ready,), address=address))
        return out

    def start(self, pod: PodLaunch, devices: object) -> list[str]:
        self.singles.append(str(pod.ref))
        return super().start(pod, devices)  # type: ignore[arg-type]

    def start_gang(self, gang: GangLaunch) -> list[str]:
        known = [str(m.pod.ref) for m in gang.members if m.pod.ref.uid in self.pods_by_uid]
        if known:
            raise PodExists(f"pods {', '.join(known)} are already started")
        for member in gang.members:
            self.pods_by_uid[member.pod.ref.uid] = FakePod(member.pod, member.devices)
            self.started.append(str(member.pod.ref))
        self.gangs.append(gang)
        return []

    # -- puppetry --------------------------------------------------------------------------------

    def gang(self, workload: str) -> GangLaunch:
        """The newest gang of ``workload``."""
        for gang in reversed(self.gangs):
            if gang.workload == workload:
                return gang
        raise KeyError(f"no gang of {workload} (have {sorted({g.workload for g in self.gangs})})")

    def place(self, workload: str) -> None:
        """The whole gang is placed: every member runs."""
        for member in self.gang(workload).members:
            self.run(str(member.pod.ref))

    def fail_gang(self, workload: str, message: str = "the gang could not be placed") -> None:
        """The gang could not be placed in time: every member fails, nothing ran."""
        for member in self.gang(workload).members:
            fake = self.find(str(member.pod.ref))
            fake.phase, fake.reason, fake.message = PodPhase.FAILED, PodReason.GANG_START_FAILED, message

    def kill_node(self, node: str, message: str = "the node died") -> None:
        """The node dies: it is offered NotReady, and every pod on it fails NodeLost."""
        self.dead[node] = message
        for fake in self.pods_by_uid.values():
            if fake.launch.node == node and fake.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED):
                fake.started_at = fake.started_at or self.clock
                fake.phase, fake.reason = PodPhase.FAILED, PodReason.NODE_LOST
                fake.message = f"node {node} died: {message}"
