"""Kubernetes RBAC semantics of the pure authorizer, and how requests become attributes."""

from __future__ import annotations

from typing import Any

import pytest

from muster.server.access.attributes import Attributes, UserInfo, request_attributes, service_account_user
from muster.server.access.rbac import Authorizer

ALICE = UserInfo("alice", ("team-a", "system:authenticated"))
MALLORY = UserInfo("mallory", ("system:authenticated",))


def role(name: str, namespace: str | None, *rules: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": "Role" if namespace else "ClusterRole", "metadata": meta, "rules": list(rules)}


def binding(
    name: str, namespace: str | None, ref: tuple[str, str], *subjects: dict[str, Any]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": meta,
        "subjects": list(subjects),
        "roleRef": {"kind": ref[0], "name": ref[1]},
    }


def rule(
    resources: list[str], verbs: list[str], groups: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "apiGroups": groups if groups is not None else ["muster.dev"],
        "resources": resources,
        "verbs": verbs,
        **extra,
    }


def authorizer(roles=(), cluster_roles=(), bindings=(), cluster_bindings=()) -> Authorizer:
    return Authorizer(roles, cluster_roles, bindings, cluster_bindings)


def can(
    a: Authorizer, user: UserInfo, verb: str, resource: str, ns: str | None = None, name: str = "", **kw
) -> bool:
    base, _, sub = resource.partition("/")
    return a.authorize(user, Attributes(verb, base, sub, ns, name, **kw)).allowed


GROUP_A = {"kind": "Group", "name": "team-a"}


def test_a_role_binding_grants_in_its_namespace_only():
    a = authorizer(
        roles=[role("jobs", "team-a", rule(["trainingjobs"], ["get", "list"]))],
        bindings=[binding("b", "team-a", ("Role", "jobs"), GROUP_A)],
    )
    assert can(a, ALICE, "get", "trainingjobs", "team-a", "x")
    assert can(a, ALICE, "list", "trainingjobs", "team-a")
    assert not can(a, ALICE, "delete", "trainingjobs", "team-a", "x")
    assert not can(a, ALICE, "get", "trainingjobs", "team-b", "x")
    assert not can(a, ALICE, "list", "trainingjobs")  # across namespaces: not by a RoleBinding
    assert not can(a, MALLORY, "get", "trainingjobs", "team-a", "x")


def test_a_cluster_role_bound_in_a_namespace_grants_there_and_bound_cluster_wide_everywhere():
    cluster_roles = [role("edit", None, rule(["trainingjobs"], ["*"]), rule(["nodes"], ["get"]))]
    local = authorizer(
        cluster_roles=cluster_roles, bindings=[binding("b", "team-a", ("ClusterRole", "edit"), GROUP_A)]
    )
    assert can(local, ALICE, "delete", "trainingjobs", "team-a", "x")
    assert not can(local, ALICE, "delete", "trainingjobs", "team-b", "x")
    assert not can(local, ALICE, "get", "nodes", None, "n1")  # a RoleBinding grants no cluster kinds
    wide = authorizer(
        cluster_roles=cluster_roles, cluster_bindings=[binding("b", None, ("ClusterRole", "edit"), GROUP_A)]
    )
    assert can(wide, ALICE, "delete", "trainingjobs", "team-b", "x")
    assert can(wide, ALICE, "list", "trainingjobs")
    assert can(wide, ALICE, "get", "nodes", None, "n1")


def test_a_role_in_another_namespace_or_a_missing_one_grants_nothing():
    a = authorizer(
        roles=[role("jobs", "team-b", rule(["trainingjobs"], ["get"]))],
        bindings=[
            binding("b", "team-a", ("Role", "jobs"), GROUP_A),
            binding("c", "team-a", ("ClusterRole", "gone"), GROUP_A),
        ],
        cluster_bindings=[binding("d", None, ("Role", "jobs"), GROUP_A)],
    )
    assert not can(a, ALICE, "get", "trainingjobs", "team-a", "x")
    assert not can(a, ALICE, "get", "trainingjobs", "team-b", "x")


def test_verbs_resources_subresources_and_wildcards():
    a = authorizer(
        cluster_roles=[
            role(
                "r",
                None,
                rule(["pods/log"], ["get"]),
                rule(["*/status"], ["update"]),
                rule(["workflows"], ["*"]),
                rule(["*"], ["watch"]),
            )
        ],
        cluster_bindings=[binding("b", None, ("ClusterRole", "r"), GROUP_A)],
    )
    assert can(a, ALICE, "get", "pods/log", "x", "p")
    assert not can(a, ALICE, "get", "pods", "x", "p")  # the subresource does not grant the resource
    assert can(a, ALICE, "update", "trainingjobs/status", "x", "j")
    assert not can(a, ALICE, "update", "trainingjobs", "x", "j")
    assert all(can(a, ALICE, v, "workflows", "x", "w") for v in ("get", "deletecollection", "patch"))
    assert not can(a, ALICE, "get", "workflows/retry", "x", "w")  # "workflows" is not "workflows/*"
    assert can(a, ALICE, "watch", "nodes") and can(
        a, ALICE, "watch", "pods/log", "x"
    )  # "*" covers subresources


def test_resource_names_limit_to_those_names_and_never_allow_create_or_list():
    a = authorizer(
        roles=[
            role(
                "one",
                "team-a",
                rule(["trainingjobs"], ["get", "create", "list", "delete"], resourceNames=["mine"]),
            )
        ],
        bindings=[binding("b", "team-a", ("Role", "one"), GROUP_A)],
    )
    assert can(a, ALICE, "get", "trainingjobs", "team-a", "mine")
    assert can(a, ALICE, "delete", "trainingjobs", "team-a", "mine")
    assert not can(a, ALICE, "get", "trainingjobs", "team-a", "other")
    assert not can(a, ALICE, "create", "trainingjobs", "team-a")
    assert not can(a, ALICE, "list", "trainingjobs", "team-a")
    vis = a.visibility(ALICE, Attributes("list", "trainingjobs", namespace="team-a"), True)
    assert not vis.everything and vis.allows("team-a", "mine") and not vis.allows("team-a", "other")


def test_kubernetes_api_groups_name_the_same_resources():
    a = authorizer(
        cluster_roles=[
            role(
                "k8s",
                None,
                rule(["pods"], ["get"], groups=[""]),
                rule(["localqueues"], ["create"], groups=["kueue.x-k8s.io"]),
                rule(["pytorchjobs"], ["list"], groups=["kubeflow.org"]),
                rule(["roles"], ["get"], groups=["rbac.authorization.k8s.io"]),
                rule(["clusterqueues"], ["get"], groups=["apps"]),  # not where clusterqueues live
            )
        ],
        cluster_bindings=[binding("b", None, ("ClusterRole", "k8s"), GROUP_A)],
    )
    assert can(a, ALICE, "get", "pods", "x", "p")
    assert can(a, ALICE, "create", "localqueues", "x")
    assert can(a, ALICE, "list", "trainingjobs", "x")
    assert can(a, ALICE, "get", "roles", "x", "r")
    assert not can(a, ALICE, "get", "clusterqueues", None, "cq")
    assert not can(a, ALICE, "get", "trainingjobs", "x", "j")


def test_non_resource_urls_exact_and_prefix_and_only_through_cluster_role_bindings():
    cr = role("m", None, {"nonResourceURLs": ["/metrics", "/api/v1/*"], "verbs": ["get"]})
    wide = authorizer(
        cluster_roles=[cr], cluster_bindings=[binding("b", None, ("ClusterRole", "m"), GROUP_A)]
    )
    assert wide.allowed(ALICE, Attributes("get", path="/metrics"))
    assert wide.allowed(ALICE, Attributes("get", path="/api/v1/doctor"))
    assert not wide.allowed(ALICE, Attributes("post", path="/metrics"))
    assert not wide.allowed(ALICE, Attributes("get", path="/metricsx"))
    local = authorizer(cluster_roles=[cr], bindings=[binding("b", "team-a", ("ClusterRole", "m"), GROUP_A)])
    assert not local.allowed(ALICE, Attributes("get", path="/metrics"))


def test_service_account_subjects_default_to_the_binding_namespace():
    bot = service_account_user("team-a", "ci")
    a = authorizer(
        cluster_roles=[role("view", None, rule(["trainingjobs"], ["get"]))],
        bindings=[binding("b", "team-a", ("ClusterRole", "view"), {"kind": "ServiceAccount", "name": "ci"})],
        cluster_bindings=[
            binding(
                "c", None, ("ClusterRole", "view"), {"kind": "Group", "name": "system:serviceaccounts:team-b"}
            )
        ],
    )
    assert bot.name == "system:serviceaccount:team-a:ci" and bot.service_account == ("team-a", "ci")
    assert can(a, bot, "get", "trainingjobs", "team-a", "j")
    assert not can(a, bot, "get", "trainingjobs", "team-c", "j")
    other = service_account_user("team-b", "ci")
    assert can(a, other, "get", "trainingjobs", "team-c", "j")  # by its namespace's group


def test_system_masters_may_do_anything_and_denials_name_the_missing_rule():
    a = authorizer()
    assert a.allowed(UserInfo("admin", ("system:masters",)), Attributes("delete", "nodes", name="n1"))
    decision = a.authorize(ALICE, Attributes("delete", "trainingjobs", namespace="team-b", name="x"))
    assert not decision.allowed
    assert '"resources": ["trainingjobs"]' in decision.reason and '"verbs": ["delete"]' in decision.reason
    assert 'namespace "team-b"' in decision.reason and '"resourceNames": ["x"]' in decision.reason


def test_visibility_across_namespaces():
    a = authorizer(
        cluster_roles=[role("view", None, rule(["trainingjobs"], ["list"]))],
        bindings=[
            binding("a", "team-a", ("ClusterRole", "view"), GROUP_A),
            binding("c", "team-c", ("ClusterRole", "view"), GROUP_A),
        ],
    )
    vis = a.visibility(ALICE, Attributes("list", "trainingjobs"), True)
    assert not vis.everything and vis.namespaces == {"team-a", "team-c"}
    assert vis.allows("team-a", "x") and not vis.allows("team-b", "x")
    assert a.visibility(MALLORY, Attributes("list", "trainingjobs"), True).nothing


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/apis/muster.dev/v1/namespaces/a/trainingjobs/x", {}, ("get", "trainingjobs", "", "a", "x")),
        ("GET", "/apis/muster.dev/v1/namespaces/a/trainingjobs", {}, ("list", "trainingjobs", "", "a", "")),
        (
            "GET",
            "/apis/muster.dev/v1/trainingjobs",
            {"watch": "true"},
            ("watch", "trainingjobs", "", None, ""),
        ),
        (
            "POST",
            "/apis/muster.dev/v1/namespaces/a/trainingjobs",
            {},
            ("create", "trainingjobs", "", "a", ""),
        ),
        (
            "PUT",
            "/apis/muster.dev/v1/namespaces/a/trainingjobs/x/status",
            {},
            ("update", "trainingjobs", "status", "a", "x"),
        ),
        ("PATCH", "/apis/muster.dev/v1/nodes/n", {}, ("patch", "nodes", "", None, "n")),
        ("DELETE", "/apis/muster.dev/v1/namespaces/a/pods", {}, ("deletecollection", "pods", "", "a", "")),
        ("DELETE", "/apis/muster.dev/v1/namespaces/a/pods/p", {}, ("delete", "pods", "", "a", "p")),
        ("GET", "/apis/muster.dev/v1/namespaces/a/pods/p/log", {}, ("get", "pods", "log", "a", "p")),
        (
            "POST",
            "/apis/muster.dev/v1/nodes/n/fault-injection",
            {},
            ("create", "nodes", "fault-injection", None, "n"),
        ),
        ("GET", "/apis/muster.dev/v1/namespaces/team-a", {}, ("get", "namespaces", "", "team-a", "team-a")),
        (
            "PUT",
            "/apis/muster.dev/v1/namespaces/team-a/status",
            {},
            ("update", "namespaces", "status", "team-a", "team-a"),
        ),
        ("GET", "/apis/muster.dev/v1/namespaces", {}, ("list", "namespaces", "", None, "")),
    ],
)
def test_request_attributes_follow_kubernetes(method, path, query, expected):
    attrs = request_attributes(method, path, query)
    assert (attrs.verb, attrs.resource, attrs.subresource, attrs.namespace, attrs.name) == expected
    assert attrs.group == "muster.dev"


@pytest.mark.parametrize("path", ["/metrics", "/api/v1/doctor", "/apis/muster.dev/v1", "/", "/version"])
def test_other_paths_are_non_resource_urls(path: str):
    attrs = request_attributes("GET", path, {})
    assert not attrs.is_resource and attrs.path == path and attrs.verb == "get"
