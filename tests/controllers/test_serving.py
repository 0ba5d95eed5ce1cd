"""The InferenceService controller on a puppet runtime and a puppet gateway: replicas through the
queues, readiness, autoscaling from zero and back, drains that wait for in-flight requests,
restarts, revisions and the canary split, preemption rules and garbage collection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from muster.api.labels import SERVING_PORT_ANNOTATION
from muster.gateway.table import ReplicaLoad, RevisionLoad, Route
from tests.controllers.conftest import Harness, job

Obj = dict[str, Any]


class FakePlane:
    """The gateway as the controller sees it: the test says which replicas are ready and what
    demand each revision has; ``routes`` is what the controller last handed over. As the
    gateway does, it pokes the control plane when a replica's readiness changes or a request
    is held (``set_ready``, ``hold``); the rest the controller reads at its ticks."""

    def __init__(self) -> None:
        self.poke: Callable[[str, str], None] = lambda _ns, _name: None
        self.routes: list[Route] = []
        self.ready: set[str] = set()
        self.inflight: dict[str, int] = {}
        self.demand: dict[str, float] = {}  # revision -> requests in flight (held or running)
        self.held: dict[str, int] = {}
        self.area: dict[str, float] = {}
        self.requests: dict[str, int] = {}
        self.at = 0.0
        self.last_request = 0.0

    def apply(self, routes: Sequence[Route]) -> None:
        self.routes = list(routes)

    def set_ready(self, names: set[str], ready: bool = True) -> None:
        self.ready = self.ready | names if ready else self.ready - names
        self._poke_all()

    def hold(self, revision: str, requests: int) -> None:
        self.held[revision] = requests
        self._poke_all()

    def _poke_all(self) -> None:
        for route in self.routes:
            self.poke(route.namespace, route.name)

    def advance(self, seconds: float) -> None:
        for rev, value in self.demand.items():
            self.area[rev] = self.area.get(rev, 0.0) + value * seconds
            if value:
                self.requests[rev] = self.requests.get(rev, 0) + 1
                self.last_request = self.at + seconds
        self.at += seconds

    def load(self, namespace: str, name: str) -> dict[str, RevisionLoad]:
        revs = {f"{name}-{n:05d}" for n in range(1, 6)}
        return {
            r: RevisionLoad(
                self.area.get(r, 0.0),
                self.requests.get(r, 0),
                0,
                self.held.get(r, 0),
                self.at,
                self.last_request,
            )
            for r in revs
        }

    def replica_load(self, namespace: str, name: str) -> dict[str, ReplicaLoad]:
        out = {}
        for route in self.routes:
            for b in route.backends:
                out[b.name] = ReplicaLoad(
                    self.inflight.get(b.name, 0), b.name in self.ready, b.draining, 0, 0
                )
        return out

    def drained(self, namespace: str, name: str, replica: str) -> bool:
        return self.inflight.get(replica, 0) == 0

    def backends(self) -> dict[str, Any]:
        return {b.name: b for route in self.routes for b in route.backends}


def isvc(name: str = "llm", **spec: Any) -> Obj:
    predictor = spec.pop("predictor", None) or {
        "containers": [
            {
                "name": "server",
                "command": ["python", "-m", "muster.serving.model_server", "--port", "$(PORT)"],
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }
        ]
    }
    body = {"predictor": predictor, "minReplicas": 1, "maxReplicas": 3, **spec}
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": body,
    }


@pytest.fixture
def h(harness: Harness) -> Harness:
    """The shared harness (both of its modes) serving through a FakePlane."""
    plane = FakePlane()
    cache = harness.manager.ctx.cache
    plane.poke = lambda ns, name: cache.mark([("InferenceService", ns, name)])
    harness.manager.serving.attach(plane, "http://127.0.0.1:7071")
    harness.plane = plane  # type: ignore[attr-defined]
    return harness


def tick(h: Harness, seconds: float = 2.0, passes: int = 1) -> None:
    for _ in range(passes):
        h.clock.advance(seconds)
        h.plane.advance(seconds)  # type: ignore[attr-defined]
        h.settle()


def serve_ready(h: Harness) -> None:
    """Run every pod and pass every replica's readiness probe."""
    h.rt.run_all()
    h.settle()
    h.plane.set_ready(set(h.plane.backends()))  # type: ignore[attr-defined]
    h.settle()


def status(h: Harness, name: str = "llm") -> Obj:
    obj = h.get("InferenceService", name)
    assert obj is not None
    return obj.get("status") or {}


def test_a_replica_is_a_workload_admitted_through_the_queue_and_a_bound_pod(h):
    spec = isvc()
    spec["spec"]["predictor"]["containers"][0]["env"] = [{"name": "LISTEN", "value": "$(HOST):$(PORT)"}]
    h.apply(spec)
    h.settle()
    wl = h.get("Workload", "llm-00001-0")
    assert wl is not None and wl["spec"]["queueName"] == "default"
    assert wl["spec"]["preemptible"] is False  # serving replicas are not preempted by default
    pod = h.pods()["llm-00001-0"]
    assert pod["spec"]["nodeName"] == "node-0" and len(pod["spec"]["gpus"]) == 1
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["PORT"] == pod["metadata"]["annotations"][SERVING_PORT_ANNOTATION]
    # the serving variables come first: the container's own can refer to them
    assert list(env).index("LISTEN") > list(env).index("PORT") and env["HOST"] == "127.0.0.1"
    assert env["MUSTER_MODEL_NAMES"] == "llm"
    assert status(h)["replicas"][0]["state"] == "Starting"
    serve_ready(h)
    s = status(h)
    assert s["readyReplicas"] == 1 and s["replicas"][0]["state"] == "Ready"
    assert {c["type"]: c["status"] for c in s["conditions"]} == {
        "PredictorReady": "True",
        "IngressReady": "True",
        "Ready": "True",
    }
    [route] = h.plane.routes
    assert route.models == ("llm",) and route.traffic == (("llm-00001", 100),)
    assert route.backends[0].port == int(env["PORT"])


def test_demand_scales_up_at_once_in_panic_and_down_by_draining_after_the_delay(h):
    h.apply(
        isvc(scaleTarget=2, targetUtilizationPercentage=100, scaleDownDelaySeconds=10, stableWindowSeconds=20)
    )
    h.settle()
    serve_ready(h)
    h.plane.demand["llm-00001"] = 6.0  # three replicas' worth
    tick(h)
    s = status(h)
    assert s["desiredReplicas"] == 3
    assert s["revisions"][0]["autoscaler"]["panicking"] is True
    assert len([n for n in h.pods() if n.startswith("llm-00001-")]) == 3
    scaled = [m for r, m in h.events(h.get("InferenceService", "llm")) if r == "Scaled"]
    assert any("1 -> 3" in m for m in scaled)
    serve_ready(h)
    assert status(h)["readyReplicas"] == 3
    # demand gone: panic holds a stable window (20 s), then the delay (10 s), then down by half
    h.plane.demand["llm-00001"] = 0.0
    for _ in range(25):
        tick(h)
        if status(h)["desiredReplicas"] < 3:
            break
    assert status(h)["desiredReplicas"] < 3
    reasons = [r for r, _ in h.events(h.get("InferenceService", "llm"))]
    assert "ReplicaDraining" in reasons and "ReplicaStopped" in reasons  # idle: stopped at once
    assert len(status(h)["replicas"]) < 3


def test_a_draining_replica_stops_only_once_its_requests_are_done(h):
    h.apply(isvc(minReplicas=2, maxReplicas=2))
    h.settle()
    serve_ready(h)
    h.plane.inflight["llm-00001-1"] = 2
    h.plane.inflight["llm-00001-0"] = 1
    spec = h.get("InferenceService", "llm")
    spec["spec"]["minReplicas"] = 1
    spec["spec"]["maxReplicas"] = 1
    h.store.update(spec)
    tick(h)
    victim = next(r["name"] for r in status(h)["replicas"] if r["state"] == "Draining")
    assert victim == "llm-00001-0"  # the least busy one goes first
    assert h.plane.backends()[victim].draining  # the gateway sends it no new request
    tick(h)
    assert not h.rt.stops  # a request still runs on it: its pod keeps running
    h.plane.inflight["llm-00001-0"] = 0
    tick(h)
    assert h.rt.stops == [("default/llm-00001-0", "Stopped")]
    tick(h)
    assert h.get("Workload", "llm-00001-0") is None  # its quota is released
    assert [r["name"] for r in status(h)["replicas"]] == ["llm-00001-1"]


def test_scale_to_zero_after_the_idle_delay_and_back_when_a_request_waits(h):
    h.apply(isvc(minReplicas=0, scaleToZeroDelaySeconds=10, scaleDownDelaySeconds=0))
    h.settle()
    assert h.get("Workload", "llm-00001-0") is not None  # a new revision starts one until ready
    serve_ready(h)
    for _ in range(8):
        tick(h)
    assert h.rt.stops == [("default/llm-00001-0", "Stopped")]
    tick(h)
    s = status(h)
    assert s["desiredReplicas"] == 0 and s["replicas"] == []
    assert {c["type"]: c["reason"] for c in s["conditions"]}["PredictorReady"] == "ScaledToZero"
    # a request held at the gateway: one replica at once, without waiting for the tick
    h.plane.hold("llm-00001", 1)  # the gateway pokes the control plane
    h.clock.advance(0.1)
    h.settle()
    assert status(h)["desiredReplicas"] == 1
    assert "llm-00001-0" in h.pods()


def test_a_replica_that_exits_is_restarted_on_its_admission_with_backoff(h):
    h.apply(isvc(minReplicas=1, maxReplicas=1))
    h.settle()
    serve_ready(h)
    first = h.pods()["llm-00001-0"]
    h.rt.exit("default/llm-00001-0", 137, message="killed")
    h.plane.set_ready({"llm-00001-0"}, ready=False)
    h.settle()
    pod = h.pods()["llm-00001-0"]
    assert pod["metadata"]["uid"] != first["metadata"]["uid"]
    assert pod["spec"]["gpus"] == first["spec"]["gpus"]  # same admission, same GPU
    assert pod["metadata"]["labels"]["muster.dev/attempt"] == "1"
    reasons = [r for r, _ in h.events(h.get("InferenceService", "llm"))]
    assert "ReplicaRestarted" in reasons
    h.rt.run_all()
    h.settle()
    h.rt.exit("default/llm-00001-0", 1)
    h.settle()
    assert phase_of(h, "llm-00001-0") == "Failed"  # the second restart waits 1 s
    tick(h, 1.5)
    assert phase_of(h, "llm-00001-0") == "Pending"


def phase_of(h: Harness, pod: str) -> str:
    return (h.pods()[pod].get("status") or {}).get("phase", "Pending")


def test_canary_split_promote_and_rollback(h):
    h.apply(isvc(minReplicas=1, maxReplicas=1))
    h.settle()
    serve_ready(h)
    changed = h.get("InferenceService", "llm")
    changed["spec"]["canaryTrafficPercent"] = 20
    changed["spec"]["predictor"]["containers"][0]["args"] = ["--layers", "2"]
    h.store.update(changed)
    h.settle()
    s = status(h)
    assert s["latestCreatedRevision"] == "llm-00002" and s["latestRolledoutRevision"] == "llm-00001"
    assert [(t["revisionName"], t["percent"]) for t in s["traffic"]] == [("llm-00001", 100)]  # canary warming
    serve_ready(h)
    s = status(h)
    assert [(t["revisionName"], t["percent"], t["tag"]) for t in s["traffic"]] == [
        ("llm-00002", 20, "latest"),
        ("llm-00001", 80, "prev"),
    ]
    assert h.plane.routes[0].traffic == (("llm-00002", 20), ("llm-00001", 80))
    # roll back: everything to the rolled-out revision; the canary's replica drains
    changed = h.get("InferenceService", "llm")
    changed["spec"]["canaryTrafficPercent"] = 0
    h.store.update(changed)
    tick(h)
    assert [(t["revisionName"], t["percent"]) for t in status(h)["traffic"]] == [("llm-00001", 100)]
    assert [r["revision"] for r in status(h)["replicas"]] == ["llm-00001"]  # the canary's replica went
    # promote: the latest takes everything and becomes the rolled-out revision
    changed = h.get("InferenceService", "llm")
    del changed["spec"]["canaryTrafficPercent"]
    h.store.update(changed)
    tick(h)
    serve_ready(h)
    tick(h)
    s = status(h)
    assert [(t["revisionName"], t["percent"]) for t in s["traffic"]] == [("llm-00002", 100)]
    assert s["latestRolledoutRevision"] == "llm-00002" and s["previousRolledoutRevision"] == "llm-00001"
    reasons = [r for r, _ in h.events(h.get("InferenceService", "llm"))]
    assert "RevisionCreated" in reasons and "TrafficSplit" in reasons


def test_a_priority_class_makes_replicas_preemptible_and_a_missing_one_is_reported(h):
    h.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "batch"},
            "value": 10,
        }
    )
    h.apply(isvc(priorityClassName="batch"))
    h.settle()
    wl = h.get("Workload", "llm-00001-0")
    assert wl["spec"]["preemptible"] is True and wl["spec"]["priority"] == 10
    h.apply(isvc("other", priorityClassName="nope", modelNames=["other"]))
    h.settle()
    cond = {c["type"]: c for c in status(h, "other")["conditions"]}["PredictorReady"]
    assert cond["status"] == "False" and cond["reason"] == "PriorityClassNotFound"
    assert h.get("Workload", "other-00001-0") is None


def test_deleting_the_service_stops_its_replicas_and_its_routes(h):
    h.apply(isvc())
    h.settle()
    serve_ready(h)
    h.store.delete("InferenceService", "llm", "default")
    h.settle()
    assert h.get("Workload", "llm-00001-0") is None
    assert ("default/llm-00001-0", "Stopped") in h.rt.stops
    assert h.plane.routes == []


def test_a_model_name_served_twice_is_routed_to_the_older_service(h):
    h.apply(isvc("a", modelNames=["shared"]))
    h.settle()
    h.clock.advance(1)
    h.apply(isvc("b", modelNames=["shared"]))
    h.settle()
    cond = {c["type"]: c for c in status(h, "b")["conditions"]}["IngressReady"]
    assert (
        cond["status"] == "False" and cond["reason"] == "ModelNameConflict" and "default/a" in cond["message"]
    )


@pytest.fixture
def one_gpu(sqlite_store, tmp_path):
    harness = Harness(sqlite_store, tmp_path / "home", gpus=1)
    plane = FakePlane()
    harness.manager.serving.attach(plane, "http://127.0.0.1:7071")
    harness.plane = plane  # type: ignore[attr-defined]
    yield harness
    harness.close()


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}
LOW = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "low"},
    "value": -10,
}


def test_a_training_job_does_not_preempt_a_replica_unless_the_service_opts_in(one_gpu):
    h = one_gpu
    h.apply(HIGH, LOW, isvc(minReplicas=1, maxReplicas=1))
    h.settle()
    serve_ready(h)
    h.apply(job("urgent", workers=1, priorityClassName="high"))
    h.settle()
    assert h.job("urgent")["status"]["conditions"][-1]["type"] == "Queued"
    assert phase_of(h, "llm-00001-0") == "Running"  # the replica keeps its GPU
    # With a priority class the service's replicas are preempted by priority like any workload.
    h.store.delete("TrainingJob", "urgent", "default")
    h.apply(isvc("batch", minReplicas=1, maxReplicas=1, priorityClassName="low", modelNames=["batch"]))
    h.store.delete("InferenceService", "llm", "default")
    h.settle()
    serve_ready(h)
    assert phase_of(h, "batch-00001-0") == "Running"
    h.apply(job("urgent2", workers=1, priorityClassName="high"))
    h.settle()
    assert ("default/batch-00001-0", "Preempted") in h.rt.stops


def test_why_explains_the_replica_count_and_a_replica_that_waits(one_gpu):
    from muster.controllers.insight.explain.serving import explain_service, gather_service
    from muster.server.views import StoreSource

    h = one_gpu
    h.apply(isvc(minReplicas=2, maxReplicas=2))
    h.settle()
    serve_ready(h)
    obj = h.get("InferenceService", "llm")
    ex = explain_service(obj, gather_service(StoreSource(h.store), obj, now=h.clock()))
    assert ex.state == "Ready"  # one replica serves; the other waits
    assert ex.summary.startswith("inferenceservice/llm serves llm: 1 of 2 replica(s) ready")
    assert "1 replica(s) wait for admission" in ex.summary
    assert ex.message.startswith("llm-00001-1 waits:") and ex.reason in (
        "InsufficientResources",
        "QuotaExhausted",
    )
    assert ex.unblock and ex.nodes  # the waiting replica's Workload explained: per-node verdicts
    [rev] = ex.serving["revisions"]
    assert rev["desiredReplicas"] == 2 and rev["trafficPercent"] == 100 and "reason" in rev["autoscaler"]
    states = {r["name"]: r["state"] for r in ex.serving["replicas"]}
    assert states == {"llm-00001-0": "Ready", "llm-00001-1": "Pending"}
