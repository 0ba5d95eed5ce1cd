"""?watch=true over real HTTP: NDJSON in revision order, resume, 410, filters, clean-up."""

from __future__ import annotations

import threading

import httpx
import pytest

from muster.sdk.errors import ResourceExpired
from muster.store import Store, open_store
from muster.testing import wait_for
from muster.testing.factories import training_job
from muster.testing.server import RunningServer, serve


def test_events_stream_in_order(server: RunningServer):
    with server.client() as client:
        start = client.list("TrainingJob")["metadata"]["resourceVersion"]
        a = client.create(training_job("a"))
        client.create(training_job("b", namespace="team"))
        client.update_status({**a, "status": {"restartCount": 1}})
        client.delete("TrainingJob", "a")
        events = list(client.watch("TrainingJob", resource_version=start, timeout=0.5))
    got = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    assert got == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "a")]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


def test_live_events_namespace_and_selector(server: RunningServer):
    seen: list[str] = []
    with server.client() as client:
        stream = client.watch("TrainingJob", namespace="team", selector="tier=gold")

        def consume() -> None:
            for event in stream:
                seen.append(event["object"]["metadata"]["name"])

        threading.Thread(target=consume, daemon=True).start()
        # Events after the watch connected only: wait until the server has the stream open.
        wait_for(lambda: _watch_threads() >= 1, timeout=10, what="the watch to connect")
        client.create(training_job("skip-ns", labels={"tier": "gold"}))
        client.create(training_job("skip-label", namespace="team"))
        client.create(training_job("gold", namespace="team", labels={"tier": "gold"}))
        wait_for(lambda: seen, timeout=10, what="the matching event")
        stream.close()
    assert seen == ["gold"]


def test_compacted_version_is_410(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}", retention=5)
    try:
        with serve(store) as running, running.client() as client:
            for i in range(20):
                client.create(training_job(f"j{i}"))
            with pytest.raises(ResourceExpired, match="too old"):
                next(client.watch("TrainingJob", resource_version="1"))
            raw = httpx.get(
                f"{running.url}/apis/muster.dev/v1/trainingjobs",
                params={"watch": "true", "resourceVersion": "1"},
                headers={"Authorization": f"Bearer {running.token}"},
            )
            assert raw.status_code == 410 and raw.json()["error"]["reason"] == "Expired"
    finally:
        store.close()


def test_client_going_away_ends_the_server_side_watch(server: RunningServer, sqlite_store: Store):
    before = _watch_threads()
    with server.client() as client:
        stream = client.watch("TrainingJob")
        threading.Thread(target=lambda: next(stream, None), daemon=True).start()
        wait_for(lambda: _watch_threads() > before, timeout=10, what="the server-side watch to start")
        stream.close()
    # The client closed its connection without any event being sent: the server notices
    # within its disconnect check and stops the pump thread.
    wait_for(lambda: _watch_threads() == before, timeout=15, what="the server-side watch to stop")


def test_bad_resource_version_is_400(server: RunningServer):
    resp = httpx.get(
        f"{server.url}/apis/muster.dev/v1/trainingjobs",
        params={"watch": "true", "resourceVersion": "yesterday"},
        headers={"Authorization": f"Bearer {server.token}"},
    )
    assert resp.status_code == 400 and "decimal revision" in resp.json()["error"]["message"]


def _watch_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "muster-watch")
