"""Namespaces as objects over REST: Kubernetes manifests, labels, and deleting one deletes what
lives in it (owned pods and Workloads are left to the garbage collector, which stops them)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from muster.testing.tenancy import sample

API = "/apis/muster.dev/v1"


def test_deleting_a_namespace_deletes_what_lives_in_it(api: TestClient):
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone", "labels": {"team": "x"}}},
        sample("TrainingJob", "j", "gone"),
        sample("ServiceAccount", "ci", "gone"),
        sample("RoleBinding", "rb", "gone"),
        sample("TrainingJob", "kept", "other"),
    ]
    owned = sample("Pod", "j-worker-0", "gone")
    owned["metadata"]["ownerReferences"] = [{"kind": "TrainingJob", "name": "j"}]
    assert api.post(f"{API}/apply", json={"documents": [*docs, owned]}).status_code == 200
    ns = api.get(f"{API}/namespaces/gone").json()
    assert ns["metadata"]["labels"] == {"team": "x", "kubernetes.io/metadata.name": "gone"}
    api.post(f"{API}/namespaces/gone/serviceaccounts/ci/token", json={})
    assert api.delete(f"{API}/namespaces/gone").status_code == 200
    assert api.get(f"{API}/namespaces/gone").status_code == 404
    for plural in ("trainingjobs", "serviceaccounts", "rolebindings", "tokens"):
        assert api.get(f"{API}/namespaces/gone/{plural}").json()["items"] == [], plural
    assert [p["metadata"]["name"] for p in api.get(f"{API}/namespaces/gone/pods").json()["items"]] == [
        "j-worker-0"
    ]
    assert api.get(f"{API}/namespaces/other/trainingjobs/kept").status_code == 200
    assert api.delete(f"{API}/namespaces/gone").status_code == 404


def test_patch_and_delete_collection(api: TestClient):
    for name, tier in (("a", "gold"), ("b", "gold"), ("c", "bronze")):
        doc = sample("TrainingJob", name, "default", labels={"tier": tier})
        assert api.post(f"{API}/namespaces/default/trainingjobs", json=doc).status_code == 201
    patched = api.patch(
        f"{API}/namespaces/default/trainingjobs/a",
        content='{"metadata": {"labels": {"tier": null, "x": "y"}}, '
        '"spec": {"runPolicy": {"suspend": false}}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200
    assert patched.json()["metadata"]["labels"] == {"x": "y"}
    assert patched.json()["spec"]["runPolicy"]["suspend"] is False
    bad = api.patch(
        f"{API}/namespaces/default/trainingjobs/a",
        json=[{"op": "remove", "path": "/spec"}],
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert bad.status_code == 415
    invalid = api.patch(
        f"{API}/namespaces/default/trainingjobs/a",
        content='{"spec": {"replicaSpecs": null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert invalid.status_code == 422
    deleted = api.delete(f"{API}/namespaces/default/trainingjobs", params={"labelSelector": "tier=gold"})
    assert [o["metadata"]["name"] for o in deleted.json()["items"]] == ["b"]
    left = [o["metadata"]["name"] for o in api.get(f"{API}/namespaces/default/trainingjobs").json()["items"]]
    assert left == ["a", "c"]
