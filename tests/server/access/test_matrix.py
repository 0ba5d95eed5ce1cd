"""The RBAC matrix (docs/access-control.md): alice (edit in team-a), bob (edit in team-b) and
val (view) try every verb on every kind in both namespaces and on cluster kinds, through the
REST API, the dashboard's session (cookie and CSRF header) and the CLI: no unauthorised
success, no authorised failure, no list that shows what the user may not see. The counts are
printed (pytest -s)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer.testing
from typer.testing import CliRunner

from muster.cli.app import app
from muster.cli.main import main  # noqa: F401  (registers every command)
from muster.server.auth import CSRF_HEADER
from muster.store import Store
from muster.testing.server import RunningServer, serve
from muster.testing.tenancy import sample, set_up_teams
from tests.server.access.matrix import Cell, Matrix, Outcome

PREFIX = "/apis/muster.dev/v1"
TOUCH = {"metadata": {"labels": {"touched": "yes"}}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, dict[str, str]]]:
    from muster.store import open_store

    store: Store = open_store(f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'm.db'}?synchronous=normal")
    try:
        with serve(store, "admin-token") as running, running.client() as admin:
            yield running, set_up_teams(admin)
    finally:
        store.close()


def _path(cell: Cell) -> str:
    base = (
        f"{PREFIX}/namespaces/{cell.namespace}/{cell.info.plural}"
        if cell.namespace
        else f"{PREFIX}/{cell.info.plural}"
    )
    return (
        f"{base}/{cell.name}"
        if cell.name and cell.verb not in ("list", "watch", "create", "deletecollection")
        else base
    )


def _http(client: httpx.Client, cell: Cell, target: dict[str, Any] | None, headers: dict[str, str]):
    """One cell over HTTP: (succeeded, detail, listed objects)."""
    path = _path(cell)
    listed = None
    if cell.verb == "get":
        r = client.get(path)
    elif cell.verb == "list":
        r = client.get(path)
        if r.status_code == 200:
            listed = [(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in r.json()["items"]]
    elif cell.verb == "watch":
        with client.stream("GET", path, params={"watch": "true", "timeoutSeconds": "0"}) as r:
            if r.status_code == 200:
                lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
            else:
                lines = []
                r.read()
        listed = [(e["object"]["metadata"].get("namespace"), e["object"]["metadata"]["name"]) for e in lines]
    elif cell.verb == "create":
        r = client.post(path, json=sample(cell.info.kind, cell.name, cell.namespace), headers=headers)
    elif cell.verb == "update":
        assert target is not None
        body = {**target, "metadata": {**target["metadata"], "labels": {"updated": "yes"}}}
        r = client.put(path, json=body, headers=headers)
    elif cell.verb == "patch":
        r = client.patch(
            path,
            content=json.dumps(TOUCH),
            headers={**headers, "Content-Type": "application/merge-patch+json"},
        )
    elif cell.verb == "delete":
        r = client.delete(path, headers=headers)
    else:
        r = client.delete(path, params={"labelSelector": cell.selector}, headers=headers)
    ok = r.status_code < 300
    detail = f"HTTP {r.status_code}" + (
        "" if ok else f" {r.json()['error']['reason']}: {r.json()['error']['message']}"
    )
    return ok, detail, listed


def _check(outcome: Outcome, channel: str) -> None:
    print("\n" + outcome.summary(channel))
    for line in (
        outcome.unauthorised_successes + outcome.authorised_failures + outcome.leaks + outcome.wrong_denials
    )[:8]:
        print("  " + line[:300])
    assert outcome.cells > 700
    assert outcome.unauthorised_successes == []
    assert outcome.authorised_failures == []
    assert outcome.leaks == []
    assert outcome.wrong_denials == []


def test_rest(world: tuple[RunningServer, dict[str, str]]):
    server, tokens = world
    clients = {
        u: httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {t}"})
        for u, t in tokens.items()
    }
    try:
        with server.client() as admin:
            matrix = Matrix(admin, tag="r")
            matrix.prepare()
            outcome = matrix.run(lambda cell, target: _http(clients[cell.user], cell, target, {}))
    finally:
        for c in clients.values():
            c.close()
    _check(outcome, "REST")


def test_dashboard_session(world: tuple[RunningServer, dict[str, str]]):
    """The dashboard's requests: signed in by the session cookie, writes with the CSRF header."""
    server, tokens = world
    clients = {}
    for user, token in tokens.items():
        browser = httpx.Client(base_url=server.url)
        assert browser.post("/login", json={"token": token}).status_code == 204
        clients[user] = browser
    try:
        with server.client() as admin:
            matrix = Matrix(admin, tag="d")
            matrix.prepare()
            outcome = matrix.run(
                lambda cell, target: _http(clients[cell.user], cell, target, {CSRF_HEADER: "1"})
            )
    finally:
        for c in clients.values():
            c.close()
    _check(outcome, "dashboard")


def test_cli(world: tuple[RunningServer, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    server, tokens = world
    monkeypatch.setenv("MUSTER_HOME", str(tmp_path))
    monkeypatch.setenv("MUSTER_SERVER", server.url)
    # Build the command tree once, not per invocation as CliRunner does (half a second each).
    monkeypatch.setattr(typer.testing, "_get_command", functools.cache(typer.testing._get_command))
    runner = CliRunner()

    def perform(cell: Cell, target: dict[str, Any] | None):
        ns = ["-n", cell.namespace] if cell.namespace else []
        kind = cell.info.plural
        listed = None
        if cell.verb == "get":
            args = ["get", kind, cell.name, *ns, "-o", "name"]
        elif cell.verb == "list":
            args = ["get", kind, *ns, "-o", "json"]
        elif cell.verb == "watch":
            args = ["get", kind, *ns, "-w", "--request-timeout", "0", "-o", "name"]
        elif cell.verb in ("create", "update"):
            doc = sample(cell.info.kind, cell.name, cell.namespace)
            if target is not None:
                doc = {**target, "metadata": {**target["metadata"], "labels": {"updated": "yes"}}}
            file = tmp_path / f"{cell.user}-{cell.verb}-{kind}-{cell.namespace}.json"
            file.write_text(json.dumps(doc))
            args = ["apply", "-f", str(file)]
        elif cell.verb == "patch":
            args = ["patch", kind, cell.name, *ns, "-p", json.dumps(TOUCH)]
        elif cell.verb == "delete":
            args = ["delete", kind, cell.name, *ns]
        else:
            args = ["delete", kind, "--all", "-l", cell.selector.split("=", 1)[1] and cell.selector, *ns]
        result = runner.invoke(app, args, env={"MUSTER_TOKEN": tokens[cell.user]})
        ok = result.exit_code == 0
        if ok and cell.verb == "list":
            listed = [
                (o["metadata"].get("namespace"), o["metadata"]["name"])
                for o in json.loads(result.stdout)["items"]
            ]
        return ok, f"exit {result.exit_code}: {result.output.strip()}", listed

    with server.client() as admin:
        matrix = Matrix(admin, tag="c")
        matrix.prepare()
        outcome = matrix.run(perform)
    _check(outcome, "CLI")
