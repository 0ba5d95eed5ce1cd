"""`muster get --chunk-size`: lists are fetched in pages, as kubectl's --chunk-size."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from muster.cli.app import app
from muster.sdk.client import Client
from muster.testing.factories import training_job

runner = CliRunner()


@pytest.fixture
def sent(server, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The query of every list request the CLI sends (after five jobs were made)."""
    with server.client() as client:
        for i in range(5):
            client.create(training_job(f"j{i}"))
    out: list[dict] = []
    real = Client._request

    def counted(self: Client, method: str, path: str, **kwargs):
        if method == "GET" and path.endswith("/trainingjobs"):
            out.append(dict(kwargs.get("params") or {}))
        return real(self, method, path, **kwargs)

    monkeypatch.setattr(Client, "_request", counted)
    return out


def test_get_fetches_in_chunks(sent: list[dict]):
    result = runner.invoke(app, ["get", "tj", "--chunk-size", "2", "-o", "name"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == [f"trainingjob/j{i}" for i in range(5)]
    assert [p.get("limit") for p in sent] == [2, 2, 2]


def test_get_chunks_by_500_by_default_and_0_is_one_request(sent: list[dict]):
    table = runner.invoke(app, ["get", "tj"]).stdout.splitlines()
    assert len(table) == 6 and table[0].startswith("NAME")
    assert sent == [{"limit": 500}]
    sent.clear()
    assert (
        runner.invoke(app, ["get", "tj", "--chunk-size", "0", "-o", "name"]).stdout.count("trainingjob/") == 5
    )
    assert sent == [{}]


def test_get_all_and_a_bad_chunk_size(sent: list[dict]):
    result = runner.invoke(app, ["get", "all", "--chunk-size", "3", "-o", "name"])
    assert result.exit_code == 0 and result.stdout.count("trainingjob/") == 5
    assert [p.get("limit") for p in sent] == [3, 3]
    bad = runner.invoke(app, ["get", "tj", "--chunk-size", "-1"])
    assert bad.exit_code == 2 and "--chunk-size" in bad.output
