"""The access commands: tokens, whoami, auth can-i, config contexts (kubeconfig-like, 0600), the
audit log, and the context's namespace as every command's default."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from muster.cli.app import app
from muster.testing.server import RunningServer
from muster.testing.tenancy import sample

runner = CliRunner()


def muster(*args: str, **env: str):
    return runner.invoke(app, list(args), env=env or None)


def new_token(*args: str) -> str:
    result = muster("token", "create", *args)
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("mst_") and "\n" not in token  # the token alone on stdout
    assert "it is shown only now" in result.stderr
    return token


def test_tokens_whoami_and_can_i(server: RunningServer, muster_home: Path):
    token = new_token("--user", "alice", "--group", "team-a", "--expires", "2h", "--description", "laptop")
    who = muster("whoami", "-o", "json", MUSTER_TOKEN=token)
    assert json.loads(who.stdout)["username"] == "alice"
    table = muster("whoami", MUSTER_TOKEN=token).stdout
    assert "Username    alice" in table and "Groups      [team-a system:authenticated]" in table
    listed = muster("token", "list").stdout
    assert "alice" in listed and "team-a" in listed and "laptop" in listed and token not in listed
    # Nothing granted yet: can-i says no (exit 1) with the missing rule on stderr.
    no = muster("auth", "can-i", "create", "tj", "-n", "team-a", MUSTER_TOKEN=token)
    assert no.exit_code == 1 and no.stdout.strip() == "no" and '"verbs": ["create"]' in no.stderr
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "a-edit", "namespace": "team-a"},
        "subjects": [{"kind": "Group", "name": "team-a"}],
        "roleRef": {"kind": "ClusterRole", "name": "edit"},
    }
    path = muster_home / "rb.yaml"
    path.write_text(yaml.safe_dump(binding))
    assert muster("apply", "-f", str(path)).exit_code == 0
    yes = muster("auth", "can-i", "create", "trainingjobs", "-n", "team-a", MUSTER_TOKEN=token)
    assert (yes.exit_code, yes.stdout.strip()) == (0, "yes")
    assert (
        muster(
            "auth", "can-i", "get", "pods", "--subresource", "log", "-n", "team-a", MUSTER_TOKEN=token
        ).exit_code
        == 0
    )
    assert muster("auth", "can-i", "delete", "tj/x", "-n", "team-b", "-q", MUSTER_TOKEN=token).exit_code == 1
    assert muster("auth", "can-i", "get", "/metrics", MUSTER_TOKEN=token).exit_code == 1
    assert muster("auth", "can-i", "get", "/version", MUSTER_TOKEN=token).exit_code == 0
    assert (
        muster(
            "auth", "can-i", "create", "tj", "-n", "team-a", "--as", "alice", "--as-group", "team-a"
        ).exit_code
        == 0
    )
    rules = muster("auth", "can-i", "--list", "-n", "team-a", MUSTER_TOKEN=token).stdout
    line = next(line for line in rules.splitlines() if "trainingjobs" in line)
    assert "[create delete deletecollection get list patch update watch]" in line
    denied = muster("delete", "tj", "x", "-n", "team-b", MUSTER_TOKEN=token)
    assert denied.exit_code == 1 and 'User "alice" cannot delete resource "trainingjobs"' in denied.stderr
    token_id = token.split("_")[1]
    assert muster("token", "revoke", token_id).stdout.strip() == f"token {token_id} revoked"
    gone = muster("whoami", MUSTER_TOKEN=token)
    assert gone.exit_code == 1 and "invalid token" in gone.stderr


def test_token_create_rejects_bad_input(server: RunningServer):
    assert muster("token", "create").exit_code == 2
    assert muster("token", "create", "--user", "a", "--serviceaccount", "ns/sa").exit_code == 2
    bad = muster("token", "create", "--user", "a", "--expires", "soon")
    assert bad.exit_code == 2 and "--expires 'soon'" in bad.stderr
    missing = muster("token", "create", "--serviceaccount", "team-a/ci")
    assert missing.exit_code == 1 and "create it first" in missing.stderr


def test_token_show_prints_the_bootstrap_token(muster_home: Path):
    (muster_home / "credentials").write_text(json.dumps({"user": "admin", "token": "boot-token"}))
    assert muster("token", "show").stdout.strip() == "boot-token"


def test_contexts_like_kubeconfig(server: RunningServer, muster_home: Path, monkeypatch: pytest.MonkeyPatch):
    admin_token = server.token
    monkeypatch.delenv("MUSTER_SERVER")
    monkeypatch.delenv("MUSTER_TOKEN")
    with server.client() as admin:
        admin.create(sample("Namespace", "team-a"))
        admin.create(sample("TrainingJob", "in-a", "team-a"))
    assert muster("config", "set-cluster", "lab", "--server", server.url).exit_code == 0
    assert muster("config", "set-credentials", "root", "--token", admin_token).exit_code == 0
    assert (
        muster(
            "config", "set-context", "team-a", "--cluster", "lab", "--user", "root", "-n", "team-a"
        ).exit_code
        == 0
    )
    config = muster_home / "config"
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    assert muster("config", "current-context").exit_code == 1
    assert muster("config", "use-context", "team-a").stdout.strip() == 'Switched to context "team-a".'
    assert muster("config", "current-context").stdout.strip() == "team-a"
    # The context's server, token and namespace: `get tj` lists team-a's jobs.
    listed = muster("get", "tj", "-o", "name")
    assert listed.exit_code == 0 and listed.stdout.strip() == "trainingjob/in-a"
    assert muster("get", "tj", "-n", "default", "-o", "name").stdout.strip() == ""  # -n still wins
    view = muster("config", "view").stdout
    assert "REDACTED" in view and admin_token not in view
    assert admin_token in muster("config", "view", "--raw").stdout
    contexts = muster("config", "get-contexts").stdout
    assert "*" in contexts and "team-a" in contexts and "lab" in contexts
    bad = muster("get", "tj", MUSTER_CONTEXT="nope")
    assert bad.exit_code == 2 and "context 'nope' is not in the config" in bad.stderr
    assert muster("config", "set-context", "x", "--cluster", "nowhere").exit_code == 1
    assert muster("config", "delete-context", "team-a").exit_code == 0
    assert muster("config", "current-context").exit_code == 1


def test_audit_and_get_events_audit(server: RunningServer, muster_home: Path):
    with server.client() as admin:
        admin.create(sample("TrainingJob", "logged", "default"))
    out = muster("audit", "--resource", "tj").stdout
    assert "admin" in out and "create" in out and "trainingjobs" in out and "logged" in out and "201" in out
    records = json.loads(muster("get", "events", "--audit", "-A", "-o", "json").stdout)["items"]
    assert any(r["name"] == "logged" and r["user"] == "admin" for r in records)
    assert muster("get", "pods", "--audit").exit_code == 2


def test_patch_and_delete_all(server: RunningServer):
    with server.client() as admin:
        for name in ("p1", "p2"):
            admin.create(sample("TrainingJob", name, "default", labels={"batch": "x"}))
    patched = muster("patch", "tj", "p1", "-p", '{"metadata": {"labels": {"batch": null}}}')
    assert patched.exit_code == 0 and patched.stdout.strip() == "trainingjob/p1 patched"
    assert muster("patch", "tj", "p1", "-p", "not json").exit_code == 2
    gone = muster("delete", "tj", "--all", "-l", "batch=x")
    assert gone.stdout.strip() == "trainingjob/p2 deleted"
    assert muster("delete", "tj", "--all").stdout.strip() == "trainingjob/p1 deleted"
