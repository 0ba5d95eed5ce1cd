"""Paged lists over HTTP: ``limit`` and ``continue`` on every list route (docs/rest-api.md)."""

from __future__ import annotations

import base64
import json

import pytest
from fastapi.testclient import TestClient

from muster.testing.factories import flavor, training_job

ROOT = "/apis/muster.dev/v1"
TJ = f"{ROOT}/namespaces/default/trainingjobs"


def error(resp) -> dict:
    assert resp.status_code == 400, resp.text
    return resp.json()["error"]


def pages(api: TestClient, path: str, limit: int, start: str | None = None, **params) -> list[dict]:
    first = {"continue": start} if start else {}
    out = [api.get(path, params={"limit": limit, **first, **params}).json()]
    while "continue" in out[-1]["metadata"]:
        token = out[-1]["metadata"]["continue"]
        out.append(api.get(path, params={"limit": limit, "continue": token, **params}).json())
    return out


def names(listed: list[dict]) -> list[str]:
    return [
        f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for p in listed for o in p["items"]
    ]


@pytest.fixture
def jobs(api: TestClient) -> list[str]:
    made = []
    for ns in ("team-b", "default", "team-a"):
        for i in range(5):
            labels = {"even": "yes"} if i % 2 == 0 else {}
            api.post(
                f"{ROOT}/namespaces/{ns}/trainingjobs",
                json=training_job(f"j{i}", namespace=ns, labels=labels),
            )
            made.append(f"{ns}/j{i}")
    return sorted(made)


def test_pages_of_one_namespace(api: TestClient, jobs: list[str]):
    listed = pages(api, TJ, 2)
    assert [len(p["items"]) for p in listed] == [2, 2, 1]
    assert names(listed) == [f"default/j{i}" for i in range(5)]
    assert all(p["kind"] == "TrainingJobList" and p["metadata"]["resourceVersion"] for p in listed)
    assert "continue" not in listed[-1]["metadata"]
    # The unpaged list is unchanged and carries no continue.
    whole = api.get(TJ).json()
    assert "continue" not in whole["metadata"] and [o["metadata"]["name"] for o in whole["items"]] == [
        f"j{i}" for i in range(5)
    ]


def test_pages_across_namespaces_with_a_selector(api: TestClient, jobs: list[str]):
    every = f"{ROOT}/trainingjobs"
    assert names(pages(api, every, 4)) == jobs
    listed = pages(api, every, 4, labelSelector="even=yes")
    assert [len(p["items"]) for p in listed] == [4, 4, 1]
    assert names(listed) == [j for j in jobs if int(j[-1]) % 2 == 0]


def test_cluster_scoped_pages(api: TestClient):
    for name in ("c", "a", "b"):
        api.post(f"{ROOT}/resourceflavors", json=flavor(name, {"gpu": name}))
    assert names(pages(api, f"{ROOT}/resourceflavors", 2)) == ["/a", "/b", "/c"]


def test_a_limit_beyond_the_list_is_one_page_and_continue_alone_answers_the_rest(api: TestClient, jobs):
    only = api.get(TJ, params={"limit": 1000}).json()
    assert len(only["items"]) == 5 and "continue" not in only["metadata"]
    first = api.get(TJ, params={"limit": 2}).json()
    rest = api.get(TJ, params={"continue": first["metadata"]["continue"]}).json()
    assert [o["metadata"]["name"] for o in rest["items"]] == ["j2", "j3", "j4"]


def test_an_object_present_throughout_is_listed_once(api: TestClient, jobs: list[str]):
    first = api.get(f"{ROOT}/trainingjobs", params={"limit": 6}).json()
    assert names([first])[-1] == "team-a/j0"
    api.delete(f"{ROOT}/namespaces/team-b/trainingjobs/j3")  # ahead: not listed
    api.post(TJ, json=training_job("j9"))  # behind: not listed
    api.post(f"{ROOT}/namespaces/team-a/trainingjobs", json=training_job("j00", namespace="team-a"))  # ahead
    token = first["metadata"]["continue"]
    rest = pages(api, f"{ROOT}/trainingjobs", 6, start=token)
    listed = names([first]) + names(rest)
    assert len(listed) == len(set(listed))
    assert set(listed) == (set(jobs) - {"team-b/j3"}) | {"team-a/j00"}
    assert int(rest[0]["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_limit_must_be_at_least_one(api: TestClient):
    bad = error(api.get(TJ, params={"limit": 0}))
    assert bad["errors"][0]["path"] == "query.limit" and "greater than or equal to 1" in bad["message"]
    assert api.get(TJ, params={"limit": "many"}).status_code == 400


def test_a_malformed_token_is_a_400_saying_to_start_again(api: TestClient, jobs):
    forged = base64.urlsafe_b64encode(json.dumps({"v": 1, "after": 3}).encode()).decode().rstrip("=")
    for token in ("nope!", "bm9wZQ", forged):
        bad = error(api.get(TJ, params={"limit": 2, "continue": token}))
        assert bad["message"].startswith("continue: not a token this server gave")
        assert "start the list again without continue" in bad["message"]
        assert bad["errors"][0]["path"] == "continue"


def test_a_token_of_another_list_is_a_400(api: TestClient, jobs):
    token = api.get(TJ, params={"limit": 2, "labelSelector": "even=yes"}).json()["metadata"]["continue"]
    for path, params in [
        (TJ, {}),  # no selector now
        (TJ, {"labelSelector": "even!=no"}),
        (f"{ROOT}/namespaces/team-a/trainingjobs", {"labelSelector": "even=yes"}),
        (f"{ROOT}/trainingjobs", {"labelSelector": "even=yes"}),
        (f"{ROOT}/namespaces/default/workloads", {"labelSelector": "even=yes"}),
    ]:
        bad = error(api.get(path, params={"limit": 2, "continue": token, **params}))
        assert (
            "the token continues a list of TrainingJob in namespace default with labelSelector 'even=yes'"
            in (bad["message"])
        )
        assert "start the list again without continue" in bad["message"]
    ok = api.get(TJ, params={"limit": 2, "continue": token, "labelSelector": "even=yes"}).json()
    assert [o["metadata"]["name"] for o in ok["items"]] == ["j4"]


def test_a_hand_made_token_for_another_namespace_is_a_400(api: TestClient, jobs):
    doc = {"v": 1, "kind": "TrainingJob", "namespace": "default", "selector": None, "after": ["team-a", "j1"]}
    token = base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")
    assert "another namespace" in error(api.get(TJ, params={"continue": token}))["message"]


def test_watch_ignores_limit_and_refuses_continue(api: TestClient, jobs):
    token = api.get(TJ, params={"limit": 2}).json()["metadata"]["continue"]
    bad = error(api.get(TJ, params={"watch": "true", "continue": token}))
    assert "a watch has no pages" in bad["message"]
    with api.stream(
        "GET", TJ, params={"watch": "true", "limit": 1, "resourceVersion": "1", "timeoutSeconds": 0}
    ) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert len([e for e in lines if e["type"] == "ADDED"]) == 5  # all of default, not 1


def test_openapi_declares_the_parameters(api: TestClient):
    doc = api.get("/openapi.json").json()
    for path in (TJ.replace("default", "{namespace}"), f"{ROOT}/trainingjobs", f"{ROOT}/resourceflavors"):
        params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}
        assert params["limit"]["schema"]["anyOf"][0]["minimum"] == 1
        assert "continue" in params


def _count_requests(client, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    sent: list[dict] = []
    real = client._request

    def counted(method: str, path: str, **kwargs):
        sent.append(dict(kwargs.get("params") or {}))
        return real(method, path, **kwargs)

    monkeypatch.setattr(client, "_request", counted)
    return sent


def test_the_sdk_lists_in_chunks(server, monkeypatch: pytest.MonkeyPatch):
    with server.client() as client:
        for ns in ("b", "a"):
            for i in range(3):
                client.create(training_job(f"j{i}", namespace=ns))
        sent = _count_requests(client, monkeypatch)
        whole = client.list("TrainingJob", chunk_size=2)
        keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in whole["items"]]
        assert keys == [(ns, f"j{i}") for ns in "ab" for i in range(3)]
        assert "continue" not in whole["metadata"] and whole["metadata"]["resourceVersion"]
        assert [p.get("limit") for p in sent] == [2, 2, 2] and "continue" in sent[1]
        sent.clear()
        assert client.list("TrainingJob", "a", chunk_size=0)["items"] == whole["items"][:3]
        assert sent == [{}]  # one request, as before paging
        sent.clear()
        assert len(client.list("TrainingJob")["items"]) == 6 and sent == [{"limit": 500}]
        pages = client.list_pages("TrainingJob", selector="!nope", limit=4)
        assert [len(p["items"]) for p in pages] == [4, 2]
        with pytest.raises(ValueError, match="at least 1"):
            client.list_pages("TrainingJob", limit=0)
        with pytest.raises(ValueError, match="chunk_size"):
            client.list("TrainingJob", chunk_size=-1)
