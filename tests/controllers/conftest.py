"""A manager on a real store with a puppet runtime and a clock the test moves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from muster.api import registry
from muster.controllers.manager import Manager, ManagerConfig
from muster.controllers.scheduling.defaults import create_defaults
from muster.store import Store
from muster.store.base import NotFound
from muster.store.events import events_for
from muster.testing.fake_runtime import FakeRuntime

Obj = dict[str, Any]
START = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Harness:
    """The manager (every pass a full resync, so passes are deterministic) and its runtime."""

    def __init__(
        self,
        store: Store,
        home: Path,
        gpus: int = 4,
        hold_stops: bool = False,
        nodes: dict[str, int] | None = None,
        models: dict[str, str] | None = None,
        **config: Any,
    ) -> None:
        self.store = store
        self.home = home
        self.clock = Clock()
        self.rt = FakeRuntime(gpus=gpus, hold_stops=hold_stops, nodes=nodes, models=models)
        create_defaults(store)
        settings = {"resync_seconds": 0, "heartbeat_seconds": 3600, **config}
        self.manager = Manager(store, ManagerConfig(home=home, clock=self.clock, **settings), runtime=self.rt)
        self.manager.open()

    def apply(self, *docs: Obj) -> None:
        objs = [registry.validate(d).obj for d in docs]
        self.store.apply([o for o in objs if o is not None])

    def settle(self, until: Callable[[], Any] | None = None, passes: int = 40) -> None:
        """Run passes until ``until()`` holds (or, without one, until a pass changes nothing)."""
        self.manager.open()
        for _ in range(passes):
            before = self.store.revision()
            assert self.manager.ctx.cache.caught_up(before, timeout=10), "the cache lags the store"
            self.manager.run_once(self.rt.poll())
            self.manager.ctx.flush_events()
            if until is not None and until():
                return
            if until is None and self.store.revision() == before:
                return
        raise AssertionError(f"did not settle in {passes} passes" + (f": {until}" if until else ""))

    def get(self, kind: str, name: str, namespace: str | None = "default") -> Obj | None:
        try:
            return self.store.get(kind, name, namespace)
        except NotFound:
            return None

    def job(self, name: str) -> Obj:
        job = self.get("TrainingJob", name)
        assert job is not None
        return job

    def condition(self, kind: str, name: str, type_: str) -> Obj | None:
        obj = self.get(kind, name)
        for c in ((obj or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == type_:
                return c
        return None

    def has(self, kind: str, name: str, type_: str, reason: str | None = None) -> bool:
        c = self.condition(kind, name, type_)
        return c is not None and c["status"] == "True" and (reason is None or c["reason"] == reason)

    def pods(self) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in self.store.list("Pod", "default").items}

    def events(self, obj: Obj) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in events_for(self.store, obj)]

    def close(self) -> None:
        self.manager.stop()


# "full": every pass a full resync (each pass looks at everything); "incremental": only the
# first pass is, so a controller that acts only when the periodic resync looks again, not on
# the change that asked for it (the server's resync is 10 s), fails here.
HARNESS_MODES = {"full": 0, "incremental": 3600}


@pytest.fixture(params=list(HARNESS_MODES))
def harness(request: pytest.FixtureRequest, sqlite_store: Store, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(sqlite_store, tmp_path / "home", resync_seconds=HARNESS_MODES[request.param])
    yield h
    h.close()


def job(
    name: str,
    workers: int = 2,
    master: bool = False,
    gpus: int = 1,
    restart_policy: str = "OnFailure",
    run_policy: Obj | None = None,
    **spec: Any,
) -> Obj:
    """A TrainingJob of ``workers`` Workers (and a Master) asking ``gpus`` GPUs per pod."""

    def replica(count: int) -> Obj:
        container: Obj = {"name": "main", "command": ["python", "train.py"]}
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        return {
            "replicas": count,
            "restartPolicy": restart_policy,
            "template": {"spec": {"containers": [container]}},
        }

    replicas: Obj = {}
    if master:
        replicas["Master"] = replica(1)
    if workers:
        replicas["Worker"] = replica(workers)
    body: Obj = {"replicaSpecs": replicas, **spec}
    if run_policy:
        body["runPolicy"] = run_policy
    return {"apiVersion": "muster.dev/v1", "kind": "TrainingJob", "metadata": {"name": name}, "spec": body}
