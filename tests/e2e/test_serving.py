"""End to end: `muster up --fake-gpus 2` serving the tiny model of muster.serving behind its
gateway, driven over HTTP as an OpenAI client would: scale from zero, the OpenAI and KServe v2
surface, errors, `muster get`/`why`, metrics and the dashboard view; a replica killed with
SIGKILL under load (non-streamed requests retried, the service back to its replicas) and a
server restart that re-adopts the running replicas and keeps serving."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from muster.sdk.client import Client
from muster.testing import free_port, wait_for
from muster.testing.up import MusterUp, run_cli

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "serving"
# A smaller model than the example's: it starts and answers faster on a busy machine.
SMALL = ["--layers", "1", "--d-model", "32", "--threads", "1"]


@pytest.fixture
def python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python3` in the manifests is this environment's (where torch is), as for a user who runs
    `muster up` from their virtualenv."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def gateway(up: MusterUp, token: str | None = "auto") -> httpx.Client:
    headers = {"Authorization": f"Bearer {up.token if token == 'auto' else token}"} if token else {}
    return httpx.Client(base_url=up.gateway_url, headers=headers, timeout=180)


def service(name: str, replicas: int, **spec: object) -> dict:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {
            "minReplicas": replicas,
            "maxReplicas": replicas,
            "predictor": {
                "terminationGracePeriodSeconds": 5,
                "containers": [
                    {
                        "name": "server",
                        "command": [sys.executable, "-m", "muster.serving.model_server"],
                        "args": ["--port", "$(PORT)", *SMALL],
                        "resources": {"limits": {"nvidia.com/gpu": "500m"}},
                    }
                ],
            },
            **spec,
        },
    }


@contextlib.contextmanager
def steady_load(up: MusterUp, body: dict, clients: int) -> Iterator[list[int]]:
    """``clients`` threads posting ``body`` to the gateway back to back while the block runs;
    yields the status codes as they come (the threads are joined on leaving)."""
    results: list[int] = []
    stop = threading.Event()

    def load() -> None:
        with gateway(up) as gw:
            while not stop.is_set():
                results.append(gw.post("/v1/completions", json=body).status_code)

    threads = [threading.Thread(target=load) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        yield results
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)


def ready_replicas(client: Client, name: str) -> int:
    status = client.get("InferenceService", name, "default").get("status") or {}
    return int(status.get("readyReplicas") or 0)


def test_a_model_served_from_zero_through_the_gateway(muster_home: Path, python_on_path: None):
    with MusterUp(muster_home, extra_args=["--fake-gpus", "2"]) as up, Client(up.url, up.token) as client:
        applied = run_cli(muster_home, "apply", "-f", str(EXAMPLES / "tiny-llm.yaml"))
        assert applied.returncode == 0, applied.stderr
        with gateway(up) as gw:
            # Applied is stored; the gateway knows the model once the controller has seen it.
            models = wait_for(lambda: gw.get("/v1/models").json()["data"], timeout=30, what="the model")
            assert models[0]["id"] == "tiny-llm"
            with gateway(up, token=None) as anonymous:
                assert anonymous.get("/v1/models").status_code == 401
            # The first request waits at the gateway while the service scales up from zero.
            wait_for(
                lambda: client.get("InferenceService", "tiny-llm", "default").get("status", {}).get("url"),
                timeout=60,
                what="the service's status",
            )
            first = gw.post("/v1/completions", json={"model": "tiny-llm", "prompt": "Hello", "max_tokens": 4})
            assert first.status_code == 200, first.text
            body = first.json()
            assert body["object"] == "text_completion" and len(body["choices"][0]["text"]) == 4
            assert first.headers["x-muster-replica"].startswith("tiny-llm-00001-")
            # Chat, streamed: events pass through one by one, the first delta carries the role.
            chat = {"model": "tiny-llm", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3}
            with gw.stream("POST", "/v1/chat/completions", json={**chat, "stream": True}) as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                events = [line[6:] for line in stream.iter_lines() if line.startswith("data: ")]
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
            assert sum(1 for c in chunks if c["choices"][0]["delta"].get("content")) == 3
            emb = gw.post("/v1/embeddings", json={"model": "tiny-llm", "input": ["a", "b"]}).json()
            assert [d["index"] for d in emb["data"]] == [0, 1] and len(emb["data"][0]["embedding"]) > 8
            # KServe v2 passes through.
            assert gw.get("/v2/models/tiny-llm/ready").json() == {"ready": True}
            infer = {"inputs": [{"name": "text", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}
            assert (
                gw.post("/v2/models/tiny-llm/infer", json=infer).json()["outputs"][0]["datatype"] == "BYTES"
            )
            # Errors in OpenAI's shape.
            missing = gw.post("/v1/completions", json={"model": "nope", "prompt": "x"})
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
            assert gw.post("/v1/completions", content=b"{not json").status_code == 400
        table = run_cli(muster_home, "get", "isvc").stdout
        assert "tiny-llm" in table and up.gateway_url in table and "1/1" in table, table
        why = run_cli(muster_home, "why", "isvc/tiny-llm")
        assert why.returncode == 0 and "serves tiny-llm: 1 of 1 replica(s) ready" in why.stdout, why.stdout
        metrics = client.metrics()
        assert 'muster_serving_requests_total{code="200",model="tiny-llm"' in metrics
        assert "muster_serving_ready_replicas" in metrics
        view = _ui(up, "/ui/api/serving")
        [svc] = view["services"]
        assert svc["readyReplicas"] == 1 and svc["series"] and svc["series"][-1]["rps"] > 0


def _ui(up: MusterUp, path: str) -> dict:
    return httpx.get(up.url + path, headers={"Authorization": f"Bearer {up.token}"}, timeout=30).json()


def test_a_killed_replica_loses_no_retried_request_and_a_restart_keeps_serving(
    muster_home: Path, tmp_path: Path, python_on_path: None
):
    gateway_port = str(_free())
    extra = ["--fake-gpus", "2", "--gateway-port", gateway_port]
    up = MusterUp(muster_home, extra_args=extra).start()
    try:
        with Client(up.url, up.token) as client:
            client.apply([service("pair", 2)])
            wait_for(lambda: ready_replicas(client, "pair") == 2, timeout=180, what="two ready replicas")
            with steady_load(
                up, {"model": "pair", "prompt": "a steady request", "max_tokens": 2}, 4
            ) as results:
                wait_for(lambda: len(results) >= 40, timeout=120, what="requests before the kill")
                victim = _pid(muster_home, "pair-00001-0")
                os.kill(victim, signal.SIGKILL)
                before_kill = len(results)
                wait_for(
                    lambda: len(results) >= before_kill + 80, timeout=120, what="requests after the kill"
                )
            assert results and all(code == 200 for code in results), sorted(set(results))
            wait_for(lambda: ready_replicas(client, "pair") == 2, timeout=180, what="the replica restarted")
            status = client.get("InferenceService", "pair", "default")["status"]
            restarted = {r["name"]: r.get("restarts", 0) for r in status["replicas"]}
            assert restarted["pair-00001-0"] == 1
            pids = {n: _pid(muster_home, n) for n in ("pair-00001-0", "pair-00001-1")}
            uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in client.list("Pod")["items"]}
        # A restart of the server: the replicas run on, are re-adopted, and serve again.
        up.stop()
        up = MusterUp(muster_home, port=up.port, extra_args=extra).start()
        with Client(up.url, up.token) as client, gateway(up) as gw:
            reply = gw.post("/v1/completions", json={"model": "pair", "prompt": "after", "max_tokens": 2})
            assert reply.status_code == 200, reply.text
            assert {n: _pid(muster_home, n) for n in pids} == pids
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in client.list("Pod")["items"]} == uids
            wait_for(
                lambda: ready_replicas(client, "pair") == 2, timeout=60, what="both replicas ready again"
            )
    finally:
        up.stop()


def _pid(home: Path, pod: str) -> int:
    """The process of the newest incarnation of ``pod`` (the local runtime's record of it)."""
    states = (home / "run" / "local" / "pods" / "default" / pod).glob("*/server.state.json")
    newest = max(states, key=lambda p: p.stat().st_mtime)
    return int(json.loads(newest.read_text())["pid"])


def _free() -> int:
    return free_port()


def test_scaling_down_under_steady_load_fails_no_request(muster_home: Path):
    """The small version of benchmarks/serving_scaledown.py: three replicas of a server that takes
    50 ms per request, brought down to one while requests keep coming; none may fail."""
    echo = ["--echo", "--echo-delay", "0.05"]
    with MusterUp(muster_home) as up, Client(up.url, up.token) as client:
        doc = service("steady", 3, scaleDownDelaySeconds=0, loadBalancing={"strategy": "RoundRobin"})
        doc["spec"]["predictor"]["containers"][0]["args"] = ["--port", "$(PORT)", *echo]
        del doc["spec"]["predictor"]["containers"][0]["resources"]
        client.apply([doc])
        wait_for(lambda: ready_replicas(client, "steady") == 3, timeout=120, what="three ready replicas")
        with steady_load(up, {"model": "steady", "prompt": "x", "max_tokens": 1}, 6) as results:
            wait_for(lambda: len(results) >= 60, timeout=60, what="requests on three replicas")
            isvc = client.get("InferenceService", "steady", "default")
            isvc["spec"]["minReplicas"] = isvc["spec"]["maxReplicas"] = 1
            client.update(isvc)
            wait_for(
                lambda: len(client.list("Pod")["items"]) == 1, timeout=120, what="two replicas drained away"
            )
            settled = len(results)
            wait_for(lambda: len(results) >= settled + 60, timeout=60, what="requests on the last replica")
        # (how many ran while two replicas drained depends on the machine's speed; the waits
        # above saw 60 before and 60 after)
        assert set(results) == {200}, sorted(set(results))
        reasons = [e["reason"] for e in client.list("Event", "default")["items"]]
        assert "ReplicaDraining" in reasons and "ReplicaStopped" in reasons


def test_the_examples_apply_as_written_with_a_warning_per_field_not_honoured(muster_home: Path):
    with MusterUp(muster_home, extra_args=["--runtime", "none"]):
        applied = run_cli(muster_home, "apply", "-f", str(EXAMPLES))
        assert applied.returncode == 0, applied.stderr
        assert sorted(applied.stdout.split()) == sorted(
            [
                "inferenceservice/qwen2-500m",
                "created",
                "inferenceservice/tiny-kserve",
                "created",
                "inferenceservice/tiny-llm",
                "created",
            ]
        )
        assert "spec.transformer" in applied.stderr  # the KServe example: a warning per field
        assert "spec.features" in applied.stderr  # the KubeAI example
        listed = run_cli(muster_home, "get", "isvc", "-o", "name").stdout.split()
        assert listed == [
            "inferenceservice/qwen2-500m",
            "inferenceservice/tiny-kserve",
            "inferenceservice/tiny-llm",
        ]
