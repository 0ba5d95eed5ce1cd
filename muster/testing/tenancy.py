"""Tenants for tests: a valid object of every kind, and two teams plus a viewer with tokens.

:func:`sample` gives the smallest valid document of any kind the registry serves (the RBAC
matrix creates, updates and deletes one of each). :func:`set_up_teams` makes namespaces
``team-a`` and ``team-b``, binds the built-in ``edit`` role to the groups ``team-a`` and
``team-b`` there, binds ``view`` everywhere to the user ``val``, and returns a token for
``alice`` (group team-a), ``bob`` (group team-b) and ``val``.
"""

from __future__ import annotations

from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.sdk.client import Client

__all__ = ["TEAMS", "USERS", "sample", "set_up_teams"]

Obj = dict[str, Any]
TEAMS = ("team-a", "team-b")
# user -> (groups, what binds them)
USERS: dict[str, tuple[str, ...]] = {"alice": ("team-a",), "bob": ("team-b",), "val": ()}
_CONTAINER = {"name": "main", "image": "python:3.11", "command": ["true"]}
_POD = {"containers": [_CONTAINER]}


def sample(kind: str, name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> Obj:
    """A valid ``muster.dev/v1`` document of ``kind`` (validated here, so a model change that
    breaks it fails loudly)."""
    info = registry.lookup(kind)
    meta: Obj = {"name": name}
    if info.namespaced:
        meta["namespace"] = namespace or "default"
    if labels:
        meta["labels"] = dict(labels)
    doc: Obj = {"apiVersion": API_VERSION, "kind": info.kind, "metadata": meta, **_BODIES.get(info.kind, {})}
    validated = registry.validate(doc).obj
    assert validated is not None
    return validated


_BODIES: dict[str, Obj] = {
    "Node": {"spec": {}},
    "ResourceFlavor": {"spec": {}},
    "Topology": {"spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
    "ClusterQueue": {"spec": {}},
    "Cohort": {"spec": {}},
    "LocalQueue": {"spec": {"clusterQueue": "default"}},
    "PriorityClass": {"value": 100},
    "TrainingJob": {
        "spec": {
            "replicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": _POD}}},
            "runPolicy": {"suspend": True},
        }
    },
    "Workflow": {"spec": {"tasks": [{"name": "t", "template": {"spec": _POD}}]}},
    "CacheEntry": {"spec": {"task": "wf/t", "savedAt": "2026-01-01T00:00:00Z"}},
    "Workload": {"spec": {"active": False, "podSets": [{"name": "main", "count": 1}]}},
    "Pod": {"spec": _POD},
    "Event": {"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Tested", "message": "a test"},
    "ResourceQuota": {"spec": {"hard": {"pods": "100"}}},
    "Role": {"rules": [{"apiGroups": ["muster.dev"], "resources": ["trainingjobs"], "verbs": ["get"]}]},
    "ClusterRole": {"rules": [{"apiGroups": ["muster.dev"], "resources": ["nodes"], "verbs": ["get"]}]},
    "RoleBinding": {
        "subjects": [{"kind": "User", "name": "nobody"}],
        "roleRef": {"kind": "ClusterRole", "name": "view"},
    },
    "ClusterRoleBinding": {
        "subjects": [{"kind": "User", "name": "nobody"}],
        "roleRef": {"kind": "ClusterRole", "name": "view"},
    },
    "ServiceAccount": {},
    "Namespace": {},
    "Experiment": {
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "parameters": [
                {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.1"}}
            ],
            "trialTemplate": {"template": {"spec": _POD}},
            "maxTrialCount": 1,
            "parallelTrialCount": 1,
        }
    },
    "Trial": {
        "spec": {"experiment": "x", "index": 0, "parameterAssignments": [{"name": "lr", "value": "0.01"}]}
    },
    "TrialMetrics": {"spec": {"trial": "x-0", "segment": 0}},
    "InferenceService": {"spec": {"minReplicas": 0, "predictor": _POD}},
    # suspended: nothing is queued or started
    "RayCluster": {"spec": {"headGroupSpec": {"template": {"spec": _POD}}, "suspend": True}},
    "RayJob": {
        "spec": {
            "entrypoint": "python main.py",
            "rayClusterSpec": {"headGroupSpec": {"template": {"spec": _POD}}},
            "suspend": True,
        }
    },
    # a hook pool whose command fails: a claim of it only records the provider's error
    "NodePool": {"spec": {"provider": "hook", "providerConfig": {"command": "false"}, "maxNodes": 1}},
    "NodeClaim": {
        "spec": {
            "nodePool": "p",
            "provider": "hook",
            "providerConfig": {"command": "false"},
            "capacityType": "on-demand",
            "pricePerHour": 0,
            "template": {},
        }
    },
    "GPUSharing": {"spec": {"configs": {"any": {"timeSlicing": {"replicas": 2}}}, "defaultConfig": "any"}},
    "UsageRecord": {"spec": {"type": "Node", "name": "n", "start": "2026-01-01T00:00:00Z"}},
}


def set_up_teams(admin: Client, expires_seconds: int | None = 3600) -> dict[str, str]:
    """The two teams and the viewer (see the module doc); returns each user's token."""
    docs: list[Obj] = [sample("Namespace", team) for team in TEAMS]
    for team in TEAMS:
        docs.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"{team}-edit", "namespace": team},
                "subjects": [{"kind": "Group", "name": team, "apiGroup": "rbac.authorization.k8s.io"}],
                "roleRef": {"kind": "ClusterRole", "name": "edit", "apiGroup": "rbac.authorization.k8s.io"},
            }
        )
    docs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "val-view"},
            "subjects": [{"kind": "User", "name": "val", "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": "view", "apiGroup": "rbac.authorization.k8s.io"},
        }
    )
    admin.apply(docs)
    return {
        user: admin.create_token(user, groups, expiration_seconds=expires_seconds)["status"]["token"]
        for user, groups in USERS.items()
    }
