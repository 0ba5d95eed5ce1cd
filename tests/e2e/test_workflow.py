"""End to end: workflows on `muster up` with real processes: the CLI (apply, get, describe,
retry, logs), a server killed mid-workflow, and the SDK on an embedded control plane.

Tasks are shell one-liners that append to files the test reads; a task that must stay up
until the test has seen something waits for a file the test creates, never for time.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml
from click.testing import Result
from typer.testing import CliRunner

from muster.cli.app import app
from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp
from tests.e2e.workflows import lines, sh, wait_phase, workflow, workflow_cluster

pytestmark = pytest.mark.slow


def cli(*args: str) -> Result:
    """``muster ARGS`` in this process (the server and token found through MUSTER_HOME)."""
    return CliRunner().invoke(app, list(args))


def test_cli_apply_get_describe_retry_and_logs(muster_home: Path, tmp_path: Path):
    log, gate = tmp_path / "ran.txt", tmp_path / "fixed"
    doc = workflow(
        "wf",
        sh(
            "hello",
            f"echo hello >> {log}; echo hello from the task; echo 42 > $MUSTER_OUTPUTS_DIR/n.txt",
            outputs={"parameters": [{"name": "n", "valueFrom": {"path": "n.txt"}}]},
        ),
        sh("flaky", f"echo flaky >> {log}; test -e {gate}", dependencies=["hello"]),
        sh("last", f"echo last {{{{tasks.hello.outputs.parameters.n}}}} >> {log}", dependencies=["flaky"]),
    )
    cyclic = workflow("loop", sh("a", "true", dependencies=["b"]), sh("b", "true", dependencies=["a"]))
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "loop.yaml").write_text(yaml.safe_dump(cyclic))
    with workflow_cluster(muster_home) as (_up, client):
        bad = cli("apply", "-f", str(tmp_path / "loop.yaml"))
        assert bad.exit_code == 2
        assert "spec.tasks: dependency cycle a -> b -> a" in bad.stderr
        assert client.list("Workflow")["items"] == []

        assert cli("apply", "-f", str(tmp_path / "wf.yaml")).exit_code == 0
        wait_phase(client, "wf", ("Failed",))
        listed = cli("get", "workflows")
        # Argo counts progress as the runs that ended well: hello only (flaky failed, last omitted).
        assert listed.stdout.split("\n")[1].split()[:3] == ["wf", "Failed", "1/3"]
        shown = cli("get", "workflow", "wf").stdout
        rows = {line.split()[0]: line.split() for line in shown.splitlines()[3:] if line.strip()}
        assert (
            rows["hello"][1] == "Succeeded" and rows["flaky"][1] == "Failed" and rows["last"][1] == "Omitted"
        )
        assert "CACHE" in shown and "DURATION" in shown

        logs = cli("logs", "workflow/wf", "--task", "hello")
        assert logs.exit_code == 0 and "hello from the task" in logs.stdout
        missing = cli("logs", "workflow/wf", "--task", "last")
        assert missing.exit_code == 1 and "has no pod" in missing.stderr

        gate.touch()
        retried = cli("retry", "workflow/wf")
        assert retried.exit_code == 0, retried.stderr
        assert "flaky, last run again" in retried.stdout
        wait_for(lambda: client.get("Workflow", "wf")["status"].get("retries") == 1, what="the retry")
        wait_phase(client, "wf")
        assert lines(log) == ["hello", "flaky", "flaky", "last 42"]  # hello kept, did not run again
        described = cli("describe", "workflow", "wf").stdout
        assert "Tasks:" in described and "WorkflowRetried" in described
        again = cli("retry", "workflow/wf")
        assert again.exit_code == 1 and "succeeded: there is nothing to retry" in again.stderr


def test_a_server_killed_mid_workflow_continues_it(muster_home: Path, tmp_path: Path):
    log, gate = tmp_path / "ran.txt", tmp_path / "go"
    doc = workflow(
        "long",
        sh("first", f"echo first >> {log}; while [ ! -e {gate} ]; do sleep 0.05; done"),
        sh("second", f"echo second >> {log}", dependencies=["first"]),
    )
    up = MusterUp(muster_home, extra_args=["--fake-gpus", "1"]).start()
    try:
        with Client(up.url, up.token) as client:
            client.apply([doc])
            wait_for(lambda: lines(log) == ["first"], timeout=60, what="the first task to start")
        assert up.proc is not None
        os.kill(up.proc.pid, signal.SIGKILL)  # no clean shutdown: state is only what was stored
        up.proc.wait(timeout=30)
        up.proc = None
        gate.touch()
        up = MusterUp(muster_home, extra_args=["--fake-gpus", "1"]).start()
        with Client(up.url, up.token) as client:
            wf = wait_phase(client, "long")
            assert wf["status"]["nodes"]["first"]["attempts"] == 1
        assert lines(log) == ["first", "second"]  # the first task ran once, re-adopted
    finally:
        up.stop()


FLOWS = Path(__file__).resolve().parents[1] / "sdk" / "flows.py"


def test_sdk_run_starts_an_embedded_control_plane_and_caches(muster_home: Path):
    from tests.sdk import flows

    first = flows.small.run(name="sdk-1", n=3, scale=2.0, progress=False)
    assert first.phase == "Succeeded" and first.value == 9.0  # 3 rows x 2.0 + 3 rows x 1.0
    assert first.output("count") == {"count": 6.0, "pid": True}
    assert sorted(p.name for p in first.output("make-rows").iterdir()) == ["0.json", "1.json", "2.json"]
    assert {n["cacheHit"] for n in first.nodes.values() if "cacheKey" in n} == {False}
    second = flows.small.run(name="sdk-2", n=3, scale=2.0, progress=False)
    assert second.value == 9.0
    phases = {name: n["phase"] for name, n in second.nodes.items()}
    assert phases == {"make-rows": "Cached", "count": "Cached", "count-2": "Cached", "total": "Succeeded"}
    assert not (muster_home / "server.json").exists()  # the embedded server is gone again
