"""Writes of RBAC objects: Kubernetes manifests apply unchanged, nobody grants what they do not
hold, a roleRef never changes, and a change takes effect at the next request; the audit log."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from muster.sdk.client import Client
from muster.sdk.errors import Forbidden, Invalid, Unauthorized
from muster.store import Store
from muster.testing.server import RunningServer
from muster.testing.tenancy import sample

Clients = dict[str, Client]
K8S_RBAC = "rbac.authorization.k8s.io/v1"


def _role(name: str, namespace: str, rules: list[dict]) -> dict:
    return {
        "apiVersion": K8S_RBAC,
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": rules,
    }


def test_kubernetes_rbac_manifests_apply_unchanged_and_take_effect_at_once(
    teams: tuple[RunningServer, Clients],
):
    _, clients = teams
    admin, bob = clients["admin"], clients["bob"]
    admin.create(sample("TrainingJob", "shared", "team-a"))
    with pytest.raises(Forbidden):
        bob.get("TrainingJob", "shared", "team-a")
    docs = [
        _role(
            "job-reader",
            "team-a",
            [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]}],
        ),
        {
            "apiVersion": K8S_RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "bob-reads", "namespace": "team-a"},
            "subjects": [{"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": "job-reader", "apiGroup": "rbac.authorization.k8s.io"},
        },
        {
            "apiVersion": K8S_RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": "aggregated"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]},
            "rules": [],
        },
    ]
    results = admin.apply(docs)
    assert [r["action"] for r in results] == ["created", "created", "created"]
    ignored = "ignored (kept in metadata.annotations[muster.dev/ignored-fields])"
    assert results[2]["warnings"] == [f"aggregationRule: not supported by Muster; {ignored}"]
    assert bob.get("TrainingJob", "shared", "team-a")["metadata"]["name"] == "shared"  # the very next request
    with pytest.raises(Invalid) as bad:
        admin.apply([_role("bad", "team-a", [{"resources": ["pods"], "verbs": ["get"]}])])
    assert [(e["path"], e["rule"]) for e in bad.value.errors] == [
        ("rules[0].apiGroups", "resource rules must supply at least one api group")
    ]
    admin.delete("RoleBinding", "bob-reads", "team-a")
    with pytest.raises(Forbidden):
        bob.get("TrainingJob", "shared", "team-a")


def test_nobody_grants_what_they_do_not_hold(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    admin = clients["admin"]
    # A team lead: admin of team-a (edit, plus roles and bindings there).
    admin.apply(
        [
            {
                "apiVersion": K8S_RBAC,
                "kind": "RoleBinding",
                "metadata": {"name": "lead", "namespace": "team-a"},
                "subjects": [{"kind": "User", "name": "lead"}],
                "roleRef": {"kind": "ClusterRole", "name": "admin"},
            }
        ]
    )
    with server.client(admin.create_token("lead")["status"]["token"]) as lead:
        # Rules it holds in team-a: fine, in one request with the binding that uses them.
        lead.apply(
            [
                _role(
                    "runner",
                    "team-a",
                    [{"apiGroups": ["muster.dev"], "resources": ["trainingjobs"], "verbs": ["create"]}],
                ),
                {
                    "apiVersion": K8S_RBAC,
                    "kind": "RoleBinding",
                    "metadata": {"name": "runners", "namespace": "team-a"},
                    "subjects": [{"kind": "User", "name": "carol"}],
                    "roleRef": {"kind": "Role", "name": "runner"},
                },
            ]
        )
        with pytest.raises(Forbidden, match=r"may not grant permissions it does not hold.*delete nodes"):
            lead.create(
                sample("Role", "nodes", "team-a")
                | {"rules": [{"apiGroups": ["muster.dev"], "resources": ["nodes"], "verbs": ["delete"]}]}
            )
        with pytest.raises(Forbidden, match="binding ClusterRole cluster-admin"):
            lead.create(
                sample("RoleBinding", "grab", "team-a")
                | {"roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}}
            )
        with pytest.raises(Forbidden, match=r'cannot create resource "rolebindings".*"team-b"'):
            lead.create(sample("RoleBinding", "grab", "team-b"))
        # The verb bind on a role lets one bind it without holding it.
        admin.apply(
            [
                _role(
                    "binder",
                    "team-a",
                    [
                        {
                            "apiGroups": ["rbac.authorization.k8s.io"],
                            "resources": ["clusterroles"],
                            "verbs": ["bind"],
                            "resourceNames": ["queue-admin"],
                        }
                    ],
                ),
                {
                    "apiVersion": K8S_RBAC,
                    "kind": "RoleBinding",
                    "metadata": {"name": "lead-binds", "namespace": "team-a"},
                    "subjects": [{"kind": "User", "name": "lead"}],
                    "roleRef": {"kind": "Role", "name": "binder"},
                },
            ]
        )
        lead.create(
            sample("RoleBinding", "queues", "team-a")
            | {"roleRef": {"kind": "ClusterRole", "name": "queue-admin"}}
        )
        changed = lead.get("RoleBinding", "runners", "team-a")
        changed["roleRef"] = {"apiGroup": "muster.dev", "kind": "ClusterRole", "name": "view"}
        with pytest.raises(Invalid, match="roleRef cannot change"):
            lead.update(changed)
        with pytest.raises(Invalid, match="roleRef cannot change"):
            lead.patch(
                "RoleBinding", "runners", {"roleRef": {"kind": "ClusterRole", "name": "edit"}}, "team-a"
            )


def test_the_audit_log_records_every_write_with_who_what_and_the_result(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    alice, bob, admin, val = clients["alice"], clients["bob"], clients["admin"], clients["val"]
    since = time.time() - 1
    alice.create(sample("TrainingJob", "audited", "team-a"))
    with pytest.raises(Forbidden):
        bob.delete("TrainingJob", "audited", "team-a")
    alice.patch("TrainingJob", "audited", {"metadata": {"labels": {"x": "y"}}}, "team-a")
    alice.apply([sample("LocalQueue", "audited", "team-a")])
    with server.client("not-a-token") as stranger, pytest.raises(Unauthorized):
        stranger.delete("TrainingJob", "audited", "team-a")
    entries = admin.audit(since=_iso(since), name="audited")
    got = [(e["user"], e["verb"], e["resource"], e["namespace"], e["code"]) for e in reversed(entries)]
    assert got == [
        ("alice", "create", "trainingjobs", "team-a", 201),
        ("bob", "delete", "trainingjobs", "team-a", 403),
        ("alice", "patch", "trainingjobs", "team-a", 200),
        ("system:anonymous", "delete", "trainingjobs", "team-a", 401),
    ]
    assert entries[-1]["groups"] == ["team-a", "system:authenticated"] and entries[-1]["tokenId"]
    assert "allowed by RoleBinding team-a/team-a-edit" in entries[-1]["reason"]
    assert "no rule allows it" in entries[-2]["reason"]
    apply = admin.audit(since=_iso(since), user="alice", resource="apply")
    assert apply[0]["objects"] == ["localqueue/team-a/audited"]
    assert [e["code"] for e in admin.audit(since=_iso(since), failed=True, name="audited")] == [401, 403]
    # Reading the log is a permission of its own: cluster-wide for the admin, per namespace
    # for a namespace admin, not at all for an editor or a viewer.
    for user in (alice, val):
        with pytest.raises(Forbidden):
            user.audit()


def _iso(ts: float) -> str:
    from muster.api.conditions import iso

    return iso(ts)


def test_audit_records_older_than_the_retention_are_pruned(sqlite_store: Store):
    from muster.server.access.audit import AuditWriter
    from muster.store.audit import AuditQuery

    now = [1_000_000.0]
    writer = AuditWriter(sqlite_store, retention_days=1, clock=lambda: now[0])
    writer.record({"time": now[0] - 2 * 86400, "user": "old", "verb": "create", "code": 201})
    writer.record({"time": now[0] - 3600, "user": "new", "verb": "create", "code": 201})
    writer.flush()
    assert writer.prune() == 1
    assert [r["user"] for r in sqlite_store.query_audit(AuditQuery())] == ["new"]  # type: ignore[attr-defined]


def test_a_flush_returns_once_the_batch_the_writer_thread_took_is_stored(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
):
    """A read of the log flushes first, so that what was just done shows: it must also wait for
    a batch the writer thread had already taken off the queue (it once returned at once)."""
    from muster.server.access.audit import AuditWriter
    from muster.store.audit import AuditQuery

    writing, release = threading.Event(), threading.Event()
    append = sqlite_store.append_audit  # type: ignore[attr-defined]

    def slow_append(batch: list[dict]) -> None:
        writing.set()
        release.wait(10)
        append(batch)

    monkeypatch.setattr(sqlite_store, "append_audit", slow_append)
    writer = AuditWriter(sqlite_store)
    writer.start()
    try:
        writer.record({"time": time.time(), "user": "alice", "verb": "create", "code": 201})
        assert writing.wait(10)  # the writer thread holds the batch, not yet stored
        flushed = threading.Thread(target=writer.flush)
        flushed.start()
        flushed.join(0.2)
        assert flushed.is_alive()  # waiting for the write in flight
        release.set()
        flushed.join(10)
        assert [r["user"] for r in sqlite_store.query_audit(AuditQuery())] == ["alice"]  # type: ignore[attr-defined]
    finally:
        release.set()
        writer.stop()


def test_the_tenancy_example_applies_as_written_and_does_what_it_says(teams: tuple[RunningServer, Clients]):
    from muster.cli.manifests import load_documents

    server, clients = teams
    admin = clients["admin"]
    example = Path(__file__).resolve().parents[3] / "examples" / "tenancy" / "teams.yaml"
    docs = [d.body for d in load_documents([str(example)])]
    assert all(r["warnings"] == [] for r in admin.apply(docs))
    alice = server.client(admin.create_token("alice", ["team-a"])["status"]["token"])
    carol = server.client(admin.create_token("carol", ["team-b"])["status"]["token"])
    ci = server.client(admin.create_token(service_account=("team-a", "ci"))["status"]["token"])
    try:
        alice.create(sample("RoleBinding", "dan-views", "team-a"))  # the team lead grants view
        ci.create(sample("TrainingJob", "nightly", "team-a"))
        with pytest.raises(Forbidden):
            carol.get("TrainingJob", "nightly", "team-a")
        with pytest.raises(Forbidden):
            ci.create(sample("TrainingJob", "nightly", "team-b"))
        quota = admin.get("ResourceQuota", "gpus", "team-a")
        assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "2", "pods": "8"}
    finally:
        for c in (alice, carol, ci):
            c.close()
