"""Work applied into a namespace nobody made: created in the same apply (with a warning) when
the applier may create namespaces, refused naming the namespace otherwise; never stored to wait
for a queue forever."""

from __future__ import annotations

import pytest

from muster.sdk.client import Client
from muster.sdk.errors import ApiNotFound, Invalid
from muster.server.errors import ApiError
from muster.server.services.apply import apply_documents
from muster.store import Store
from muster.testing.server import RunningServer
from muster.testing.tenancy import sample

Clients = dict[str, Client]


def _job(namespace: str, name: str = "train") -> dict:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"name": "pytorch", "image": "x", "command": ["true"]}]}
                    },
                }
            }
        },
    }


def test_a_user_who_may_not_create_namespaces_is_refused_naming_it(
    teams: tuple[RunningServer, Clients],
) -> None:
    _, clients = teams
    with pytest.raises(Invalid) as refused:
        clients["alice"].apply([sample("ServiceAccount", "ci", "team-a"), _job("kubeflow-alice")])
    (error,) = refused.value.errors
    assert (error["document"], error["path"]) == (1, "metadata.namespace")
    assert (
        "namespace 'kubeflow-alice' does not exist" in error["rule"]
        and "no create on namespaces" in error["rule"]
    )
    assert "apply a v1 Namespace named kubeflow-alice" in error["hint"]
    admin = clients["admin"]
    with pytest.raises(ApiNotFound):
        admin.get("Namespace", "kubeflow-alice")
    with pytest.raises(ApiNotFound):  # all or nothing: the other document was not stored either
        admin.get("ServiceAccount", "ci", "team-a")


def test_an_admin_apply_creates_the_namespace_with_a_warning(teams: tuple[RunningServer, Clients]) -> None:
    _, clients = teams
    admin = clients["admin"]
    (result,) = admin.apply([_job("kubeflow-admin")])
    assert result["kind"] == "TrainingJob" and result["action"] == "created"
    assert result["warnings"][-1] == (
        "metadata.namespace: namespace 'kubeflow-admin' did not exist: created it, and it gets its default "
        "LocalQueue"
    )
    assert admin.get("Namespace", "kubeflow-admin")["metadata"]["name"] == "kubeflow-admin"
    # a second job there finds the namespace: no warning, nothing more created
    (again,) = admin.apply([_job("kubeflow-admin", "second")])
    assert not any("namespace" in w for w in again["warnings"])


def test_a_namespace_or_queue_in_the_same_apply_is_enough(teams: tuple[RunningServer, Clients]) -> None:
    _, clients = teams
    admin = clients["admin"]
    queue = sample("LocalQueue", "default", "with-queue")
    results = admin.apply([queue, _job("with-queue")])
    assert not any("did not exist" in w for r in results for w in r["warnings"])
    with pytest.raises(ApiNotFound):
        admin.get("Namespace", "with-queue")  # queues in a namespace nobody made work as before


def test_without_a_default_queue_for_new_namespaces_it_is_refused_even_for_an_admin(
    sqlite_store: Store,
) -> None:
    with pytest.raises(ApiError) as refused:
        apply_documents(sqlite_store, [_job("kubeflow")], namespace_queue="")
    (error,) = refused.value.errors
    assert (
        error["path"] == "metadata.namespace" and "MUSTER_NAMESPACE_DEFAULT_QUEUE is empty" in error["rule"]
    )
    assert sqlite_store.list("TrainingJob").items == [] and sqlite_store.list("Namespace").items == []
    (result,) = apply_documents(sqlite_store, [_job("kubeflow")])  # the default: it is created
    assert "did not exist: created it" in result["warnings"][-1]
    assert [n["metadata"]["name"] for n in sqlite_store.list("Namespace").items] == ["kubeflow"]
