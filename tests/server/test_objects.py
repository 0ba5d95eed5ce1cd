"""CRUD of namespaced and cluster kinds, the status subresource, and request checks."""

from __future__ import annotations

from fastapi.testclient import TestClient

from muster.testing.factories import flavor, local_queue, training_job

TJ = "/apis/muster.dev/v1/namespaces/default/trainingjobs"
RF = "/apis/muster.dev/v1/resourceflavors"


def error(resp) -> dict:
    body = resp.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] == resp.status_code
    return body["error"]


class TestCrud:
    def test_namespaced_lifecycle(self, api: TestClient):
        created = api.post(TJ, json=training_job("mnist"))
        assert created.status_code == 201
        obj = created.json()
        assert obj["metadata"]["namespace"] == "default" and obj["metadata"]["generation"] == 1
        assert api.get(f"{TJ}/mnist").json() == obj

        obj["spec"]["replicaSpecs"]["Worker"]["replicas"] = 3
        replaced = api.put(f"{TJ}/mnist", json=obj).json()
        assert replaced["metadata"]["generation"] == 2

        listed = api.get(TJ).json()
        assert listed["kind"] == "TrainingJobList" and [o["metadata"]["name"] for o in listed["items"]] == [
            "mnist"
        ]
        assert listed["metadata"]["resourceVersion"] == replaced["metadata"]["resourceVersion"]

        deleted = api.delete(f"{TJ}/mnist")
        assert deleted.status_code == 200 and deleted.json()["metadata"]["name"] == "mnist"
        assert error(api.get(f"{TJ}/mnist"))["reason"] == "NotFound"

    def test_cluster_kind_and_all_namespaces(self, api: TestClient):
        assert api.post(RF, json=flavor("a100", {"gpu": "a100"})).status_code == 201
        assert api.get(f"{RF}/a100").json()["spec"] == {"nodeLabels": {"gpu": "a100"}}
        for ns in ("team-b", "team-a"):
            api.post(f"/apis/muster.dev/v1/namespaces/{ns}/localqueues", json=local_queue("q", namespace=ns))
        every = api.get("/apis/muster.dev/v1/localqueues").json()["items"]
        assert [o["metadata"]["namespace"] for o in every] == ["team-a", "team-b"]

    def test_create_twice_conflicts(self, api: TestClient):
        api.post(TJ, json=training_job("a"))
        assert error(api.post(TJ, json=training_job("a")))["reason"] == "AlreadyExists"

    def test_label_selector(self, api: TestClient):
        api.post(TJ, json=training_job("a", labels={"team": "x"}))
        api.post(TJ, json=training_job("b", labels={"team": "y"}))
        names = [
            o["metadata"]["name"] for o in api.get(TJ, params={"labelSelector": "team=y"}).json()["items"]
        ]
        assert names == ["b"]
        bad = api.get(TJ, params={"labelSelector": "team in x"})
        assert bad.status_code == 400 and "expected '('" in error(bad)["message"]

    def test_stale_resource_version_conflicts(self, api: TestClient):
        first = api.post(TJ, json=training_job("a")).json()
        newer = dict(first, metadata=dict(first["metadata"], labels={"v": "2"}))
        assert api.put(f"{TJ}/a", json=newer).status_code == 200
        stale = api.put(f"{TJ}/a", json=first)
        assert stale.status_code == 409 and error(stale)["reason"] == "Conflict"
        gone = api.delete(f"{TJ}/a", params={"resourceVersion": first["metadata"]["resourceVersion"]})
        assert gone.status_code == 409


class TestStatus:
    def test_status_is_server_owned(self, api: TestClient):
        doc = training_job("a")
        doc["status"] = {"restartCount": 7}
        created = api.post(TJ, json=doc).json()
        assert "status" not in created

        written = api.put(f"{TJ}/a/status", json={**created, "status": {"restartCount": 2}, "spec": {}})
        assert written.status_code == 200
        assert written.json()["status"]["restartCount"] == 2
        assert written.json()["spec"] == created["spec"]  # the spec in a status write is ignored

        again = written.json()
        again["status"] = {"restartCount": 99}
        again["metadata"]["labels"] = {"x": "y"}
        replaced = api.put(f"{TJ}/a", json=again).json()
        assert replaced["status"]["restartCount"] == 2  # status in a main-resource write is ignored
        assert replaced["metadata"]["labels"] == {"x": "y"}
        assert api.get(f"{TJ}/a/status").json()["status"]["restartCount"] == 2

    def test_status_is_validated_and_checks_the_version(self, api: TestClient):
        created = api.post(TJ, json=training_job("a")).json()
        bad = api.put(f"{TJ}/a/status", json={**created, "status": {"restartCount": -1}})
        assert bad.status_code == 422 and error(bad)["errors"][0]["path"] == "status.restartCount"
        api.put(f"{TJ}/a/status", json={**created, "status": {"restartCount": 1}})
        stale = api.put(f"{TJ}/a/status", json={**created, "status": {"restartCount": 2}})
        assert stale.status_code == 409

    def test_kinds_without_status_have_no_status_route(self, api: TestClient):
        api.post(RF, json=flavor("f"))
        assert api.put(f"{RF}/f/status", json={"status": {}}).status_code in (404, 405)


class TestBadRequests:
    def test_invalid_object_names_every_field(self, api: TestClient):
        doc = training_job("a", workers=0)
        doc["spec"]["bogus"] = 1
        resp = api.post(TJ, json=doc)
        assert resp.status_code == 422
        paths = {e["path"]: e["rule"] for e in error(resp)["errors"]}
        assert paths["spec.replicaSpecs.Worker.replicas"] == "must be >= 1"
        assert paths["spec.bogus"] == "unknown field"

    def test_body_must_match_the_url(self, api: TestClient):
        other_ns = training_job("a", namespace="elsewhere")
        assert "does not match the URL's namespace" in error(api.post(TJ, json=other_ns))["message"]
        api.post(TJ, json=training_job("a"))
        assert (
            "does not match the name in the URL"
            in error(api.put(f"{TJ}/a", json=training_job("b")))["message"]
        )
        wrong_kind = api.post(TJ, json=local_queue("a"))
        assert (
            wrong_kind.status_code == 400 and "POST /apis/muster.dev/v1/apply" in error(wrong_kind)["message"]
        )

    def test_body_fills_kind_and_namespace_from_the_url(self, api: TestClient):
        doc = training_job("a")
        del doc["apiVersion"], doc["kind"]
        assert api.post(TJ, json=doc).json()["kind"] == "TrainingJob"

    def test_not_json(self, api: TestClient):
        resp = api.post(TJ, content=b"{nope", headers={"Content-Type": "application/json"})
        assert resp.status_code == 400 and error(resp)["reason"] == "BadRequest"
        assert error(api.post(TJ, json=[1, 2]))["message"].startswith(
            "the request body must be a JSON object"
        )

    def test_unknown_path(self, api: TestClient):
        assert error(api.get("/apis/muster.dev/v1/nothings"))["reason"] == "NotFound"


class _ProtocolOnly:
    """The store seen through the Store protocol alone (no optional capabilities)."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name: str):
        if name in ("list_json", "list_page"):
            raise AttributeError(name)
        return getattr(self._store, name)


def test_list_is_the_same_without_the_json_listing_capability(sqlite_store, api: TestClient):
    from muster.server import create_app
    from tests.server.conftest import AUTH, TOKEN

    api.post(TJ, json=training_job("a", labels={"x": "1"}))
    api.post(TJ, json=training_job("b"))
    fast = api.get(TJ, params={"labelSelector": "x"}).json()
    with TestClient(create_app(_ProtocolOnly(sqlite_store), [TOKEN]), headers=AUTH) as plain:
        assert plain.get(TJ, params={"labelSelector": "x"}).json() == fast
    assert [o["metadata"]["name"] for o in fast["items"]] == ["a"]


def test_pages_are_the_same_without_the_paged_listing_capability(sqlite_store, api: TestClient):
    from muster.server import create_app
    from tests.server.conftest import AUTH, TOKEN

    for name in ("c", "a", "d", "b"):
        api.post(TJ, json=training_job(name, labels={"x": "1"}))
    api.post(TJ, json=training_job("e"))
    with TestClient(create_app(_ProtocolOnly(sqlite_store), [TOKEN]), headers=AUTH) as plain:
        for client in (api, plain):
            first = client.get(TJ, params={"labelSelector": "x", "limit": 3}).json()
            token = first["metadata"]["continue"]
            rest = client.get(TJ, params={"labelSelector": "x", "limit": 3, "continue": token}).json()
            assert "continue" not in rest["metadata"]
            assert [o["metadata"]["name"] for o in first["items"] + rest["items"]] == ["a", "b", "c", "d"]
