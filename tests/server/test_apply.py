"""POST /apis/muster.dev/v1/apply: all-or-nothing, actions, dry run, foreign kinds."""

from __future__ import annotations

from fastapi.testclient import TestClient

from muster.testing.factories import flavor, local_queue, training_job

APPLY = "/apis/muster.dev/v1/apply"


def apply(api: TestClient, *docs, dry_run: bool = False):
    return api.post(APPLY, json={"documents": list(docs), "dryRun": dry_run})


def names(api: TestClient, path: str) -> list[str]:
    return [o["metadata"]["name"] for o in api.get(path).json()["items"]]


def test_created_configured_unchanged(api: TestClient):
    first = apply(api, flavor("f"), training_job("a"))
    assert first.status_code == 200
    assert first.json() == {
        "results": [
            {"kind": "ResourceFlavor", "namespace": None, "name": "f", "action": "created", "warnings": []},
            {"kind": "TrainingJob", "namespace": "default", "name": "a", "action": "created", "warnings": []},
        ]
    }
    again = apply(api, flavor("f"), training_job("a", workers=2)).json()["results"]
    assert [r["action"] for r in again] == ["unchanged", "configured"]


def test_one_bad_document_stores_none(api: TestClient):
    resp = apply(api, flavor("f"), training_job("bad", workers=0), training_job("c"))
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["reason"] == "Invalid" and "nothing was applied" in err["message"]
    assert err["errors"] == [
        {
            "path": "spec.replicaSpecs.Worker.replicas",
            "rule": "must be >= 1",
            "got": 0,
            "document": 1,
            "kind": "TrainingJob",
            "name": "bad",
        }
    ]
    assert names(api, "/apis/muster.dev/v1/resourceflavors") == []
    assert names(api, "/apis/muster.dev/v1/trainingjobs") == []


def test_every_bad_document_is_reported(api: TestClient):
    resp = apply(
        api, {"kind": "Nope", "apiVersion": "muster.dev/v1", "metadata": {"name": "x"}}, "text", flavor("f")
    )
    docs = sorted({e["document"] for e in resp.json()["error"]["errors"]})
    assert resp.status_code == 422 and docs == [0, 1]


def test_the_same_object_twice_is_an_error(api: TestClient):
    resp = apply(api, flavor("f"), flavor("f"))
    assert resp.status_code == 422
    assert resp.json()["error"]["errors"][0]["rule"] == "repeats document 0 (the same object)"


def test_dry_run_writes_nothing(api: TestClient):
    apply(api, flavor("f"))
    revision = api.get("/readyz").json()["revision"]
    results = apply(api, flavor("f", {"a": "b"}), local_queue("q"), dry_run=True).json()["results"]
    assert [r["action"] for r in results] == ["configured", "created"]
    assert api.get("/readyz").json()["revision"] == revision


def test_foreign_kinds_convert_and_namespaces_are_objects(api: TestClient):
    kueue_flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    results = apply(api, namespace, kueue_flavor).json()["results"]
    assert [(r["kind"], r["action"]) for r in results] == [
        ("Namespace", "created"),
        ("ResourceFlavor", "created"),
    ]
    assert api.get("/apis/muster.dev/v1/resourceflavors/spot").json()["apiVersion"] == "muster.dev/v1"
    team = api.get("/apis/muster.dev/v1/namespaces/team-a").json()
    assert team["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}


def test_bad_request_shape(api: TestClient):
    resp = api.post(APPLY, json={"docs": []})
    assert resp.status_code == 400 and resp.json()["error"]["reason"] == "BadRequest"
