"""End to end: the gateway authorizes each call against the service it reaches (`create` on
inferenceservices/proxy in its namespace), so one team cannot call or list another's models."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.tenancy import set_up_teams
from muster.testing.up import MusterUp

pytestmark = pytest.mark.slow


def _service(namespace: str) -> dict:
    # minReplicas 0 and no request that may reach it: nothing starts, the route still exists.
    container = {"name": "server", "command": ["sleep", "600"]}
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "InferenceService",
        "metadata": {"name": "llm", "namespace": namespace},
        "spec": {"modelNames": ["team-a-llm"], "minReplicas": 0, "predictor": {"containers": [container]}},
    }


def _models(url: str, token: str) -> list[str]:
    reply = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert reply.status_code == 200, reply.text
    return [m["id"] for m in reply.json()["data"]]


def test_only_the_services_team_may_call_or_list_its_model(muster_home: Path):
    with MusterUp(muster_home, extra_args=["--fake-gpus", "1"]) as up, Client(up.url, up.token) as admin:
        tokens = set_up_teams(admin)
        admin.apply([_service("team-a")])
        wait_for(lambda: _models(up.gateway_url, up.token) == ["team-a-llm"], what="the route on the gateway")
        assert _models(up.gateway_url, tokens["alice"]) == ["team-a-llm"]
        assert _models(up.gateway_url, tokens["bob"]) == []
        assert _models(up.gateway_url, tokens["val"]) == []  # view reads services, may not call them
        denied = httpx.post(
            f"{up.gateway_url}/v1/completions",
            json={"model": "team-a-llm", "prompt": "hi"},
            headers={"Authorization": f"Bearer {tokens['bob']}"},
            timeout=30,
        )
        assert denied.status_code == 403
        error = denied.json()["error"]
        assert error["code"] == "permission_denied" and "inferenceservices/proxy" in error["message"]
        assert "team-a" in error["message"]
