"""A corpus of hostile and careless requests against a real HTTP server (uvicorn in a thread).

Each case is one request and what a careful API server answers: the status, the reason, and
always the one error shape (docs/rest-api.md, "Errors"). Writes that are refused store nothing.
The cases cover oversized bodies and objects, loose types and unbounded numbers, odd names and
path traversal, bad credentials, revisions from the future, and HTTP semantics (405, 406, 415).
"""

from __future__ import annotations

import base64
import copy
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from muster.sdk.errors import RequestTooLarge, ResourceVersionTooLarge
from muster.store import Store, open_store
from muster.testing.factories import training_job
from muster.testing.server import RunningServer, serve

TOKEN = "corpus-token"
V1 = "/apis/muster.dev/v1"
TJ = f"{V1}/namespaces/default/trainingjobs"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path_factory.mktemp('corpus') / 'muster.db'}", poll_interval=0.05)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="module")
def corpus_server(corpus_store: Store) -> Iterator[RunningServer]:
    """One server for the corpus, holding one TrainingJob, ``seed``."""
    with serve(corpus_store, TOKEN) as running:
        with httpx.Client(base_url=running.url, headers=_auth()) as http:
            assert http.post(TJ, json=training_job("seed")).status_code == 201
        yield running


def _auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def _job(name: str, **container: Any) -> dict[str, Any]:
    doc = training_job(name)
    doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0].update(container)
    return doc


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``doc`` with the field at a dotted ``path`` set to ``value``."""
    out = copy.deepcopy(doc)
    where = out
    *parents, last = path.split(".")
    for key in parents:
        where = where[int(key)] if isinstance(where, list) else where.setdefault(key, {})
    where[last] = value
    return out


def _big_job(name: str, size: int) -> dict[str, Any]:
    return _job(name, env=[{"name": "PAYLOAD", "value": "x" * size}])


def _limits(**amounts: Any) -> dict[str, Any]:
    return {"limits": amounts}


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _raw_job(name: str, security_context: str) -> bytes:
    """A TrainingJob whose pod securityContext is the raw JSON text given (for what
    json.dumps cannot write: NaN, deep nesting)."""
    doc = training_job(name)
    doc["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["securityContext"] = "@@"
    return json.dumps(doc).replace('"@@"', security_context).encode()


def _chunks(total: int) -> Iterator[bytes]:
    # A generator body: httpx sends it chunked, without Content-Length.
    sent = 0
    while sent < total:
        yield b" " * 65536
        sent += 65536


JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Case:
    """One request and the answer it must get."""

    id: str
    method: str
    path: str
    status: int
    reason: str | None = None
    json: Any = None
    content: Any = None
    params: dict[str, str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    auth: bool = True
    says: str = ""  # a text the error message or one of its field paths must contain
    absent: str | None = None  # a path that must still answer 404 afterwards (nothing stored)
    check: Callable[[httpx.Response], None] | None = None


def _allow(expected: str) -> Callable[[httpx.Response], None]:
    def check(resp: httpx.Response) -> None:
        assert resp.headers.get("allow") == expected

    return check


def _no_token_leak(resp: httpx.Response) -> None:
    assert TOKEN not in resp.text


def _challenge(resp: httpx.Response) -> None:
    assert resp.headers.get("www-authenticate") == "Bearer"


def _closes(resp: httpx.Response) -> None:
    assert resp.headers.get("connection") == "close"


_GPU = "spec.replicaSpecs.Worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]"
_QUEUE = {
    "apiVersion": "muster.dev/v1",
    "kind": "ClusterQueue",
    "metadata": {"name": "huge"},
    "spec": {
        "resourceGroups": [
            {
                "coveredResources": ["memory"],
                "flavors": [{"name": "default", "resources": [{"name": "memory", "nominalQuota": "9Pi"}]}],
            }
        ]
    },
}
_PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "lenient"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": "2",
                "template": {
                    "spec": {"containers": [{"name": "pytorch", "image": "x", "command": ["true"]}]}
                },
            }
        }
    },
}


def _warned_about_replicas(resp: httpx.Response) -> None:
    (result,) = resp.json()["results"]
    assert any("spec.pytorchReplicaSpecs.Worker.replicas" in w for w in result["warnings"]), result


# fmt: off
CASES = [
    # -- sizes ----------------------------------------------------------------------------------
    Case("20MiB-body-declared", "POST", TJ, 413, "RequestEntityTooLarge", json=_big_job("big20", 20 * MIB),
         says="3 MiB", absent=f"{TJ}/big20", check=_closes),
    Case("4MiB-body-chunked", "POST", f"{V1}/apply", 413, "RequestEntityTooLarge",
         content=_chunks(4 * MIB), headers=JSON),
    Case("oversized-body-to-the-dashboard-sign-in", "POST", "/login", 413, "RequestEntityTooLarge",
         content=b" " * (4 * MIB), headers=JSON, auth=False),
    Case("oversized-body-to-the-dashboard-api", "GET", "/ui/api/overview", 413, "RequestEntityTooLarge",
         content=b" " * (4 * MIB)),
    Case("oversized-body-without-a-token-is-401", "POST", TJ, 401, "Unauthorized",
         json=_big_job("anon", 4 * MIB), auth=False),
    Case("2MiB-object-over-the-store-limit", "POST", TJ, 413, "RequestEntityTooLarge",
         json=_big_job("big2", 2 * MIB), says="1.5 MiB", absent=f"{TJ}/big2"),
    Case("apply-with-one-document-too-large", "POST", f"{V1}/apply", 413, "RequestEntityTooLarge",
         json={"documents": [training_job("small"), _big_job("big2b", 2 * MIB)]}, absent=f"{TJ}/small"),
    Case("status-that-makes-the-object-too-large", "PUT", f"{TJ}/seed/status", 413, "RequestEntityTooLarge",
         json={"status": {"conditions": [{"type": "Running", "status": "True", "message": "x" * 2 * MIB}]}}),
    Case("json-nested-300-deep", "POST", TJ, 422, "Invalid", content=_raw_job("deep", _nested(300)),
         headers=JSON, says="nested more than 64", absent=f"{TJ}/deep"),
    Case("json-nested-100000-deep", "POST", TJ, 400, "BadRequest",
         content=_raw_job("deeper", _nested(100_000)), headers=JSON),
    Case("nan-and-infinity", "POST", TJ, 422, "Invalid", content=_raw_job("nan", '{"a": NaN, "b": Infinity}'),
         headers=JSON, says="finite number", absent=f"{TJ}/nan"),
    Case("lone-surrogate-in-a-value", "POST", TJ, 422, "Invalid",
         content=_raw_job("sur", '{"a": "x\\ud800y"}'), headers=JSON, says="lone UTF-16 surrogate",
         absent=f"{TJ}/sur"),
    Case("lone-surrogate-in-a-key", "POST", TJ, 422, "Invalid",
         content=_raw_job("surkey", '{"\\udfff": 1}'), headers=JSON, says="\\udfff",
         absent=f"{TJ}/surkey"),
    Case("lone-surrogate-in-the-name-of-one-applied-document", "POST", f"{V1}/apply", 422, "Invalid",
         content=json.dumps({"documents": [training_job("fine"), training_job("bad\ud800")]}).encode(),
         headers=JSON, says="metadata.name", absent=f"{TJ}/fine"),
    Case("integer-beyond-64-bits", "POST", TJ, 422, "Invalid",
         content=_raw_job("int", '{"a": 1' + "0" * 30 + "}"), headers=JSON, says="64-bit",
         absent=f"{TJ}/int"),
    # -- types and numbers ----------------------------------------------------------------------
    Case("replicas-as-a-string", "POST", TJ, 422, "Invalid",
         json=_with(training_job("str"), "spec.replicaSpecs.Worker.replicas", "2"),
         says="spec.replicaSpecs.Worker.replicas", absent=f"{TJ}/str"),
    Case("replicas-as-a-fraction", "POST", TJ, 422, "Invalid",
         json=_with(training_job("frac"), "spec.replicaSpecs.Worker.replicas", 2.5), says="replicas"),
    Case("replicas-as-a-boolean", "POST", TJ, 422, "Invalid",
         json=_with(training_job("bool"), "spec.replicaSpecs.Worker.replicas", True), says="replicas"),
    Case("label-value-as-a-number", "POST", TJ, 422, "Invalid",
         json=_with(training_job("lbl"), "metadata.labels", {"team": 7}), says="metadata.labels.team"),
    Case("env-value-as-a-number", "POST", TJ, 422, "Invalid",
         json=_job("env", env=[{"name": "N", "value": 1}]), says="env[0].value"),
    Case("suspend-as-a-string", "POST", TJ, 422, "Invalid",
         json=_with(training_job("susp"), "spec.runPolicy", {"suspend": "true"}), says="runPolicy.suspend"),
    Case("1e30-gpus", "POST", TJ, 422, "Invalid",
         json=_job("gpus", resources=_limits(**{"nvidia.com/gpu": 1e30})), says=_GPU, absent=f"{TJ}/gpus"),
    Case("ten-trillion-cpus", "POST", TJ, 422, "Invalid",
         json=_job("cpus", resources=_limits(cpu="1e13")), says="limits.cpu"),
    # Parsed as is, it took minutes of CPU: the exponent is refused before any arithmetic.
    Case("quantity-with-a-billion-digit-exponent", "POST", TJ, 422, "Invalid",
         json=_job("exp", resources=_limits(memory="1e999999999")), says="exponent"),
    Case("quantity-of-a-hundred-digits", "POST", TJ, 422, "Invalid",
         json=_job("digits", resources=_limits(memory="9" * 100)), says="digits"),
    Case("quota-beyond-8Pi", "POST", f"{V1}/clusterqueues", 422, "Invalid", json=_QUEUE,
         says="nominalQuota", absent=f"{V1}/clusterqueues/huge"),
    Case("converted-pytorchjob-keeps-its-leniency-with-a-warning", "POST", f"{V1}/apply", 200,
         json={"documents": [_PYTORCHJOB], "dryRun": True}, check=_warned_about_replicas),
    Case("apply-dryrun-as-a-string", "POST", f"{V1}/apply", 400, "BadRequest",
         json={"documents": [], "dryRun": "yes"}, says="dryRun"),
    Case("fault-injection-gpu-as-a-string", "POST", f"{V1}/nodes/n1/fault-injection", 400, "BadRequest",
         json={"gpu": "0", "clear": True}, says="gpu"),
    Case("body-is-a-list", "POST", TJ, 400, "BadRequest", json=[training_job("list")]),
    Case("malformed-json", "POST", TJ, 400, "BadRequest", content=b'{"metadata": {"name": ', headers=JSON),
    # -- names and traversal --------------------------------------------------------------------
    Case("namespace-of-dot-dot", "GET", f"{V1}/namespaces/%2E%2E/trainingjobs", 400, "BadRequest",
         says="path.namespace"),
    Case("namespace-with-encoded-slashes", "GET", f"{V1}/namespaces/..%2F..%2Fetc/trainingjobs", 404,
         "NotFound"),
    Case("namespace-in-upper-case", "GET", f"{V1}/namespaces/Default/trainingjobs", 400, "BadRequest",
         says="path.namespace"),
    Case("name-of-254-characters", "GET", f"{TJ}/{'a' * 254}", 400, "BadRequest", says="path.name"),
    Case("name-with-a-line-break", "POST", TJ, 422, "Invalid", json=training_job("job\n"),
         says="metadata.name"),
    Case("name-with-unicode", "POST", TJ, 422, "Invalid", json=training_job("jöb"), says="metadata.name"),
    Case("label-key-with-a-space", "POST", TJ, 422, "Invalid", json=training_job("key", labels={"a b": "c"}),
         says="metadata.labels"),
    # Before: $MUSTER_HOME/logs/../. is $MUSTER_HOME, and its *.log files were served.
    Case("log-path-traversal", "GET", f"{V1}/namespaces/%2E%2E/pods/%2E/log", 400, "BadRequest",
         params={"container": "up"}, says="path.namespace", check=_no_token_leak),
    Case("log-container-traversal", "GET", f"{V1}/namespaces/default/pods/seed/log", 400, "BadRequest",
         params={"container": "../../credentials"}, says="query.container", check=_no_token_leak),
    # -- credentials ----------------------------------------------------------------------------
    Case("no-token", "GET", TJ, 401, "Unauthorized", auth=False, check=_challenge),
    Case("wrong-token", "GET", TJ, 401, "Unauthorized", auth=False,
         headers={"Authorization": "Bearer not-the-token"}),
    Case("bearer-without-a-token", "GET", TJ, 401, "Unauthorized", auth=False,
         headers={"Authorization": "Bearer"}),
    Case("basic-auth-with-the-token", "GET", TJ, 401, "Unauthorized", auth=False,
         headers={"Authorization": "Basic " + base64.b64encode(f"admin:{TOKEN}".encode()).decode()}),
    Case("token-in-the-query", "GET", TJ, 401, "Unauthorized", auth=False, params={"access_token": TOKEN}),
    Case("wrong-session-cookie", "GET", TJ, 401, "Unauthorized", auth=False,
         headers={"Cookie": "muster_session=forged"}),
    Case("cookie-write-without-csrf-header", "DELETE", f"{TJ}/seed", 403, "Forbidden", auth=False,
         headers={"Cookie": f"muster_session={TOKEN}"}),
    # -- revisions ------------------------------------------------------------------------------
    Case("watch-from-the-far-future", "GET", TJ, 400, "ResourceVersionTooLarge",
         params={"watch": "true", "resourceVersion": "99999999999999999999999"},
         says="Too large resource version"),
    Case("list-from-the-future", "GET", TJ, 400, "ResourceVersionTooLarge",
         params={"resourceVersion": "1000000"}),
    Case("watch-from-a-negative-revision", "GET", TJ, 400, "BadRequest",
         params={"watch": "true", "resourceVersion": "-1"}),
    Case("watch-from-a-signed-revision", "GET", TJ, 400, "BadRequest",
         params={"watch": "true", "resourceVersion": "+1"}),
    Case("watch-from-an-underscored-revision", "GET", TJ, 400, "BadRequest",
         params={"watch": "true", "resourceVersion": "1_0"}),
    Case("delete-with-a-malformed-precondition", "DELETE", f"{TJ}/seed", 400, "BadRequest",
         params={"resourceVersion": "latest"}),
    Case("delete-with-a-stale-precondition", "DELETE", f"{TJ}/seed", 409, "Conflict",
         params={"resourceVersion": "0"}),
    # -- HTTP semantics -------------------------------------------------------------------------
    Case("405-on-a-collection", "PUT", TJ, 405, "MethodNotAllowed", check=_allow("DELETE, GET, POST")),
    Case("405-on-an-object", "POST", f"{TJ}/seed", 405, "MethodNotAllowed",
         check=_allow("DELETE, GET, PATCH, PUT")),
    Case("405-on-a-static-file", "POST", "/ui/static/favicon.svg", 405, "MethodNotAllowed", auth=False,
         check=_allow("GET, HEAD")),
    Case("406-for-xml", "GET", f"{TJ}/seed", 406, "NotAcceptable", headers={"Accept": "application/xml"}),
    Case("406-for-a-log-as-json", "GET", f"{V1}/namespaces/default/pods/seed/log", 406, "NotAcceptable",
         headers={"Accept": "application/json"}),
    Case("weighted-accept-is-served", "GET", f"{TJ}/seed", 200,
         headers={"Accept": "text/html, application/json;q=0.5"}),
    Case("415-for-yaml", "POST", TJ, 415, "UnsupportedMediaType", content=b"metadata: {name: y}",
         headers={"Content-Type": "application/yaml"}),
    Case("415-without-content-type", "POST", TJ, 415, "UnsupportedMediaType",
         content=json.dumps(training_job("untyped")).encode(), absent=f"{TJ}/untyped"),
    Case("unknown-path", "GET", "/apis/muster.dev/v2/secrets", 404, "NotFound"),
    Case("label-selector-with-a-tab", "GET", TJ, 400, "BadRequest", params={"labelSelector": "a=b,\tc=d"}),
    Case("label-selector-of-operators", "GET", TJ, 400, "BadRequest", params={"labelSelector": "==="}),
    Case("negative-watch-timeout", "GET", TJ, 400, "BadRequest",
         params={"watch": "true", "timeoutSeconds": "-1"}),
]
# fmt: on


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_request(case: Case, corpus_server: RunningServer):
    headers = {**(_auth() if case.auth else {}), **case.headers}
    with httpx.Client(base_url=corpus_server.url, timeout=30) as http:
        resp = http.request(
            case.method, case.path, json=case.json, content=case.content, params=case.params, headers=headers
        )
        assert resp.status_code == case.status, resp.text[:500]
        if case.status >= 400:
            error = _error(resp)
            if case.reason:
                assert error["reason"] == case.reason, error
            if case.says:
                places = [error["message"], *(e.get("path", "") for e in error.get("errors", []))]
                assert any(case.says in place for place in places), error
        if case.check is not None:
            case.check(resp)
        if case.absent:
            assert http.get(case.absent, headers=_auth()).status_code == 404, f"{case.absent} was stored"


def test_the_corpus_is_the_size_the_issue_asked_for():
    assert len(CASES) >= 47


def test_a_20mib_body_does_not_grow_the_server(corpus_server: RunningServer):
    """The server thread shares this process: its memory may not grow by the body's size
    (before the limit, one such request grew the server by 300 MB)."""
    body = json.dumps(_big_job("rss", 20 * MIB)).encode()
    process = psutil.Process(os.getpid())
    before = process.memory_info().rss
    with httpx.Client(base_url=corpus_server.url, headers={**_auth(), **JSON}, timeout=30) as http:
        for _ in range(3):
            assert http.post(TJ, content=body).status_code == 413
    assert process.memory_info().rss - before < 64 * MIB


def test_a_request_just_under_the_limit_is_read(corpus_server: RunningServer):
    """The limit is on the body's bytes: padding a document to just under 3 MiB is fine."""
    doc = json.dumps(training_job("padded")).encode()
    body = doc + b" " * (3 * MIB - len(doc))
    with httpx.Client(base_url=corpus_server.url, headers={**_auth(), **JSON}, timeout=30) as http:
        assert http.post(TJ, content=body).status_code == 201
        assert http.post(TJ, content=body + b" ").status_code == 413


def test_the_limit_is_a_setting(sqlite_store: Store, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MUSTER_MAX_REQUEST_BYTES", "1000")
    with serve(sqlite_store, TOKEN) as running, httpx.Client(base_url=running.url, headers=_auth()) as http:
        resp = http.post(TJ, json=_big_job("small-limit", 1000))
        assert resp.status_code == 413 and "1000 bytes" in _error(resp)["message"]
        assert http.post(TJ, json=training_job("fits")).status_code == 201


def test_a_watch_from_a_compacted_revision_stays_410(tmp_path: Path):
    store = open_store(f"sqlite:///{tmp_path / 'small.db'}", retention=2)
    try:
        for i in range(6):
            store.create(training_job(f"j{i}"))
        with serve(store, TOKEN) as running, httpx.Client(base_url=running.url, headers=_auth()) as http:
            resp = http.get(TJ, params={"watch": "true", "resourceVersion": "1"})
            assert resp.status_code == 410 and _error(resp)["reason"] == "Expired"
            head = store.revision()
            assert http.get(TJ, params={"watch": "true", "resourceVersion": str(head + 1)}).status_code == 400
            ok = http.get(TJ, params={"watch": "true", "resourceVersion": str(head), "timeoutSeconds": "0.1"})
            assert ok.status_code == 200
    finally:
        store.close()


def test_the_sdk_raises_typed_errors(corpus_server: RunningServer):
    with corpus_server.client(TOKEN) as client:
        with pytest.raises(RequestTooLarge, match=r"1\.5 MiB"):
            client.create(_big_job("sdk-big", 2 * MIB))
        with pytest.raises(ResourceVersionTooLarge, match="Too large resource version"):
            next(iter(client.watch("TrainingJob", resource_version="99999999999")))


def test_the_server_is_healthy_after_the_corpus(corpus_server: RunningServer):
    with httpx.Client(base_url=corpus_server.url, headers=_auth()) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").status_code == 200
        names = [o["metadata"]["name"] for o in http.get(TJ).json()["items"]]
        assert "seed" in names


def _error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == resp.status_code and body["error"]["message"], body
    return body["error"]


def test_the_sdk_raises_request_too_large_for_a_body_over_the_limit(corpus_server: RunningServer):
    """The SDK sends its body whole (http.client) while the server refuses it unread: the
    413 still reaches the caller as RequestTooLarge, not as a broken connection."""
    with corpus_server.client(TOKEN) as client:
        for _ in range(3):
            with pytest.raises(RequestTooLarge, match=r"3 MiB"):
                client.create(_big_job("sdk-huge", 20 * MIB))
        assert client.get("TrainingJob", "seed", "default")["metadata"]["name"] == "seed"
