"""End to end: `muster up` as a process in a private MUSTER_HOME, driven by the `muster` CLI.

These tests are about the API server, the store and the CLI, so the server runs with
`--runtime none` (no manager): objects stay exactly as written. Jobs that run are in
test_jobs.py and test_ddp.py.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from muster.api import registry
from muster.sdk.client import Client
from muster.testing import free_port, wait_for
from muster.testing.factories import flavor, training_job
from muster.testing.up import MusterUp, muster_command, run_cli

pytestmark = pytest.mark.slow

API_ONLY = ["--runtime", "none"]


@pytest.fixture
def up(muster_home: Path) -> Iterator[MusterUp]:
    with MusterUp(muster_home, extra_args=API_ONLY) as server:
        yield server


def cli(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, input=input)


def write(tmp_path: Path, name: str, *docs: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def test_apply_get_describe_delete(up: MusterUp, tmp_path: Path):
    home = up.home
    f = write(tmp_path, "job.yaml", training_job("mnist", workers=2, queue="default"))
    applied = cli(home, "apply", "-f", f)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "trainingjob/mnist created"

    table = cli(home, "get", "trainingjobs").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATE", "REPLICAS", "QUEUE", "AGE"]
    assert table[1].split()[:4] == ["mnist", "<none>", "2", "default"]

    # The defaults of a first start are there.
    assert cli(home, "get", "lq", "-o", "name").stdout.split() == ["localqueue/default"]
    assert "LowerPriority" in cli(home, "describe", "clusterqueue", "default").stdout

    described = cli(home, "describe", "tj/mnist").stdout
    assert "Name:             mnist" in described and "replicas: 2" in described

    assert cli(home, "delete", "tj", "mnist").stdout.strip() == "trainingjob/mnist deleted"
    gone = cli(home, "get", "tj", "mnist")
    assert gone.returncode == 1 and "not found" in gone.stderr


def test_json_round_trip(up: MusterUp, tmp_path: Path):
    cli(up.home, "apply", "-f", write(tmp_path, "a.yaml", training_job("a", labels={"team": "x"})))
    out = cli(up.home, "get", "tj", "a", "-o", "json")
    obj = json.loads(out.stdout)
    assert cli(up.home, "apply", "-f", "-", input=json.dumps(obj)).stdout.strip() == "trainingjob/a unchanged"
    obj["metadata"]["labels"]["team"] = "y"
    assert (
        cli(up.home, "apply", "-f", "-", input=json.dumps(obj)).stdout.strip() == "trainingjob/a configured"
    )
    again = json.loads(cli(up.home, "get", "tj", "a", "-o", "json").stdout)
    assert again["metadata"]["labels"] == {"team": "y"}
    assert again["metadata"]["uid"] == obj["metadata"]["uid"]
    assert again["spec"] == obj["spec"]


def test_watch_sees_changes_in_order(up: MusterUp, tmp_path: Path):
    watcher = subprocess.Popen(
        [*muster_command(), "get", "tj", "-w", "-o", "json"],
        env={**_env(up.home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watcher.stdout or []), daemon=True)
    reader.start()
    try:
        # The initial (empty) list is printed before the watch starts.
        wait_for(lambda: any('"items": []' in line for line in lines), timeout=30, what="the initial list")
        f = write(tmp_path, "a.yaml", training_job("a"))
        cli(up.home, "apply", "-f", f)
        cli(up.home, "apply", "-f", write(tmp_path, "a2.yaml", training_job("a", workers=3)))
        cli(up.home, "delete", "tj", "a")

        def events() -> list[tuple[str, str]]:
            found = []
            for line in lines:
                if line.startswith('{"type"'):
                    ev = json.loads(line)
                    found.append((ev["type"], ev["object"]["metadata"]["resourceVersion"]))
            return found

        wait_for(lambda: len(events()) == 3, timeout=30, what="three watch events")
        got = events()
        assert [t for t, _ in got] == ["ADDED", "MODIFIED", "DELETED"]
        assert [int(v) for _, v in got] == sorted(int(v) for _, v in got)
    finally:
        watcher.terminate()
        watcher.wait(timeout=15)


def test_no_token_no_answer(up: MusterUp):
    assert httpx.get(f"{up.url}/healthz").status_code == 200
    for path in ("/readyz", "/metrics", "/openapi.json", "/apis/muster.dev/v1/trainingjobs"):
        resp = httpx.get(f"{up.url}{path}")
        assert resp.status_code == 401, path
        assert resp.json()["error"]["reason"] == "Unauthorized"
    ok = httpx.get(
        f"{up.url}/apis/muster.dev/v1/trainingjobs", headers={"Authorization": f"Bearer {up.token}"}
    )
    assert ok.status_code == 200
    anonymous = run_cli(up.home, "get", "tj", env={"MUSTER_TOKEN": "guess"})
    assert anonymous.returncode == 1 and "invalid token" in anonymous.stderr


def test_apply_is_all_or_nothing(up: MusterUp, tmp_path: Path):
    f = write(tmp_path, "job.yaml", flavor("fast"), training_job("bad", workers=0), training_job("fine"))
    result = cli(up.home, "apply", "-f", f)
    assert result.returncode == 2
    assert f"{f}[1] spec.replicaSpecs.Worker.replicas: must be >= 1, got 0" in result.stderr
    assert cli(up.home, "get", "tj", "-o", "name").stdout.strip() == ""
    assert cli(up.home, "get", "rf", "-o", "name").stdout.split() == ["resourceflavor/default"]


def test_restart_keeps_every_object(muster_home: Path, tmp_path: Path):
    server = MusterUp(muster_home, extra_args=API_ONLY).start()
    try:
        docs = [training_job(f"job-{i}", labels={"i": str(i)}) for i in range(20)] + [flavor("a100")]
        assert cli(muster_home, "apply", "-f", write(tmp_path, "many.yaml", *docs)).returncode == 0
        with Client(server.url, server.token) as client:
            resume_from = client.list("TrainingJob")["metadata"]["resourceVersion"]
            client.delete("TrainingJob", "job-0")
        before = _everything(server)
        token = server.token
        assert server.stop() == 0
        assert not (muster_home / "server.json").exists()  # a clean exit removes it
        server = MusterUp(muster_home, port=server.port, extra_args=API_ONLY).start()
        assert server.token == token  # the credentials of the first start are kept
        after = _everything(server)
        assert after == before
        assert len(after["TrainingJob"]) == 19 and len(after["ResourceFlavor"]) == 2
        # A watch resumes from a revision written before the restart.
        with Client(server.url, server.token) as client:
            replayed = list(client.watch("TrainingJob", resource_version=resume_from, timeout=0.5))
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in replayed] == [("DELETED", "job-0")]
    finally:
        server.stop()


def test_postgresql_store_survives_a_restart(muster_home: Path, tmp_path: Path, postgres_server):
    url = postgres_server.create_database()
    with MusterUp(muster_home, extra_args=["--store", url, *API_ONLY]) as server:
        assert cli(muster_home, "apply", "-f", write(tmp_path, "a.yaml", training_job("pg"))).returncode == 0
        port = server.port
    (muster_home / "muster.db").unlink(missing_ok=True)  # proof the data is not in SQLite
    with MusterUp(muster_home, port=port, extra_args=["--store", url, *API_ONLY]):
        assert cli(muster_home, "get", "tj", "-o", "name").stdout.split() == ["trainingjob/pg"]


def test_no_server_says_how_to_start_one(muster_home: Path):
    result = cli(muster_home, "get", "tj")
    assert result.returncode == 1
    assert "start one with `muster up` (or set MUSTER_SERVER)" in result.stderr


def _everything(server: MusterUp) -> dict[str, list[dict]]:
    with Client(server.url, server.token) as client:
        return {info.kind: client.list(info.kind)["items"] for info in registry.kinds()}


def _env(home: Path) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")}
    env["MUSTER_HOME"] = str(home)
    return env


def test_bad_manager_options_fail_before_anything_starts(muster_home: Path):
    bad = cli(muster_home, "up", "--fake-gpus", "4:A100:80GG")
    assert bad.returncode == 2
    assert "memory '80GG' is not a quantity" in bad.stderr
    policy = cli(muster_home, "up", "--placement", "tightest")
    assert policy.returncode == 2 and "--placement 'tightest' is unknown" in policy.stderr
    assert not (muster_home / "server.json").exists()


def test_a_second_up_on_a_home_in_use_says_so_in_one_line(muster_home: Path):
    with MusterUp(muster_home, extra_args=["--fake-gpus", "1"]) as first:
        second = cli(muster_home, "up", "--fake-gpus", "1", "--port", str(free_port()))
        assert second.returncode == 1
        assert second.stdout == ""
        pid = first.proc.pid if first.proc else None
        assert second.stderr == (
            f"error: {muster_home} is in use by another Muster runtime (pid {pid}); "
            "stop that server or use another MUSTER_HOME\n"
        )
        assert json.loads((muster_home / "server.json").read_text())["url"] == first.url  # untouched
