"""Node, PriorityClass, Event, Pod, Workload and RBAC kinds."""

from __future__ import annotations

import pytest

from muster.api.registry import validate
from tests.api.helpers import errors_of, obj


def test_node_with_gpus_and_health():
    doc = obj(
        "Node",
        spec={
            "unschedulable": True,
            "taints": [{"key": "nvidia.com/gpu", "value": "unhealthy", "effect": "NoSchedule"}],
        },
        status={
            "capacity": {"cpu": 64, "memory": "512Gi", "nvidia.com/gpu": 8},
            "gpus": [
                {
                    "index": 0,
                    "uuid": "GPU-1",
                    "model": "NVIDIA A100",
                    "memory": "80Gi",
                    "migMode": True,
                    "migDevices": [{"profile": "1g.10gb", "uuid": "MIG-1"}],
                    "nvlinkPeers": [1],
                    "domain": "nvl0",
                },
                {"index": 1, "health": "Unhealthy", "healthReason": "XID 79"},
            ],
            "runtime": "local",
            "lastHeartbeatTime": "2025-01-01T00:00:00Z",
        },
    )
    doc["metadata"]["labels"] = {"nvidia.com/gpu.product": "NVIDIA-A100", "nvidia.com/gpu.memory": "81920"}
    wire = validate(doc, keep_status=True).obj
    assert wire["status"]["gpus"][1]["health"] == "Unhealthy"
    assert wire["status"]["capacity"]["nvidia.com/gpu"] == "8"
    doc["status"]["gpus"][1]["index"] = 0
    doc["status"]["runtime"] = "slurm"
    assert errors_of_kept(doc) == [
        "status.runtime: must be one of 'local', 'ray', 'kubernetes' or 'sim', got 'slurm'"
    ]
    doc["status"]["runtime"] = "sim"
    assert errors_of_kept(doc) == ["status.gpus[1].index: duplicate GPU index, got 0"]


def errors_of_kept(doc):
    from muster.api.errors import InvalidObject

    with pytest.raises(InvalidObject) as info:
        validate(doc, keep_status=True)
    return [str(e) for e in info.value.errors]


def test_priority_class_mirrors_kubernetes():
    wire = validate(obj("PriorityClass", value=1000, description="prod")).obj
    assert {k: wire[k] for k in ("value", "preemptionPolicy", "globalDefault")} == {
        "value": 1000,
        "preemptionPolicy": "PreemptLowerPriority",
        "globalDefault": False,
    }
    assert errors_of(obj("PriorityClass", value=2_000_000_000)) == [
        "value: must be <= 1000000000 (higher values are reserved for system- classes), got 2000000000"
    ]
    validate(obj("PriorityClass", "system-critical", value=2_000_000_000))
    assert errors_of(obj("PriorityClass")) == ["value: required field is missing"]


def test_event_shape():
    wire = validate(
        obj(
            "Event",
            involvedObject={"kind": "TrainingJob", "name": "j", "namespace": "default"},
            reason="Preempted",
            type="Warning",
            count=2,
        )
    ).obj
    assert wire["involvedObject"]["apiVersion"] == "muster.dev/v1"
    assert errors_of(obj("Event", involvedObject={"kind": "Pod", "name": "p"}, reason="X", type="Error")) == [
        "type: must be one of 'Normal' or 'Warning', got 'Error'"
    ]


def test_pod_binding_and_status():
    doc = obj(
        "Pod",
        spec={
            "nodeName": "n1",
            "gpus": [0],
            "gpuMilli": 500,
            "containers": [
                {"name": "c", "command": ["x"], "resources": {"requests": {"nvidia.com/gpu": "500m"}}}
            ],
        },
        status={
            "phase": "Failed",
            "reason": "OOMKilled",
            "hostIP": "127.0.0.1",
            "handle": {"pid": 4242, "pgid": 4242},
            "containerStatuses": [{"name": "c", "state": "Terminated", "exitCode": 137, "signal": 9}],
        },
    )
    wire = validate(doc, keep_status=True).obj
    assert wire["status"]["hostIP"] == "127.0.0.1" and wire["spec"]["gpuMilli"] == 500
    doc["spec"]["gpuMilli"] = 1000
    assert errors_of(doc) == ["spec.gpuMilli: must be <= 999, got 1000"]


def test_workload_rules():
    pod_set = {
        "name": "main",
        "count": 4,
        "minCount": 2,
        "requests": {"cpu": 1, "nvidia.com/gpu": 1},
        "gpuModels": ["A100"],
        "topologyRequest": {"preferred": "rack"},
        "podAntiAffinity": True,
    }
    wire = validate(obj("Workload", spec={"queueName": "q", "priority": 5, "podSets": [pod_set]})).obj
    assert wire["spec"]["podSets"][0]["requests"] == {"cpu": "1", "nvidia.com/gpu": "1"}
    bad = [
        {**pod_set, "minCount": 5, "topologyRequest": {"required": "a", "preferred": "b"}},
        {"name": "main", "count": 0, "requests": {"nvidia.com/gpu": "2500m"}},
    ]
    assert errors_of(obj("Workload", spec={"podSets": bad})) == ["spec.podSets[1].count: must be >= 1, got 0"]
    bad[1]["count"] = 1
    assert errors_of(obj("Workload", spec={"podSets": bad})) == [
        "spec.podSets[1].name: duplicate name, got 'main'",
        "spec.podSets[0].minCount: must be <= count (4), got 5",
        "spec.podSets[0].topologyRequest: must set exactly one of required and preferred",
        "spec.podSets[1].requests[nvidia.com/gpu]: must be a whole number of GPUs or a share of one GPU "
        "below 1 "
        "(e.g. 500m = half a GPU), got '2500m'",
    ]
    assert errors_of(obj("Workload", spec={"podSets": []})) == ["spec.podSets: must not be empty"]


def test_workload_status_round_trip():
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 2,
                    "flavors": {"nvidia.com/gpu": "a100"},
                    "resourceUsage": {"nvidia.com/gpu": 2},
                    "pods": [{"node": "n1", "gpus": [0]}, {"node": "n2", "gpus": [3]}],
                }
            ],
        },
        "pending": {"reason": "QuotaExhausted", "message": "needs 2 GPUs, 0 free", "details": {"free": 0}},
        "requeueState": {"count": 1, "requeueAt": "2025-01-01T00:01:00Z"},
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted"}],
    }
    doc = obj("Workload", spec={"podSets": [{"count": 2}]}, status=status)
    wire = validate(doc, keep_status=True).obj
    assert wire["status"]["admission"]["podSetAssignments"][0]["pods"][1] == {"node": "n2", "gpus": [3]}
    assert wire["spec"]["podSets"][0]["name"] == "main"


def test_rbac_kinds():
    validate(
        obj("Role", rules=[{"resources": ["trainingjobs", "pods/log"], "verbs": ["get", "list", "watch"]}])
    )
    validate(obj("ServiceAccount", "ci-bot"))
    binding = obj(
        "RoleBinding",
        subjects=[{"kind": "ServiceAccount", "name": "ci-bot"}],
        roleRef={"kind": "Role", "name": "reader"},
    )
    assert validate(binding).obj["roleRef"]["apiGroup"] == "muster.dev"
    assert errors_of(obj("Role", rules=[{"resources": ["pods"], "verbs": ["get", "fly"]}])) == [
        "rules[0].verbs[1]: must be one of get, list, watch, create, update, patch, delete, "
        "deletecollection, bind, escalate, impersonate, post, put, head, *, "
        "got 'fly'"
    ]
    assert errors_of(obj("ClusterRoleBinding", roleRef={"kind": "Role", "name": "r"})) == [
        "roleRef.kind: must be ClusterRole, got 'Role'"
    ]
    assert errors_of(
        obj("RoleBinding", subjects=[{"kind": "Robot", "name": "x"}], roleRef={"kind": "Role", "name": "r"})
    ) == ["subjects[0].kind: must be one of 'User', 'Group' or 'ServiceAccount', got 'Robot'"]
