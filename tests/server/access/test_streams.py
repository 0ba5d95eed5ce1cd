"""Watches and the dashboard's change notices never leak another namespace's events, follow the
policy as it changes, and end when the token is revoked; the dashboard's views show each
identity what it may see, and say which buttons will work."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from muster.sdk.client import Client
from muster.sdk.errors import Unauthorized
from muster.testing import wait_for
from muster.testing.server import RunningServer
from muster.testing.tenancy import sample

Clients = dict[str, Client]


class Collector:
    """Events of a watch, read in a thread."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.events: list[dict[str, Any]] = []
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for event in self.stream:
                self.events.append(event)
        except Exception as exc:
            self.error = exc

    def names(self) -> list[str]:
        return [e["object"]["metadata"]["name"] for e in self.events]


def test_a_watch_across_namespaces_never_shows_another_teams_events(teams: tuple[RunningServer, Clients]):
    _, clients = teams
    alice, admin, val = clients["alice"], clients["admin"], clients["val"]
    start = admin.list("TrainingJob")["metadata"]["resourceVersion"]
    mine = Collector(alice.watch("TrainingJob", resource_version=start))
    everyone = Collector(val.watch("TrainingJob", resource_version=start))
    for i in range(3):
        admin.create(sample("TrainingJob", f"w-b{i}", "team-b"))
        admin.create(sample("TrainingJob", f"w-a{i}", "team-a"))
    wait_for(lambda: len(mine.names()) == 3 and len(everyone.names()) == 6, timeout=15, what="the watches")
    assert mine.names() == ["w-a0", "w-a1", "w-a2"]
    assert sorted(everyone.names()) == ["w-a0", "w-a1", "w-a2", "w-b0", "w-b1", "w-b2"]
    # A binding granted mid-watch shows the namespace from then on; revoked, it hides it again.
    admin.create(
        sample("RoleBinding", "alice-sees-b", "team-b")
        | {
            "subjects": [{"kind": "User", "name": "alice"}],
            "roleRef": {"kind": "ClusterRole", "name": "view"},
        }
    )
    admin.create(sample("TrainingJob", "w-b-seen", "team-b"))
    wait_for(lambda: "w-b-seen" in mine.names(), timeout=15, what="the granted namespace's event")
    admin.delete("RoleBinding", "alice-sees-b", "team-b")
    admin.create(sample("TrainingJob", "w-b-hidden", "team-b"))
    admin.create(sample("TrainingJob", "w-a-last", "team-a"))
    wait_for(lambda: "w-a-last" in mine.names(), timeout=15, what="alice's own event")
    assert "w-b-hidden" not in mine.names()
    mine.stream.close()
    everyone.stream.close()


def test_a_revoked_token_ends_its_watch(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    admin = clients["admin"]
    made = admin.create_token("ewan", ["team-a"])
    # From a version read first: the watch's request goes out when its thread first reads it.
    start = admin.list("TrainingJob", "team-a")["metadata"]["resourceVersion"]
    with server.client(made["status"]["token"]) as ewan:
        watch = Collector(ewan.watch("TrainingJob", "team-a", resource_version=start))
        admin.create(sample("TrainingJob", "r-before", "team-a"))
        wait_for(lambda: watch.names() == ["r-before"], timeout=15, what="the first event")
        admin.revoke_token(made["metadata"]["name"])
        admin.create(sample("TrainingJob", "r-after", "team-a"))
        watch.thread.join(timeout=15)
        assert not watch.thread.is_alive() and isinstance(watch.error, Unauthorized)
        assert watch.names() == ["r-before"]


def _browser(server: RunningServer, token: str) -> httpx.Client:
    browser = httpx.Client(base_url=server.url)
    assert browser.post("/login", json={"token": token}).status_code == 204
    return browser


def test_the_dashboard_shows_each_identity_what_it_may_see(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    admin = clients["admin"]
    for ns in ("team-a", "team-b"):
        admin.create(sample("TrainingJob", f"dash-{ns}", ns))
    tokens = {u: c._http.headers["Authorization"].split()[1] for u, c in clients.items() if u != "admin"}
    alice, val = _browser(server, tokens["alice"]), _browser(server, tokens["val"])
    try:
        jobs = {r["name"] for r in alice.get("/ui/api/jobs").json()["jobs"]}
        assert "dash-team-a" in jobs and "dash-team-b" not in jobs
        assert {"dash-team-a", "dash-team-b"} <= {r["name"] for r in val.get("/ui/api/jobs").json()["jobs"]}
        assert alice.get("/ui/api/jobs/team-b/dash-team-b").status_code == 403
        mine = alice.get("/ui/api/jobs/team-a/dash-team-a").json()
        assert mine["can"] == {"update": True, "delete": True}
        assert val.get("/ui/api/jobs/team-a/dash-team-a").json()["can"] == {"update": False, "delete": False}
        overview = alice.get("/ui/api/overview").json()
        assert overview["jobStates"] and sum(overview["jobStates"].values()) == len(jobs)
        queues = alice.get("/ui/api/queues").json()
        assert {q["namespace"] for q in queues["localQueues"]} <= {"team-a"}
        # Buttons: a write signed by the cookie still needs the CSRF header, and RBAC.
        job = val.get("/apis/muster.dev/v1/namespaces/team-a/trainingjobs/dash-team-a").json()
        refused = val.put(
            "/apis/muster.dev/v1/namespaces/team-a/trainingjobs/dash-team-a",
            json=job,
            headers={"X-Muster-CSRF": "1"},
        )
        assert refused.status_code == 403 and refused.json()["error"]["details"]["user"] == "val"
    finally:
        alice.close()
        val.close()


def test_change_notices_are_only_of_what_the_identity_may_see(teams: tuple[RunningServer, Clients]):
    server, clients = teams
    admin = clients["admin"]
    token = clients["alice"]._http.headers["Authorization"].split()[1]
    browser = _browser(server, token)
    notices: list[dict[str, Any]] = []

    def read() -> None:
        with browser.stream("GET", "/ui/api/changes", params={"kinds": "TrainingJob"}, timeout=30) as resp:
            for line in resp.iter_lines():
                if line.strip():
                    notices.append(json.loads(line))
                    if notices[-1].get("name") == "n-a-last":
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_for(lambda: notices and notices[0]["type"] == "SYNC", timeout=15, what="the SYNC line")
    admin.create(sample("TrainingJob", "n-b", "team-b"))
    admin.create(sample("TrainingJob", "n-a-last", "team-a"))
    reader.join(timeout=15)
    browser.close()
    assert [n["name"] for n in notices[1:]] == ["n-a-last"]


def test_gpu_views_hide_who_holds_what_the_caller_may_not_see(teams: tuple[RunningServer, Clients]):
    _, clients = teams
    admin, alice = clients["admin"], clients["alice"]
    node = sample("Node", "gpu-node")
    admin.create(node)
    stored = admin.get("Node", "gpu-node")
    stored["status"] = {"gpus": [{"index": 0, "uuid": "GPU-0", "model": "A100", "memory": "80Gi"}]}
    admin.update_status(stored)
    for ns in ("team-a", "team-b"):
        pod = sample("Pod", f"holder-{ns[-1]}", ns)
        pod["spec"] |= {"nodeName": "gpu-node", "gpus": [0], "gpuMilli": 500}
        admin.create(pod)
    holders = {(h["namespace"], h["pod"]) for g in alice.view("gpus")["gpus"] for h in g["holders"]}
    assert holders == {("team-a", "holder-a"), ("(hidden)", "(hidden)")}
    usage = {h["pod"] for g in alice.view("gpus/usage")["gpus"] for h in g["holders"]}
    assert usage == {"team-a/holder-a", "(hidden)/(hidden)"}
    assert {(h["namespace"], h["pod"]) for g in admin.view("gpus")["gpus"] for h in g["holders"]} == {
        ("team-a", "holder-a"),
        ("team-b", "holder-b"),
    }
    with pytest.raises(Exception, match="forbidden"):
        alice.view("doctor")
