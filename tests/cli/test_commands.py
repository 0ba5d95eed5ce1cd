"""The client commands against a real server in a thread (the e2e tests use `muster up`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from muster.cli.app import app
from muster.sdk.client import discover
from muster.store import Store
from muster.testing import free_port
from muster.testing.factories import training_job

runner = CliRunner()


@pytest.fixture
def store(home_store: Store) -> Store:
    return home_store


def muster(*args: str, input: str | None = None):
    return runner.invoke(app, list(args), input=input)


def manifest(tmp_path: Path, *docs: dict, name: str = "job.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


class TestApply:
    def test_prints_an_action_per_document(self, server, tmp_path: Path):
        f = manifest(tmp_path, training_job("a"), training_job("b"))
        first = muster("apply", "-f", f)
        assert first.exit_code == 0, first.output
        assert first.stdout.splitlines() == ["trainingjob/a created", "trainingjob/b created"]
        g = manifest(tmp_path, training_job("a"), training_job("b", workers=2), name="again.yaml")
        assert muster("apply", "-f", g).stdout.splitlines() == [
            "trainingjob/a unchanged",
            "trainingjob/b configured",
        ]

    def test_bad_document_exits_2_with_file_index_path_and_rule(self, server, store: Store, tmp_path: Path):
        bad = training_job("bad", workers=0)
        bad["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["cpu"] = "x"
        f = manifest(tmp_path, training_job("good"), bad)
        result = muster("apply", "-f", f)
        assert result.exit_code == 2
        assert f"{f}[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0" in result.stderr
        assert (
            f"{f}[1] spec.replicaSpecs.Worker.template.spec.containers[0].cpu: unknown field" in result.stderr
        )
        assert "nothing was applied" in result.stderr
        assert store.list("TrainingJob").items == []

    @pytest.mark.parametrize(
        ("doc", "message"),
        [
            (
                {"apiVersion": "muster.dev/v1", "kind": "Gizmo", "metadata": {"name": "x"}},
                "kind: unknown kind 'Gizmo'",
            ),
            (
                {"apiVersion": "example.com/v9", "kind": "Job", "metadata": {"name": "x"}},
                "apiVersion: example.com/v9",
            ),
            (
                {
                    "apiVersion": "muster.dev/v1",
                    "kind": "Node",
                    "metadata": {"name": "x"},
                    "spec": {"taints": "no"},
                },
                "spec.taints:",
            ),
            (
                {
                    "apiVersion": "muster.dev/v1",
                    "kind": "ClusterQueue",
                    "metadata": {"name": "x"},
                    "spec": {
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}
                                ],
                            }
                        ]
                    },
                },
                "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota:",
            ),
        ],
    )
    def test_unknown_kinds_wrong_types_bad_quantities(self, server, tmp_path: Path, doc: dict, message: str):
        f = manifest(tmp_path, doc)
        result = muster("apply", "-f", f)
        assert result.exit_code == 2
        assert f"{f}[0] {message}" in result.stderr

    def test_a_duplicate_key_applies_nothing(self, server, store: Store, tmp_path: Path):
        good = yaml.safe_dump(training_job("first"), sort_keys=False)
        bad = yaml.safe_dump(training_job("second"), sort_keys=False) + "kind: TrainingJob\n"
        path = tmp_path / "dup.yaml"
        path.write_text(f"{good}---\n{bad}")
        result = muster("apply", "-f", str(path))
        assert result.exit_code == 2 and result.stdout == ""
        assert "[1] kind: duplicate key (lines" in result.stderr
        assert store.list("TrainingJob").items == []

    def test_yaml_syntax_error(self, server, tmp_path: Path):
        f = tmp_path / "broken.yaml"
        f.write_text("kind: TrainingJob\nmetadata: {name: a\n")
        result = muster("apply", "-f", str(f))
        assert result.exit_code == 2 and f"{f}[0]: YAML syntax error at line" in result.stderr

    def test_stdin_and_dry_run(self, server, store: Store):
        result = muster("apply", "-f", "-", "--dry-run", input=json.dumps(training_job("a")))
        assert result.exit_code == 0 and result.stdout.strip() == "trainingjob/a created (dry run)"
        assert store.list("TrainingJob").items == []


class TestGetDescribeDelete:
    def test_tables(self, server, store: Store):
        store.create(training_job("mnist", workers=3, queue="default"))
        store.create(training_job("other", namespace="team"))
        result = muster("get", "tj")
        assert result.exit_code == 0
        header, row = result.stdout.splitlines()
        assert header.split() == ["NAME", "STATE", "REPLICAS", "QUEUE", "AGE"]
        assert row.split()[:4] == ["mnist", "<none>", "3", "default"]
        every = muster("get", "trainingjobs", "-A").stdout.splitlines()
        assert every[0].split()[:2] == ["NAMESPACE", "NAME"] and len(every) == 3
        assert muster("get", "tj", "-n", "team", "-o", "name").stdout.split() == ["trainingjob/other"]
        cqs = muster("get", "clusterqueues", "-o", "wide").stdout.splitlines()
        assert cqs[0].split() == [
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "ADMITTED",
            "AGE",
            "FLAVORS",
            "PREEMPTION",
            "STOP",
        ]

    def test_json_round_trip(self, server, store: Store, tmp_path: Path):
        store.create(training_job("mnist", labels={"team": "a"}))
        out = muster("get", "tj/mnist", "-o", "json")
        obj = json.loads(out.stdout)
        obj["spec"]["replicaSpecs"]["Worker"]["replicas"] = 4
        f = tmp_path / "edited.json"
        f.write_text(json.dumps(obj))
        assert muster("apply", "-f", str(f)).stdout.strip() == "trainingjob/mnist configured"
        listed = json.loads(muster("get", "tj", "-l", "team=a", "-o", "json").stdout)
        assert [o["spec"]["replicaSpecs"]["Worker"]["replicas"] for o in listed["items"]] == [4]
        as_yaml = yaml.safe_load(muster("get", "tj", "mnist", "-o", "yaml").stdout)
        assert as_yaml["metadata"]["name"] == "mnist"

    def test_describe_shows_spec_status_conditions_events(self, server, store: Store):
        from muster.store.events import record_event

        job = store.create(training_job("mnist"))
        job = store.update_status(
            {
                **job,
                "status": {
                    "restartCount": 1,
                    "conditions": [{"type": "Running", "status": "True", "reason": "PodsRunning"}],
                },
            }
        )
        record_event(store, job, "Warning", "BackOff", "restarting the gang")
        out = muster("describe", "tj", "mnist")
        assert out.exit_code == 0
        text = out.stdout
        assert "Name:             mnist" in text and "Namespace:        default" in text
        assert "Spec:\n  replicaSpecs:" in text
        assert "Status:\n  restartCount: 1" in text
        assert "Conditions:" in text and "PodsRunning" in text
        assert "Events:" in text and "BackOff" in text and "restarting the gang" in text

    def test_delete_by_name_and_by_file(self, server, store: Store, tmp_path: Path):
        store.create(training_job("a"))
        store.create(training_job("b"))
        assert muster("delete", "tj", "a").stdout.strip() == "trainingjob/a deleted"
        f = manifest(tmp_path, training_job("b"))
        assert muster("delete", "-f", f).stdout.strip() == "trainingjob/b deleted"
        missing = muster("delete", "tj", "a")
        assert missing.exit_code == 1 and "not found" in missing.stderr and missing.stdout == ""
        assert muster("delete", "tj", "a", "--ignore-not-found").exit_code == 0

    @pytest.mark.parametrize(
        ("args", "code", "message"),
        [
            (["get", "gizmos"], 2, "unknown kind 'gizmos'"),
            (["get", "tj", "-l", "a in"], 2, "invalid label selector"),
            (["get", "tj", "nope"], 1, "TrainingJob default/nope not found"),
            (["get", "tj/a", "b"], 2, "not both"),
            (["get", "tj", "-o", "xml"], 2, ""),
        ],
    )
    def test_errors_and_exit_codes(self, server, args, code, message):
        result = muster(*args)
        assert result.exit_code == code
        assert message in result.stderr


class TestConnecting:
    def test_no_server_says_how_to_start_one(self, muster_home: Path):
        url = f"http://127.0.0.1:{free_port()}"
        result = muster("get", "tj", "--server", url)
        assert result.exit_code == 1
        assert (
            f"no Muster server at {url}; start one with `muster up` (or set MUSTER_SERVER)" in result.stderr
        )

    def test_wrong_token(self, server):
        result = muster("get", "tj", "--token", "wrong")
        assert result.exit_code == 1 and "invalid token" in result.stderr

    def test_discovery_order(self, muster_home: Path, monkeypatch: pytest.MonkeyPatch):
        (muster_home / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:1111"}))
        (muster_home / "credentials").write_text(json.dumps({"user": "admin", "token": "from-file"}))
        assert discover() == ("http://127.0.0.1:1111", "from-file")
        monkeypatch.setenv("MUSTER_SERVER", "http://127.0.0.1:2222")
        monkeypatch.setenv("MUSTER_TOKEN", "from-env")
        assert discover() == ("http://127.0.0.1:2222", "from-env")
        assert discover("http://127.0.0.1:3333/", "from-flag") == ("http://127.0.0.1:3333", "from-flag")
        (muster_home / "server.json").unlink()
        monkeypatch.delenv("MUSTER_SERVER")
        assert discover()[0] == "http://127.0.0.1:7070"

    def test_a_context_comes_after_the_environment_and_before_muster_up(
        self, muster_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ):
        (muster_home / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:1111"}))
        (muster_home / "credentials").write_text(json.dumps({"user": "admin", "token": "from-file"}))
        config = tmp_path / "elsewhere.yaml"  # $MUSTER_CONFIG moves the file out of MUSTER_HOME
        config.write_text(
            yaml.safe_dump(
                {
                    "current-context": "a",
                    "clusters": [{"name": "lab", "cluster": {"server": "http://127.0.0.1:4444"}}],
                    "users": [{"name": "alice", "user": {"token": "alice-token"}}],
                    "contexts": [
                        {"name": "a", "context": {"cluster": "lab", "user": "alice"}},
                        {"name": "b", "context": {"cluster": "lab"}},
                    ],
                }
            )
        )
        monkeypatch.setenv("MUSTER_CONFIG", str(config))
        assert discover() == ("http://127.0.0.1:4444", "alice-token")
        monkeypatch.setenv("MUSTER_CONTEXT", "b")  # no user: the token of `muster up`
        assert discover() == ("http://127.0.0.1:4444", "from-file")
        monkeypatch.setenv("MUSTER_TOKEN", "from-env")
        assert discover() == ("http://127.0.0.1:4444", "from-env")
        monkeypatch.delenv("MUSTER_CONFIG")  # $MUSTER_HOME/config does not exist: no contexts
        monkeypatch.delenv("MUSTER_CONTEXT")
        assert discover() == ("http://127.0.0.1:1111", "from-env")
