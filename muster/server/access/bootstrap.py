"""The built-in roles and bindings every server keeps (docs/access-control.md, "Built-in roles").

As in Kubernetes, they are created when missing and reconciled at every start while they
carry ``rbac.authorization.kubernetes.io/autoupdate: "true"`` (set that to ``"false"`` to
keep an edited one as it is). Roles get their rules back; bindings get their subjects added.

* ``cluster-admin``: everything; bound to the group ``system:masters`` (the bootstrap token).
* ``queue-admin``: ClusterQueues, Cohorts, ResourceFlavors, Topologies, PriorityClasses,
  LocalQueues and ResourceQuotas; reads nodes, namespaces and the work that uses the quota.
* ``admin``: ``edit`` plus Roles and RoleBindings, and the audit log, of a namespace.
* ``edit``: a team's work in a namespace (bind it with a RoleBinding there): TrainingJobs,
  Workflows, InferenceServices, LocalQueues, cache entries, ServiceAccounts and their tokens;
  reads and deletes pods, reads logs, Workloads, events and quotas.
* ``view``: reads all of the above (not Roles, bindings or the audit log).
* ``muster:cluster-info``: reads nodes and the queue set-up (ClusterQueues, Cohorts,
  flavors, topologies, priority classes): what a team needs to see why it waits; bound to
  every signed-in identity (``system:authenticated``). Delete or edit the binding to hide them.
* ``system:basic-user``: who am I, what may I do, the version and discovery; bound to
  ``system:authenticated``.
"""

from __future__ import annotations

import copy
from typing import Any

from muster.api import registry
from muster.api.base import API_VERSION
from muster.api.rbac import RBAC_GROUP
from muster.server.access.attributes import ADMIN_GROUP, AUTHENTICATED_GROUP
from muster.store import Conflict, Store

__all__ = ["AUTOUPDATE_ANNOTATION", "BOOTSTRAP_LABEL", "builtin_objects", "ensure_builtin"]

AUTOUPDATE_ANNOTATION = "rbac.authorization.kubernetes.io/autoupdate"
BOOTSTRAP_LABEL = "kubernetes.io/bootstrapping"

Obj = dict[str, Any]
ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
READ = ["get", "list", "watch"]
_QUEUE_KINDS = ["clusterqueues", "cohorts", "resourceflavors", "topologies", "priorityclasses"]
_TEAM_WORK = ["trainingjobs", "workflows", "experiments", "inferenceservices", "localqueues", "cacheentries"]
# Trials and their metrics are the Experiment controller's: people read them.
_TEAM_READS = [
    "pods",
    "workloads",
    "events",
    "trials",
    "trialmetrics",
    "resourcequotas",
    "serviceaccounts",
    "namespaces",
]


def _rule(resources: list[str], verbs: list[str], groups: tuple[str, ...] = ("muster.dev",)) -> Obj:
    return {"apiGroups": list(groups), "resources": resources, "verbs": verbs}


def _edit_rules() -> list[Obj]:
    return [
        _rule(_TEAM_WORK, ALL_VERBS),
        _rule(
            ["workflows/retry", "workflows/resubmit", "serviceaccounts/token", "inferenceservices/proxy"],
            ["create"],
        ),
        _rule(["pods"], ["get", "list", "watch", "delete", "deletecollection"]),
        _rule(["pods/log"], ["get"]),
        _rule(["workloads", "events", "trials", "trialmetrics", "resourcequotas"], READ),
        _rule(["serviceaccounts"], ALL_VERBS),
        _rule(["tokens"], ["get", "list", "watch", "delete"]),
        _rule(["namespaces"], READ),  # bound in a namespace: that namespace only
    ]


_CLUSTER_ROLES: dict[str, list[Obj]] = {
    "cluster-admin": [
        _rule(["*"], ["*"], ("*",)),
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "queue-admin": [
        _rule([*_QUEUE_KINDS, "localqueues", "resourcequotas"], ALL_VERBS),
        _rule(["nodes", "namespaces", "workloads", "pods", "trainingjobs", "workflows", "events"], READ),
        {"nonResourceURLs": ["/api/v1/*"], "verbs": ["get"]},
    ],
    "admin": [
        *_edit_rules(),
        _rule(["roles", "rolebindings"], ALL_VERBS),
        _rule(["auditevents"], ["get", "list"]),
    ],
    "edit": _edit_rules(),
    "view": [_rule([*_TEAM_WORK, *_TEAM_READS], READ), _rule(["pods/log"], ["get"])],
    "muster:cluster-info": [_rule(["nodes", *_QUEUE_KINDS], READ)],
    "system:basic-user": [
        _rule(["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"], ("authorization.k8s.io",)),
        _rule(["selfsubjectreviews"], ["create"], ("authentication.k8s.io",)),
        {
            "nonResourceURLs": ["/version", "/readyz", "/healthz", "/apis", "/apis/*", "/openapi.json"],
            "verbs": ["get"],
        },
    ],
}
_BINDINGS: dict[str, tuple[str, str]] = {
    "cluster-admin": ("cluster-admin", ADMIN_GROUP),
    "muster:cluster-info": ("muster:cluster-info", AUTHENTICATED_GROUP),
    "system:basic-user": ("system:basic-user", AUTHENTICATED_GROUP),
}


def builtin_objects() -> list[Obj]:
    """The built-in ClusterRoles, ClusterRoleBindings and the ``default`` Namespace (wire form)."""
    meta = {"labels": {BOOTSTRAP_LABEL: "rbac-defaults"}, "annotations": {AUTOUPDATE_ANNOTATION: "true"}}
    out: list[Obj] = []
    for name, rules in _CLUSTER_ROLES.items():
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterRole",
                "metadata": {"name": name, **copy.deepcopy(meta)},
                "rules": [
                    {"apiGroups": [], **r} if "nonResourceURLs" in r else r for r in copy.deepcopy(rules)
                ],
            }
        )
    for name, (role, group) in _BINDINGS.items():
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name, **copy.deepcopy(meta)},
                "subjects": [{"kind": "Group", "name": group, "apiGroup": RBAC_GROUP}],
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            }
        )
    out.append({"apiVersion": API_VERSION, "kind": "Namespace", "metadata": {"name": "default"}})
    return [registry.validate(o).obj for o in out]  # type: ignore[misc]


def ensure_builtin(store: Store) -> list[str]:
    """Create the built-in objects that are missing and reconcile those marked autoupdate, in
    one transaction; returns what was written (``Kind/name``). Several servers may start at once."""
    for _ in range(5):
        stored = {
            (o["kind"], o["metadata"]["name"]): o
            for kind in ("ClusterRole", "ClusterRoleBinding", "Namespace")
            for o in store.list(kind).items
        }
        writes = []
        for obj in builtin_objects():
            current = stored.get((obj["kind"], obj["metadata"]["name"]))
            if current is None:
                writes.append(obj)
            else:
                merged = _reconciled(current, obj)
                if merged is not None:
                    writes.append(merged)  # carries the stored resourceVersion: a race conflicts
        if not writes:
            return []
        try:
            store.apply(writes)
        except Conflict:
            continue
        return [f"{o['kind']}/{o['metadata']['name']}" for o in writes]
    return []


def _reconciled(stored: Obj, wanted: Obj) -> Obj | None:
    """``stored`` brought back to ``wanted`` where autoupdate allows; None when nothing changes."""
    kind = stored["kind"]
    if kind == "Namespace":
        return None
    if (stored["metadata"].get("annotations") or {}).get(AUTOUPDATE_ANNOTATION, "true") == "false":
        return None
    merged = copy.deepcopy(stored)
    if kind == "ClusterRole":
        if merged.get("rules") == wanted["rules"]:
            return None
        merged["rules"] = wanted["rules"]
        return merged
    subjects = list(merged.get("subjects") or [])
    missing = [s for s in wanted["subjects"] if not any(_same_subject(s, t) for t in subjects)]
    if not missing:
        return None
    merged["subjects"] = subjects + missing
    return merged


def _same_subject(a: Obj, b: Obj) -> bool:
    return (a.get("kind"), a.get("name"), a.get("namespace")) == (
        b.get("kind"),
        b.get("name"),
        b.get("namespace"),
    )
