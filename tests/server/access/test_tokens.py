"""Tokens of users and ServiceAccounts: made, shown once, stored as a hash, expiring, revoked;
who am I; may I."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from muster.sdk.client import Client
from muster.sdk.errors import ApiNotFound, BadRequest, Forbidden, Invalid, Unauthorized
from muster.store import Store
from muster.testing import wait_for
from muster.testing.server import RunningServer, serve
from muster.testing.tenancy import sample
from tests.server.access.conftest import ADMIN

Clients = dict[str, Client]


def test_a_user_token_signs_in_as_that_user_and_only_its_hash_is_stored(
    sqlite_store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    with serve(sqlite_store, ADMIN) as server, server.client() as admin:
        made = admin.create_token("alice", ["team-a"], expiration_seconds=3600, description="laptop")
        token = made["status"]["token"]
        assert token.startswith(f"mst_{made['metadata']['name']}_") and len(token) > 40
        assert made["spec"]["user"] == "alice" and made["spec"]["createdBy"] == "admin"
        assert "tokenHash" not in made["spec"]
        with server.client(token) as alice:
            me = alice.whoami()
        assert me["username"] == "alice" and me["groups"] == ["team-a", "system:authenticated"]
        assert me["extra"]["muster.dev/token-id"] == [made["metadata"]["name"]]
        assert [t["metadata"]["name"] for t in admin.tokens()] == [made["metadata"]["name"]]
        assert all("tokenHash" not in t["spec"] for t in admin.tokens())
        audit = admin.audit()
    # The database holds the SHA-256 of the token, never the token; no log line names it.
    raw = sqlite3.connect(tmp_path / "muster.db")
    dump = "\n".join(raw.iterdump())
    raw.close()
    assert token not in dump and "sha256:" in dump
    assert token not in caplog.text
    assert all(token not in str(entry) for entry in audit)


def test_expired_and_revoked_tokens_are_refused_at_once(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    admin = clients["admin"]
    made = admin.create_token("carol", expiration_seconds=60)
    with server.client(made["status"]["token"]) as carol:
        assert carol.whoami()["username"] == "carol"
        admin.revoke_token(made["metadata"]["name"])
        with pytest.raises(Unauthorized, match="invalid token"):
            carol.whoami()
    with pytest.raises(BadRequest, match="expirationSeconds"):
        admin.create_token("carol", expiration_seconds=1)
    with pytest.raises(ApiNotFound):
        admin.revoke_token(made["metadata"]["name"])


def test_a_token_past_its_expiry_is_refused(sqlite_store: Store):
    with serve(sqlite_store, ADMIN) as server, server.client() as admin:
        made = admin.create_token("dave", expiration_seconds=60)
        record = sqlite_store.get("Token", made["metadata"]["name"])
        record["spec"]["expirationTimestamp"] = "2020-01-01T00:00:00Z"  # as if the minute had passed
        sqlite_store.update(record)
        with server.client(made["status"]["token"]) as dave:
            wait_for(lambda: _refused(dave), timeout=10, what="the expired token to be refused")
            with pytest.raises(Unauthorized, match="expired at 2020-01-01"):
                dave.whoami()


def _refused(client: Client) -> bool:
    try:
        client.whoami()
    except Unauthorized:
        return True
    return False


def test_service_account_tokens_live_in_their_namespace_and_die_with_the_account(
    teams: tuple[RunningServer, Clients],
):
    server, clients = teams
    alice, bob, admin = clients["alice"], clients["bob"], clients["admin"]
    alice.create(sample("ServiceAccount", "ci", "team-a"))
    made = alice.create_token(service_account=("team-a", "ci"), expiration_seconds=3600)
    assert made["metadata"]["namespace"] == "team-a"
    with pytest.raises(Forbidden):  # bob may not mint tokens for team-a's account
        bob.create_token(service_account=("team-a", "ci"))
    with pytest.raises(ApiNotFound, match="create it first"):
        alice.create_token(service_account=("team-a", "nobody"))
    with server.client(made["status"]["token"]) as ci:
        assert ci.whoami()["username"] == "system:serviceaccount:team-a:ci"
        assert "system:serviceaccounts:team-a" in ci.whoami()["groups"]
        with pytest.raises(Forbidden):  # no binding names it yet
            ci.list("TrainingJob", "team-a")
        alice_binding = {
            "apiVersion": "muster.dev/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "ci-view", "namespace": "team-a"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci"}],
            "roleRef": {"kind": "ClusterRole", "name": "view"},
        }
        admin.create(alice_binding)
        assert ci.list("TrainingJob", "team-a")["items"] == []
        # alice sees her namespace's tokens, not user tokens; bob sees none of hers.
        assert [t["metadata"]["name"] for t in alice.tokens("team-a")] == [made["metadata"]["name"]]
        assert [t["metadata"]["name"] for t in alice.tokens()] == [made["metadata"]["name"]]
        assert bob.tokens() == []
        alice.delete("ServiceAccount", "ci", "team-a")
        with pytest.raises(Unauthorized, match="no longer exists"):
            ci.whoami()


def test_minting_a_user_token_needs_impersonation(teams: tuple[RunningServer, Clients]):
    _, clients = teams
    with pytest.raises(Forbidden, match='cannot create resource "tokens"'):
        clients["alice"].create_token("alice", ["system:masters"])
    with pytest.raises(Invalid, match=r"token is made with POST .*/serviceaccounts/NAME/token"):
        clients["admin"].create_token("system:serviceaccount:team-a:ci")


def test_can_i_answers_like_kubectl(teams: tuple[RunningServer, Clients]):
    _, clients = teams
    alice, admin = clients["alice"], clients["admin"]
    assert alice.can_i("create", "trainingjobs", "team-a") == (
        True,
        "allowed by RoleBinding team-a/team-a-edit (ClusterRole edit)",
    )
    allowed, reason = alice.can_i("delete", "tj", "team-b", "x")
    assert not allowed and '"verbs": ["delete"]' in reason
    assert alice.can_i("get", "pods", "team-a", subresource="log")[0]
    assert alice.can_i("get", "pods", "team-a", group="")[0]  # the core group's pods are Muster's
    assert alice.can_i("create", "localqueues", "team-a", group="kueue.x-k8s.io")[0]
    assert not alice.can_i("get", path="/metrics")[0]
    assert alice.can_i("get", path="/version")[0]
    assert admin.can_i("delete", "trainingjobs", "team-b", as_user="bob", as_groups=["team-b"])[0]
    assert not admin.can_i("delete", "trainingjobs", "team-a", as_user="bob", as_groups=["team-b"])[0]
    with pytest.raises(Forbidden):  # asking about others needs create subjectaccessreviews
        alice.can_i("get", "pods", "team-b", as_user="bob")
    rules = alice.rules("team-a")
    assert any("trainingjobs" in r["resources"] and "create" in r["verbs"] for r in rules["resourceRules"])
    assert all("trainingjobs" not in r["resources"] for r in alice.rules("team-b")["resourceRules"])


def test_the_bootstrap_admin_is_in_system_masters(teams: tuple[RunningServer, Clients]):
    me = teams[1]["admin"].whoami()
    assert me == {"username": "admin", "groups": ["system:masters", "system:authenticated"]}


def test_a_second_server_on_the_same_database_follows_tokens_and_bindings(tmp_path: Path):
    """Each server keeps the policy from the store's change log: a token made or revoked, a
    binding made, on one server holds on the other within the poll interval."""
    from muster.store import open_store

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    one, two = open_store(url, poll_interval=0.05), open_store(url, poll_interval=0.05)
    try:
        with serve(one, ADMIN) as first, serve(two, ADMIN) as second, first.client() as admin:
            made = admin.create_token("fay", ["team-f"])
            with second.client(made["status"]["token"]) as fay:
                wait_for(lambda: not _refused(fay), timeout=10, what="the second server to accept the token")
                with pytest.raises(Forbidden):
                    fay.list("TrainingJob", "team-f")
                admin.create(
                    sample("RoleBinding", "f-view", "team-f")
                    | {
                        "subjects": [{"kind": "Group", "name": "team-f"}],
                        "roleRef": {"kind": "ClusterRole", "name": "view"},
                    }
                )
                wait_for(
                    lambda: fay.can_i("list", "trainingjobs", "team-f")[0], timeout=10, what="the binding"
                )
                assert fay.list("TrainingJob", "team-f")["items"] == []
                admin.revoke_token(made["metadata"]["name"])
                wait_for(
                    lambda: _refused(fay), timeout=10, what="the second server to refuse the revoked token"
                )
    finally:
        one.close()
        two.close()
