"""POST /apis/muster.dev/v1/apply: all-or-nothing, actions, dry run, foreign kinds."""

from __future__ import annotations

import json

import pytest
import yaml
from fastapi.testclient import TestClient

from muster.server.errors import ApiError
from muster.server.routes.apply import _authorize
from muster.store import Store
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


def apply_sources(api: TestClient, *sources: tuple[str, str], dry_run: bool = False):
    body = {"sources": [{"name": n, "text": t} for n, t in sources], "dryRun": dry_run}
    return api.post(APPLY, json=body)


def test_sources_are_parsed_by_the_server_and_errors_say_where(api: TestClient):
    """What `muster apply -f` sends: the files' texts (YAML, or JSON for *.json), so the CLI
    never loads a YAML parser; every error names the file and document it is in."""
    good = yaml.safe_dump(flavor("f"))
    bad = yaml.safe_dump(training_job("bad", workers=0))
    other = ("b.json", json.dumps([training_job("c")]))
    resp = apply_sources(api, ("a.yaml", f"{good}---\n---\n{bad}"), other)
    assert resp.status_code == 422
    [error] = resp.json()["error"]["errors"]
    # the empty document keeps its index: the bad one is a.yaml's third
    assert error["where"] == "a.yaml[2]" and error["document"] == 1
    assert error["path"] == "spec.replicaSpecs.Worker.replicas"
    assert names(api, "/apis/muster.dev/v1/resourceflavors") == []
    ok = apply_sources(api, ("a.yaml", good), other)
    assert ok.status_code == 200 and [r["name"] for r in ok.json()["results"]] == ["f", "c"]


def test_unreadable_sources_store_nothing_and_each_problem_is_named(api: TestClient):
    good = yaml.safe_dump(flavor("f"))
    resp = apply_sources(
        api,
        ("ok.yaml", good),
        ("dup.yaml", "kind: ResourceFlavor\nkind: ResourceFlavor\n"),
        ("broken.yaml", "metadata: {name: a\n"),
        ("x.json", '{"kind": }'),
    )
    assert resp.status_code == 422
    errors = resp.json()["error"]["errors"]
    assert [(e["where"], e["path"]) for e in errors] == [
        ("dup.yaml[0]", "kind"),
        ("broken.yaml[0]", ""),
        ("x.json[0]", ""),
    ]
    assert "duplicate key (lines 1 and 2)" in errors[0]["rule"]
    assert errors[1]["rule"].startswith("YAML syntax error at line")
    assert errors[2]["rule"].startswith("JSON syntax error at line 1, column 10")
    assert names(api, "/apis/muster.dev/v1/resourceflavors") == []


def test_sources_without_documents_and_requests_with_both_or_neither_are_refused(api: TestClient):
    empty = apply_sources(api, ("empty.yaml", "---\n"))
    assert empty.status_code == 422
    assert empty.json()["error"]["errors"][0]["rule"] == "no documents in empty.yaml"
    both = api.post(APPLY, json={"documents": [flavor("f")], "sources": [{"name": "a", "text": "kind: A"}]})
    neither = api.post(APPLY, json={})
    for resp in (both, neither):
        assert resp.status_code == 400 and "either documents" in resp.text
    assert names(api, "/apis/muster.dev/v1/resourceflavors") == []


class _Rights:
    """An identity allowed exactly ``allowed`` (verb, resource) pairs (any namespace, any name)."""

    def __init__(self, *allowed: tuple[str, str]) -> None:
        self.allowed = set(allowed)

    def can(self, verb: str, resource: str, namespace: str | None = None, name: str = "") -> bool:
        return (verb, resource) in self.allowed

    def check(self, verb: str, resource: str, namespace: str | None = None, name: str = "") -> None:
        if not self.can(verb, resource, namespace, name):
            raise ApiError(403, f"may not {verb} {resource}")


def test_an_apply_reads_an_object_to_authorise_it_only_when_create_and_update_differ(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
):
    sqlite_store.create(training_job("old"))
    reads: list[str] = []
    get = sqlite_store.get
    monkeypatch.setattr(
        sqlite_store, "get", lambda kind, name, ns=None: reads.append(name) or get(kind, name, ns)
    )
    docs = [(0, training_job("old")), (1, training_job("new"))]

    _authorize(_Rights(("create", "trainingjobs"), ("update", "trainingjobs")), sqlite_store, docs)  # type: ignore[arg-type]
    assert reads == []  # allowed whether they exist or not

    create_only = _Rights(("create", "trainingjobs"))
    _authorize(create_only, sqlite_store, [(0, training_job("new"))])  # type: ignore[arg-type]
    with pytest.raises(ApiError, match=r"document 0 \(trainingjob/default/old\): may not update"):
        _authorize(create_only, sqlite_store, docs)  # type: ignore[arg-type]
    update_only = _Rights(("update", "trainingjobs"))
    with pytest.raises(ApiError, match=r"document 1 \(trainingjob/default/new\): may not create"):
        _authorize(update_only, sqlite_store, docs)  # type: ignore[arg-type]
    assert reads == ["new", "old", "old", "new"]
