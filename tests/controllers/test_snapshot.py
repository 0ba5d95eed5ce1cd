"""Building the scheduler's snapshot from store objects."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api import registry
from muster.controllers.scheduling.defaults import default_objects
from muster.controllers.scheduling.snapshot import SnapshotMemo, build_snapshot
from muster.scheduler import GPU_MILLI

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def valid(doc: Obj) -> Obj:
    obj = registry.validate(doc, keep_status=True).obj
    assert obj is not None
    return obj


def node(name: str = "n1", gpus: int = 4) -> Obj:
    return valid(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "A100"}},
            "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
                "gpus": [{"index": i, "model": "A100", "memory": "80Gi"} for i in range(gpus)],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def workload(name: str, gpus: str = "1", count: int = 1, **spec: Any) -> Obj:
    meta = {"name": name, "namespace": "default", "creationTimestamp": "2023-11-14T22:00:00Z"}
    body = {"podSets": [{"name": "worker", "count": count, "requests": {"cpu": "1", "nvidia.com/gpu": gpus}}]}
    body.update(spec)
    obj = valid({"apiVersion": "muster.dev/v1", "kind": "Workload", "metadata": meta, "spec": body})
    obj["metadata"]["creationTimestamp"] = meta["creationTimestamp"]
    return obj


def admitted(wl: Obj, gpus: list[list[int]], evicted: bool = False) -> Obj:
    wl["status"] = {
        "admission": {
            "clusterQueue": "default",
            "podSetAssignments": [
                {
                    "name": "worker",
                    "count": len(gpus),
                    "flavors": {"nvidia.com/gpu": "default"},
                    "pods": [{"node": "n1", "gpus": g} for g in gpus],
                }
            ],
        },
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2023-11-14T22:10:00Z"},
            {"type": "Evicted", "status": "True" if evicted else "False"},
        ],
    }
    return wl


def pod(name: str, gpus: list[int], phase: str = "Running", owner: str | None = None) -> Obj:
    labels = {"muster.dev/workload": owner} if owner else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "nodeName": "n1",
            "gpus": gpus,
            "containers": [{"name": "c", "command": ["x"], "resources": {"requests": {"cpu": "2"}}}],
        },
        "status": {"phase": phase},
    }


def build(workloads: list[Obj], pods: list[Obj] = (), **extra: Any):
    defaults = default_objects([node()])
    kinds: dict[str, list[Obj]] = {}
    for obj in defaults:
        kinds.setdefault(obj["kind"], []).append(obj)
    args = {
        "nodes": [node()],
        "flavors": kinds["ResourceFlavor"],
        "topologies": [],
        "cluster_queues": kinds["ClusterQueue"],
        "cohorts": [],
        "local_queues": kinds["LocalQueue"],
        "priority_classes": [],
        "workloads": workloads,
        "pods": list(pods),
        "now": NOW,
    }
    args.update(extra)
    return build_snapshot(**args)


def test_node_usage_counts_admissions_and_unaccounted_pods():
    holding = admitted(workload("a", count=2), [[0], [1]])
    finished_pod = pod("done", [3], phase="Succeeded")
    stray = pod("stray", [2])  # e.g. a finished job's pod still stopping
    own = pod("a-worker-0", [0], owner="a")  # counted through its admission, not twice
    built = build([holding], [finished_pod, stray, own])
    (n,) = built.snapshot.nodes
    assert n.gpu_free == (0, 0, 0, GPU_MILLI)
    assert n.used["cpu"] == 2 * 1000 + 2000
    assert n.gpus == 4 and n.gpu_model == "A100" and n.gpu_memory == 80 << 30
    assert [str(t) for t in n.taints] == ["dedicated=ml:NoSchedule"]
    assert built.snapshot.admitted[0].pod_sets[0].pods[1].gpus == (1,)


def test_pending_workloads_resolve_their_queue():
    named = workload("named", queueName="default")
    unnamed = workload("unnamed")  # goes to the namespace's default LocalQueue
    missing = workload("missing", queueName="nope")
    inactive = workload("off", active=False)
    built = build([named, unnamed, missing, inactive])
    assert sorted(w.name for w in built.snapshot.pending) == ["named", "unnamed"]
    assert {w.queue for w in built.snapshot.pending} == {"default"}
    (u,) = built.unqueueable
    assert u.workload["metadata"]["name"] == "missing" and u.reason == "Inadmissible"
    assert "LocalQueue nope does not exist in namespace default" in u.message


def test_requeued_workloads_queue_by_their_requeue_time_and_back_off():
    wl = workload("again")
    wl["status"] = {
        "conditions": [{"type": "Requeued", "status": "True", "lastTransitionTime": "2023-11-14T22:13:00Z"}]
    }
    (pending,) = build([wl]).snapshot.pending
    assert pending.eviction_time == pytest.approx(NOW - 20)
    wl["status"]["requeueState"] = {"count": 1, "requeueAt": "2023-11-14T22:14:00Z"}
    built = build([wl])
    assert not built.snapshot.pending and built.next_requeue == pytest.approx(NOW + 40)


def test_priority_classes_that_never_preempt():
    wl = workload("polite", priority=5, priorityClassName="low")
    classes = [
        valid(
            {
                "apiVersion": "muster.dev/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "low"},
                "value": 5,
                "preemptionPolicy": "Never",
            }
        )
    ]
    (pending,) = build([wl], priority_classes=classes).snapshot.pending
    assert pending.priority == 5 and pending.can_preempt is False


def test_evicting_workloads_hold_their_quota():
    built = build([admitted(workload("victim"), [[0]], evicted=True)])
    (a,) = built.snapshot.admitted
    assert a.evicted and built.snapshot.nodes[0].gpu_free[0] == 0


def test_queue_with_unknown_flavor_is_inactive():
    defaults = default_objects([node()])
    cq = next(o for o in defaults if o["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "a100"
    built = build([workload("w")], cluster_queues=[cq])
    (u,) = built.unqueueable
    assert "ClusterQueue default is inactive: ResourceFlavor a100 does not exist" in u.message


def test_namespace_selector_is_checked_against_the_namespace_name():
    defaults = default_objects([node()])
    cq = next(o for o in defaults if o["kind"] == "ClusterQueue")
    cq["spec"]["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": "research"}}
    built = build([workload("w")], cluster_queues=[cq])
    assert built.unqueueable[0].message.endswith(
        "does not admit workloads of namespace default (namespaceSelector)"
    )


def _stored(wl: Obj, uid: str, version: int) -> Obj:
    """``wl`` as the store holds it: a uid and a resourceVersion (what the memo keys on)."""
    wl["metadata"].update(uid=uid, resourceVersion=str(version), generation=1)
    return wl


def test_the_memo_reads_a_workload_once_per_version(monkeypatch):
    import muster.controllers.scheduling.snapshot as snapshot_module

    reads = []
    real = snapshot_module.workload_state
    monkeypatch.setattr(snapshot_module, "workload_state", lambda wl: reads.append(1) or real(wl))
    memo = SnapshotMemo()
    waiting = [_stored(workload(f"w{i}"), f"u{i}", 5) for i in range(50)]
    first = build(waiting, memo=memo).snapshot.pending
    assert len(reads) == 50
    again = build(waiting, memo=memo).snapshot.pending
    assert len(reads) == 50  # nothing changed: nothing read again
    assert all(a is b for a, b in zip(first, again, strict=True))
    changed = _stored(workload("w0", priority=7), "u0", 6)  # a new version of w0
    latest = build([changed, *waiting[1:]], memo=memo).snapshot.pending
    assert len(reads) == 51
    assert next(w for w in latest if w.name == "w0").priority == 7


def test_the_memo_remakes_a_pending_view_when_its_queue_or_preemption_class_changes():
    memo = SnapshotMemo()
    wl = _stored(workload("w", priorityClassName="low"), "u", 3)
    (before,) = build([wl], memo=memo).snapshot.pending
    assert before.can_preempt is True
    never = valid(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "low"},
            "value": 0,
            "preemptionPolicy": "Never",
        }
    )
    (after,) = build([wl], memo=memo, priority_classes=[never]).snapshot.pending
    assert after.can_preempt is False  # the same version of the Workload, another class


def test_workloads_of_one_shape_share_their_pod_sets_and_the_cycle_works_their_shape_out_once(monkeypatch):
    from muster.scheduler import PodSet, schedule

    memo = SnapshotMemo()
    same = [_stored(workload(f"s{i}"), f"s{i}", 1) for i in range(40)]
    other = _stored(workload("big", gpus="2"), "big", 1)
    built = build([*same, other], memo=memo)
    lists = {id(w.pod_sets) for w in built.snapshot.pending}
    assert len(lists) == 2
    shapes = []
    real = PodSet.shape
    monkeypatch.setattr(PodSet, "shape", lambda ps: shapes.append(ps.name) or real(ps))
    decisions = schedule(built.snapshot)
    assert len(shapes) == 2 and decisions.workloads_considered == 41
