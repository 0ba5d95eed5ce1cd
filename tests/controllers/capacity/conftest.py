"""A manager harness on a runtime that hosts virtual nodes (the local provider makes its nodes
there), for the capacity tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.scheduling.defaults import create_defaults
from muster.store import Store
from muster.testing.fake_runtime import WatchingFakeRuntime
from tests.controllers.conftest import Harness

Obj = dict[str, Any]


class CapacityHarness(Harness):
    """:class:`Harness` whose runtime is a :class:`WatchingFakeRuntime` on the harness clock."""

    def __init__(self, store: Store, home: Path, nodes: dict[str, int] | None = None, **config: Any) -> None:
        self.store = store
        self.home = home
        from tests.controllers.conftest import Clock

        self.clock = Clock()
        self.rt = WatchingFakeRuntime(nodes=nodes or {"cpu-0": 0})
        self.rt.time_source = self.clock
        create_defaults(store)
        settings = {"resync_seconds": 0, "heartbeat_seconds": 3600, **config}
        self.manager = Manager(store, ManagerConfig(home=home, clock=self.clock, **settings), runtime=self.rt)
        self.manager.open()

    def settle(self, until: Any = None, passes: int = 40) -> None:
        self.rt.clock = self.clock.now  # the pods' start and finish times follow the harness clock
        super().settle(until, passes)

    def claims(self) -> list[Obj]:
        return sorted(self.store.list("NodeClaim").items, key=lambda c: c["metadata"]["name"])

    def phases(self) -> list[str]:
        return [c["status"]["phase"] for c in self.claims()]


def pool(name: str = "gpu", gpus: int = 4, **spec: Any) -> Obj:
    body: Obj = {
        "provider": "local",
        "template": {"gpus": gpus, "gpuModel": "A100", "gpuMemory": "80Gi", "cpu": "32", "memory": "256Gi"},
        "pricePerHour": 10.0,
        "maxNodes": 4,
        "provisioningDelaySeconds": 30,
        "consolidation": {"ttlSecondsAfterEmpty": 60},
    }
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return {"apiVersion": "muster.dev/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": body}


@pytest.fixture
def cap(sqlite_store: Store, tmp_path: Path) -> Iterator[CapacityHarness]:
    h = CapacityHarness(sqlite_store, tmp_path / "home")
    yield h
    h.close()
