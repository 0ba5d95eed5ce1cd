"""The change-notice stream that keeps dashboard pages live."""

from __future__ import annotations

import json
import threading

import httpx

from muster.testing import wait_for
from muster.testing.cluster import gpu_node
from muster.testing.factories import training_job
from muster.testing.server import RunningServer
from tests.server.conftest import TOKEN


def read_lines(server: RunningServer, params: dict[str, str]) -> tuple[list[dict], threading.Event]:
    """Follow the stream in a thread; the returned list fills as lines arrive."""
    lines: list[dict] = []
    done = threading.Event()

    def run() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        url = f"{server.url}/ui/api/changes"
        try:
            with httpx.stream("GET", url, params=params, headers=headers, timeout=30) as resp:
                for line in resp.iter_lines():
                    lines.append(json.loads(line))
                    if done.is_set():
                        return
        except httpx.HTTPError:
            if not done.is_set():  # the server ending the stream at teardown is expected
                raise

    threading.Thread(target=run, daemon=True).start()
    return lines, done


def test_sync_first_then_one_small_notice_per_change_of_a_wanted_kind(server: RunningServer):
    lines, done = read_lines(server, {"kinds": "TrainingJob,nodes"})
    try:
        wait_for(lambda: lines, timeout=10, what="the SYNC line")
        assert lines[0]["type"] == "SYNC"
        since = int(lines[0]["resourceVersion"])
        with server.client() as client:
            client.create(training_job("a"))
            client.create(training_job("b"))
            client.create(gpu_node("n1"))
            client.delete("TrainingJob", "a", "default")
        wait_for(lambda: len(lines) >= 5, timeout=10, what="four notices")
        notices = lines[1:]
        assert [(n["type"], n["kind"], n["name"]) for n in notices] == [
            ("ADDED", "TrainingJob", "a"),
            ("ADDED", "TrainingJob", "b"),
            ("ADDED", "Node", "n1"),
            ("DELETED", "TrainingJob", "a"),
        ]
        assert all(int(n["resourceVersion"]) > since for n in notices)
        assert set(notices[0]) == {"type", "kind", "namespace", "name", "resourceVersion"}  # no object
    finally:
        done.set()


def test_an_unknown_kind_is_a_400(server: RunningServer):
    resp = httpx.get(f"{server.url}/ui/api/changes?kinds=Gizmo", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 400 and "Gizmo" in resp.json()["error"]["message"]
