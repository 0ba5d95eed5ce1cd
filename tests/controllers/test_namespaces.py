"""Namespaces through the manager: a new namespace gets its default LocalQueue (once), and a
ResourceQuota holds back what would exceed it, with `why` naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from muster.controllers.insight.explain import explain
from muster.controllers.insight.explain.gather import gather
from muster.server.views import StoreSource
from muster.store import Store
from muster.testing.cluster import cluster_queue
from tests.controllers.conftest import Harness, job

Obj = dict[str, Any]


def namespace(name: str, **annotations: str) -> Obj:
    meta: Obj = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def in_ns(doc: Obj, ns: str) -> Obj:
    doc["metadata"]["namespace"] = ns
    return doc


def admitted(h: Harness, namespace: str, name: str) -> bool:
    wl = h.get("Workload", name, namespace) or {}
    return bool((wl.get("status") or {}).get("admission"))


def waiting(h: Harness, namespace: str, name: str, reason: str) -> bool:
    wl = h.get("Workload", name, namespace) or {}
    return ((wl.get("status") or {}).get("pending") or {}).get("reason") == reason


def test_a_new_namespace_gets_a_default_local_queue_once_and_its_jobs_run(harness: Harness):
    h = harness
    h.apply(namespace("team-x"), in_ns(job("first", workers=1), "team-x"))
    h.settle(lambda: admitted(h, "team-x", "first"))
    lq = h.get("LocalQueue", "default", "team-x")
    assert lq is not None and lq["spec"]["clusterQueue"] == "default"
    ns = h.get("Namespace", "team-x", None)
    assert ns is not None and ns["status"] == {"phase": "Active", "defaultLocalQueue": "default"}
    assert ("DefaultQueueCreated", "LocalQueue team-x/default created for ClusterQueue default") in h.events(
        ns
    )
    # The team deletes it: it stays deleted.
    h.store.delete("LocalQueue", "default", "team-x")
    h.settle()
    assert h.get("LocalQueue", "default", "team-x") is None


def test_the_annotation_or_the_setting_chooses_the_cluster_queue_or_none(sqlite_store: Store, tmp_path: Path):
    h = Harness(sqlite_store, tmp_path / "home", namespace_default_queue="")
    try:
        h.apply(
            cluster_queue("gpus", {"default": {"nvidia.com/gpu": "4"}}),
            namespace("plain"),
            namespace("gpu-team", **{"muster.dev/default-cluster-queue": "gpus"}),
        )
        h.settle()
        assert h.get("LocalQueue", "default", "plain") is None
        assert h.get("Namespace", "plain", None)["status"]["defaultLocalQueue"] == ""
        assert h.get("LocalQueue", "default", "gpu-team")["spec"]["clusterQueue"] == "gpus"
    finally:
        h.close()


def test_a_resource_quota_holds_back_what_would_exceed_it_and_why_names_it(harness: Harness):
    h = harness
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "team-q"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1", "limits.cpu": "4"}},
    }
    h.apply(namespace("team-q"), quota, in_ns(job("one", workers=1), "team-q"))
    h.settle(lambda: admitted(h, "team-q", "one"))
    h.apply(in_ns(job("two", workers=1), "team-q"))
    h.settle(lambda: waiting(h, "team-q", "two", "ResourceQuotaExceeded"))
    obj = h.get("TrainingJob", "two", "team-q")
    ex = explain(obj, gather(StoreSource(h.store), obj, now=h.clock()))
    assert ex.reason == "ResourceQuotaExceeded"
    assert ex.blocker.startswith(
        "ResourceQuota team-q/gpus: requests.nvidia.com/gpu: 1 used + 1 requested > 1 limited"
    )
    assert any("spec.hard[requests.nvidia.com/gpu] of ResourceQuota team-q/gpus" in u for u in ex.unblock)
    status = h.get("ResourceQuota", "gpus", "team-q")["status"]
    assert status == {
        "hard": {"requests.nvidia.com/gpu": "1", "limits.cpu": "4"},
        "used": {"requests.nvidia.com/gpu": "1"},
    }
    # Another namespace is not held back by it.
    h.apply(in_ns(job("free", workers=2), "default"))
    h.settle(lambda: admitted(h, "default", "free"))
