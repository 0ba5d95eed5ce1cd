"""Auth, health, readiness, metrics, OpenAPI, discovery and the lifecycle hooks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from muster.api import registry
from muster.server import Hook, create_app
from muster.server.auth import load_or_create_credentials
from muster.server.hooks import server_hooks
from muster.store import Store
from muster.testing.factories import training_job
from tests.server.conftest import TOKEN


class TestAuth:
    @pytest.mark.parametrize(
        "path",
        [
            "/readyz",
            "/metrics",
            "/openapi.json",
            "/version",
            "/apis/muster.dev/v1",
            "/apis/muster.dev/v1/trainingjobs",
            "/apis/muster.dev/v1/namespaces/default/trainingjobs/x",
            "/no/such/path",
        ],
    )
    def test_everything_but_healthz_needs_a_token(self, sqlite_store: Store, path: str):
        with TestClient(create_app(sqlite_store, [TOKEN])) as anonymous:
            assert anonymous.get("/healthz").status_code == 200
            resp = anonymous.get(path)
            assert resp.status_code == 401
            assert resp.headers["WWW-Authenticate"] == "Bearer"
            assert resp.json()["error"]["reason"] == "Unauthorized"
            wrong = anonymous.get(path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "invalid token"
            assert anonymous.post(path, json={}).status_code == 401

    def test_credentials_are_created_once_with_mode_0600(self, tmp_path: Path):
        path = tmp_path / "home" / "credentials"
        first = load_or_create_credentials(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert len(first.token) >= 32 and first.user == "admin"
        assert load_or_create_credentials(path) == first


class TestSystem:
    def test_readyz_waits_for_hooks(self, sqlite_store: Store):
        seen: list[bool] = []

        def start(ctx) -> None:
            seen.append(ctx.app.state.ready)

        with TestClient(create_app(sqlite_store, [TOKEN], [Hook("probe", start)])) as c:
            assert seen == [False]  # hooks run before the server is ready
            resp = c.get("/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
            # Only the built-in roles and the default namespace were written before it was ready.
            assert resp.status_code == 200 and resp.json()["revision"] == sqlite_store.revision()
            assert set(sqlite_store.counts()) == {"ClusterRole", "ClusterRoleBinding", "Namespace"}

    def test_hooks_start_in_order_and_stop_in_reverse(self, sqlite_store: Store):
        log: list[str] = []

        async def async_start(_ctx) -> None:
            log.append("start b")

        hooks = [
            Hook("a", lambda _ctx: log.append("start a"), lambda _ctx: log.append("stop a")),
            Hook("b", async_start, lambda _ctx: log.append("stop b")),
        ]
        with TestClient(create_app(sqlite_store, [TOKEN], hooks)):
            assert log == ["start a", "start b"]
        assert log == ["start a", "start b", "stop b", "stop a"]

    def test_a_failing_hook_stops_the_ones_started(self, sqlite_store: Store):
        log: list[str] = []

        def boom(_ctx) -> None:
            raise RuntimeError("no GPUs today")

        hooks = [
            Hook("a", lambda _ctx: log.append("start a"), lambda _ctx: log.append("stop a")),
            Hook("b", boom),
        ]
        with (
            pytest.raises(RuntimeError, match="no GPUs today"),
            TestClient(create_app(sqlite_store, [TOKEN], hooks)),
        ):
            pass
        assert log == ["start a", "stop a"]

    def test_default_hooks_create_the_defaults(self, sqlite_store: Store):
        with TestClient(create_app(sqlite_store, [TOKEN], server_hooks())):
            pass
        assert (
            sqlite_store.get("ClusterQueue", "default")["spec"]["preemption"]["withinClusterQueue"]
            == "LowerPriority"
        )
        assert sqlite_store.get("LocalQueue", "default", "default")["spec"]["clusterQueue"] == "default"
        assert sqlite_store.get("ResourceFlavor", "default")

    def test_metrics(self, api: TestClient):
        api.post("/apis/muster.dev/v1/namespaces/default/trainingjobs", json=training_job("a"))
        api.get("/apis/muster.dev/v1/namespaces/default/trainingjobs/missing")
        text = api.get("/metrics").text
        route = "/apis/muster.dev/v1/namespaces/{namespace}/trainingjobs"
        assert f'muster_api_requests_total{{code="201",method="POST",route="{route}"}} 1.0' in text
        assert f'muster_api_requests_total{{code="404",method="GET",route="{route}/{{name}}"}} 1.0' in text
        assert f'muster_api_request_duration_seconds_count{{method="POST",route="{route}"}} 1.0' in text
        assert 'muster_objects{kind="TrainingJob"} 1.0' in text

    def test_discovery_lists_every_kind(self, api: TestClient):
        resources = api.get("/apis/muster.dev/v1").json()["resources"]
        assert {r["kind"] for r in resources} == {k.kind for k in registry.kinds()}
        tj = next(r for r in resources if r["kind"] == "TrainingJob")
        assert tj == {
            "kind": "TrainingJob",
            "name": "trainingjobs",
            "singularName": "trainingjob",
            "shortNames": ["tj"],
            "namespaced": True,
            "subresources": ["status"],
        }


class TestOpenAPI:
    def test_every_kind_has_its_paths_and_every_ref_resolves(self, api: TestClient):
        spec = api.get("/openapi.json").json()
        paths = spec["paths"]
        for info in registry.kinds():
            base = (
                f"/apis/muster.dev/v1/namespaces/{{namespace}}/{info.plural}"
                if info.namespaced
                else f"/apis/muster.dev/v1/{info.plural}"
            )
            assert {"get", "post"} <= set(paths[base]), info.kind
            assert {"get", "put", "delete"} <= set(paths[base + "/{name}"]), info.kind
            assert (base + "/{name}/status" in paths) == info.has_status, info.kind
            body = paths[base]["post"]["requestBody"]["content"]["application/json"]["schema"]
            assert body["$ref"] == f"#/components/schemas/{info.model.__name__}"
        assert "/apis/muster.dev/v1/apply" in paths
        schemas = spec["components"]["schemas"]
        for ref in _refs(spec):
            assert ref.removeprefix("#/components/schemas/") in schemas, ref


def _refs(node) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_openapi_documents_the_real_error_shape(api: TestClient):
    spec = api.get("/openapi.json").json()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    op = spec["paths"]["/apis/muster.dev/v1/namespaces/{namespace}/trainingjobs"]["post"]
    assert op["responses"]["default"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorResponse"
    )
