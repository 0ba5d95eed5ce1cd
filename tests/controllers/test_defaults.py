"""The defaults of a first start, and the default ClusterQueue following the Nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.api import registry
from muster.controllers.scheduling.defaults import (
    MANAGED_ANNOTATION,
    create_defaults,
    sync_default_cluster_queue,
)
from muster.store import Store, open_store


@pytest.fixture
def sqlite_store(tmp_path: Path):
    s = open_store(f"sqlite:///{tmp_path / 'muster.db'}")
    yield s
    s.close()


def node(name: str, cpu: str, memory: str, gpus: str) -> dict:
    doc = {
        "apiVersion": "muster.dev/v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": gpus}},
    }
    obj = registry.validate(doc, keep_status=True).obj
    assert obj is not None
    return obj


def quotas(cq: dict) -> dict[str, str]:
    [group] = cq["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}


def test_first_start_creates_flavor_queue_and_local_queue(sqlite_store: Store):
    created = create_defaults(sqlite_store)
    assert [(r.object["kind"], r.action) for r in created] == [
        ("ResourceFlavor", "created"),
        ("ClusterQueue", "created"),
        ("LocalQueue", "created"),
    ]
    cq = sqlite_store.get("ClusterQueue", "default")
    assert quotas(cq) == {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0"}
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "default"
    assert sqlite_store.get("LocalQueue", "default", "default")["spec"]["clusterQueue"] == "default"


def test_later_starts_leave_a_queue_set_up_alone(sqlite_store: Store):
    create_defaults(sqlite_store)
    sqlite_store.delete("LocalQueue", "default", "default")
    assert create_defaults(sqlite_store) == []
    assert sqlite_store.list("LocalQueue").items == []


def test_quota_follows_nodes_while_managed(sqlite_store: Store):
    sqlite_store.create(node("a", cpu="8", memory="32Gi", gpus="4"))
    create_defaults(sqlite_store)
    assert quotas(sqlite_store.get("ClusterQueue", "default")) == {
        "cpu": "8",
        "memory": "32Gi",
        "nvidia.com/gpu": "4",
    }
    sqlite_store.create(node("b", cpu="4", memory="32Gi", gpus="2"))
    synced = sync_default_cluster_queue(sqlite_store, sqlite_store.list("Node").items)
    assert synced is not None and quotas(synced) == {"cpu": "12", "memory": "64Gi", "nvidia.com/gpu": "6"}
    # already in sync: no write
    assert sync_default_cluster_queue(sqlite_store, sqlite_store.list("Node").items) is None


def test_a_user_owned_default_queue_is_not_touched(sqlite_store: Store):
    create_defaults(sqlite_store)
    mine = sqlite_store.get("ClusterQueue", "default")
    mine["metadata"]["annotations"].pop(MANAGED_ANNOTATION)
    sqlite_store.update(mine)
    sqlite_store.create(node("a", cpu="8", memory="32Gi", gpus="4"))
    assert sync_default_cluster_queue(sqlite_store, sqlite_store.list("Node").items) is None
    assert quotas(sqlite_store.get("ClusterQueue", "default"))["cpu"] == "0"
