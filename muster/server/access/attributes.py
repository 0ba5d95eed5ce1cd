"""Who asks (:class:`UserInfo`) and what a request asks to do (:class:`Attributes`), as
Kubernetes' authorizer sees them.

A path under ``/apis/{group}/{version}/`` is a *resource request*: its verb follows from the
method (GET an object: get; GET a collection: list, or watch with ``?watch=true``; POST:
create; PUT: update; PATCH: patch; DELETE an object: delete, a collection:
deletecollection), its resource, subresource, namespace and name from the path, exactly as
Kubernetes' RequestInfo reads them (a request on ``namespaces/NAME`` has NAME as its
namespace, so a RoleBinding there may grant it). Any other path is a *non-resource request*
(``/metrics``, ``/api/v1/doctor``), whose verb is the lower-case method.

Muster serves every kind in ``muster.dev``; the Kubernetes groups the same resources have
there (``""`` for pods, ``kueue.x-k8s.io`` for queues, ``rbac.authorization.k8s.io``...) are
other names of them (:func:`identities`), so a Kubernetes Role applies unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from muster.api.base import GROUP

__all__ = [
    "ADMIN_GROUP",
    "AUTHENTICATED_GROUP",
    "SERVICE_ACCOUNT_PREFIX",
    "Attributes",
    "UserInfo",
    "identities",
    "native_resource",
    "request_attributes",
    "service_account_user",
]

AUTHENTICATED_GROUP = "system:authenticated"
ADMIN_GROUP = "system:masters"  # bypasses authorization, as in Kubernetes
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"

_CORE = ""
_KUEUE = "kueue.x-k8s.io"
_RBAC = "rbac.authorization.k8s.io"
# (group, resource) names a Muster resource also has, beyond (muster.dev, itself).
_ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    "pods": ((_CORE, "pods"),),
    "events": ((_CORE, "events"), ("events.k8s.io", "events")),
    "namespaces": ((_CORE, "namespaces"),),
    "nodes": ((_CORE, "nodes"),),
    "serviceaccounts": ((_CORE, "serviceaccounts"),),
    "resourcequotas": ((_CORE, "resourcequotas"),),
    "localqueues": ((_KUEUE, "localqueues"),),
    "clusterqueues": ((_KUEUE, "clusterqueues"),),
    "cohorts": ((_KUEUE, "cohorts"),),
    "resourceflavors": ((_KUEUE, "resourceflavors"),),
    "topologies": ((_KUEUE, "topologies"),),
    "workloads": ((_KUEUE, "workloads"),),
    "priorityclasses": (("scheduling.k8s.io", "priorityclasses"),),
    "trainingjobs": (("kubeflow.org", "pytorchjobs"), ("batch", "jobs")),
    "experiments": (("kubeflow.org", "experiments"),),
    "roles": ((_RBAC, "roles"),),
    "rolebindings": ((_RBAC, "rolebindings"),),
    "clusterroles": ((_RBAC, "clusterroles"),),
    "clusterrolebindings": ((_RBAC, "clusterrolebindings"),),
}
# Subresources of namespaces that Kubernetes reads as namespaces/NAME/SUB.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


@dataclass(frozen=True)
class UserInfo:
    """An authenticated identity: a user name, its groups, and the token it signed in with."""

    name: str
    groups: tuple[str, ...] = ()
    token_id: str | None = None  # None for the bootstrap admin token
    expires: str | None = None  # RFC 3339, None when the token does not expire

    @property
    def is_admin(self) -> bool:
        return ADMIN_GROUP in self.groups

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) when the identity is a ServiceAccount."""
        if not self.name.startswith(SERVICE_ACCOUNT_PREFIX):
            return None
        ns, _, name = self.name[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
        return (ns, name) if ns and name else None


def service_account_user(namespace: str, name: str) -> UserInfo:
    """The identity of ServiceAccount ``namespace/name``, with the groups Kubernetes gives it."""
    return UserInfo(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        (SERVICE_ACCOUNTS_GROUP, f"{SERVICE_ACCOUNTS_GROUP}:{namespace}", AUTHENTICATED_GROUP),
    )


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do. A resource request has ``resource`` set; a non-resource
    request has ``path`` instead."""

    verb: str
    resource: str = ""
    subresource: str = ""
    namespace: str | None = None
    name: str = ""
    group: str = GROUP
    path: str = ""

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)

    @property
    def full_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    def to_dict(self) -> dict[str, object]:
        if not self.is_resource:
            return {"verb": self.verb, "path": self.path}
        out: dict[str, object] = {"verb": self.verb, "group": self.group, "resource": self.resource}
        if self.subresource:
            out["subresource"] = self.subresource
        if self.namespace:
            out["namespace"] = self.namespace
        if self.name:
            out["name"] = self.name
        return out


def identities(group: str, resource: str) -> tuple[tuple[str, str], ...]:
    """Every (API group, resource name) a requested resource answers to in a rule."""
    if group != GROUP:
        return ((group, resource),)
    return ((GROUP, resource), *_ALIASES.get(resource, ()))


def native_resource(group: str, resource: str) -> str | None:
    """The Muster resource that ``resource`` (base name) of ``group`` names, if any: itself in
    ``muster.dev``, ``localqueues`` for kueue.x-k8s.io's, ``trainingjobs`` for kubeflow.org's
    ``pytorchjobs``."""
    if group == GROUP:
        return resource
    for native, names in _ALIASES.items():
        if (group, resource) in names:
            return native
    return None


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request, by Kubernetes' rules (see the module docstring)."""
    method = method.upper()
    parts = [p for p in path.split("/") if p]
    if len(parts) < 4 or parts[0] != "apis":
        return Attributes(verb="get" if method == "HEAD" else method.lower(), path=path)
    group, rest = parts[1], parts[3:]
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 2:
        if len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            namespace, rest = rest[1], rest[2:]
        else:
            namespace = rest[1]  # the namespace object itself: its RoleBindings may grant it
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = "/".join(rest[2:])
    if method in ("GET", "HEAD"):
        watching = query.get("watch") in ("true", "1")
        verb = "get" if name else ("watch" if watching else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return Attributes(
        verb=verb,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        group=group,
        path=path,
    )
