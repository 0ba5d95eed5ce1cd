"""RBAC kinds, in the shapes of ``rbac.authorization.k8s.io/v1`` (docs/access-control.md):
Role and RoleBinding grant verbs on resources in one namespace; ClusterRole and
ClusterRoleBinding grant them everywhere, on cluster kinds and on non-resource URLs;
ServiceAccount is an identity programs hold tokens for.

Kubernetes manifests of these kinds are converted unchanged (:mod:`muster.api.compat.rbac`);
the native ``muster.dev/v1`` forms are the same fields, with ``apiGroups`` defaulting to
``muster.dev`` where Kubernetes would require it.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from muster.api.base import GROUP, MusterModel, Object, ObjectMeta
from muster.api.errors import FieldError, child_path

__all__ = [
    "RBAC_GROUP",
    "VERBS",
    "ClusterRole",
    "ClusterRoleBinding",
    "PolicyRule",
    "Role",
    "RoleBinding",
    "RoleRef",
    "ServiceAccount",
    "Subject",
]

RBAC_GROUP = "rbac.authorization.k8s.io"
# Resource verbs, the special verbs RBAC itself checks (bind, escalate, impersonate), and the
# lower-case HTTP methods non-resource URL rules use.
VERBS = (
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "bind",
    "escalate",
    "impersonate",
    "post",
    "put",
    "head",
    "*",
)
_ROLE_REF_GROUPS = (GROUP, RBAC_GROUP)


class RbacObjectMeta(ObjectMeta):
    """Metadata of RBAC objects, whose names are path segments as in Kubernetes
    (``system:basic-user``), not DNS names."""

    @field_validator("name")
    @classmethod
    def _name_rule(cls, v: str) -> str:
        if not v or v in (".", "..") or "/" in v or "%" in v or len(v) > 253:
            raise ValueError("must be 1-253 characters, not '.' or '..', without '/' or '%'")
        return v


class PolicyRule(MusterModel):
    """Verbs allowed on resources (of API groups, optionally only some names), or on non-resource
    URLs. A rule names resources or non-resource URLs, never both."""

    api_groups: list[str] = Field(
        default_factory=lambda: [GROUP],
        description="API groups of the resources: muster.dev, a Kubernetes group the resource has "
        "there ('' for pods, kueue.x-k8s.io for queues, ...) or * for all.",
    )
    resources: list[str] = Field(
        default_factory=list,
        description="Plural resource names (trainingjobs), subresources (pods/log, */status), or *.",
    )
    verbs: list[str] = Field(min_length=1, description=f"Allowed verbs: {', '.join(VERBS)}.")
    resource_names: list[str] = Field(
        default_factory=list, description="Only these object names (default: all)."
    )
    non_resource_urls: list[str] = Field(
        default_factory=list,
        alias="nonResourceURLs",
        description="Paths that are not resources (/metrics, /api/v1/doctor); a trailing * matches a "
        "prefix. Only in ClusterRoles bound by ClusterRoleBindings.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = [
            FieldError(child_path(path, "verbs", i), f"must be one of {', '.join(VERBS)}", verb)
            for i, verb in enumerate(self.verbs)
            if verb not in VERBS
        ]
        if self.resources and self.non_resource_urls:
            errors.append(
                FieldError(
                    child_path(path, "nonResourceURLs"),
                    "a rule applies to resources or to non-resource URLs, not both",
                    hint="split it into two rules",
                )
            )
        if not self.resources and not self.non_resource_urls:
            errors.append(FieldError(child_path(path, "resources"), "name resources or nonResourceURLs", []))
        if self.resource_names and self.non_resource_urls:
            errors.append(
                FieldError(child_path(path, "resourceNames"), "resourceNames apply to resources only")
            )
        for i, url in enumerate(self.non_resource_urls):
            if not url.startswith("/") and url != "*":
                errors.append(
                    FieldError(child_path(path, "nonResourceURLs", i), "must start with / (or be *)", url)
                )
            elif "*" in url[:-1]:
                errors.append(FieldError(child_path(path, "nonResourceURLs", i), "* may only end a URL", url))
        return errors


class Subject(MusterModel):
    """Who a binding grants its role to."""

    kind: Literal["User", "Group", "ServiceAccount"] = Field(description="User, Group or ServiceAccount.")
    name: str = Field(min_length=1, description="Name of the user, group or service account.")
    namespace: str | None = Field(
        default=None,
        description="Namespace of a ServiceAccount (default in a RoleBinding: the binding's; "
        "required in a ClusterRoleBinding).",
    )
    api_group: str | None = Field(
        default=None,
        description="rbac.authorization.k8s.io for User and Group, empty for ServiceAccount (as Kubernetes).",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        if self.kind != "ServiceAccount" and self.namespace:
            return [FieldError(child_path(path, "namespace"), "only a ServiceAccount has a namespace")]
        return []


class RoleRef(MusterModel):
    api_group: str = Field(default=GROUP, description=f"API group of the role: {GROUP} or {RBAC_GROUP}.")
    kind: Literal["Role", "ClusterRole"] = Field(description="Role or ClusterRole.")
    name: str = Field(min_length=1, description="Name of the role.")

    def field_rules(self, path: str) -> list[FieldError]:
        if self.api_group not in _ROLE_REF_GROUPS:
            return [
                FieldError(child_path(path, "apiGroup"), f"must be {GROUP} or {RBAC_GROUP}", self.api_group)
            ]
        return []


class Role(Object):
    """Verbs on resources within one namespace."""

    KIND: ClassVar[str] = "Role"
    metadata: RbacObjectMeta = Field(description="Standard object metadata; the name may hold ':'.")
    kind: Literal["Role"] = Field(default="Role", description="Always Role.")
    rules: list[PolicyRule] = Field(default_factory=list, description="What the role allows.")

    def field_rules(self, path: str) -> list[FieldError]:
        return [
            FieldError(
                child_path(path, "rules", i, "nonResourceURLs"),
                "a Role is namespaced: only a ClusterRole may name non-resource URLs",
            )
            for i, rule in enumerate(self.rules)
            if rule.non_resource_urls
        ]


class ClusterRole(Object):
    """Verbs on resources in every namespace (once bound by a ClusterRoleBinding), on cluster
    kinds and on non-resource URLs; a RoleBinding may grant it within its namespace."""

    KIND: ClassVar[str] = "ClusterRole"
    metadata: RbacObjectMeta = Field(description="Standard object metadata; the name may hold ':'.")
    kind: Literal["ClusterRole"] = Field(default="ClusterRole", description="Always ClusterRole.")
    rules: list[PolicyRule] = Field(default_factory=list, description="What the role allows.")


class RoleBinding(Object):
    """Grants a Role (or a ClusterRole, within this namespace) to subjects."""

    KIND: ClassVar[str] = "RoleBinding"
    metadata: RbacObjectMeta = Field(description="Standard object metadata; the name may hold ':'.")
    kind: Literal["RoleBinding"] = Field(default="RoleBinding", description="Always RoleBinding.")
    subjects: list[Subject] = Field(default_factory=list, description="Who is granted the role.")
    role_ref: RoleRef = Field(description="The role granted; it cannot change once the binding exists.")


class ClusterRoleBinding(Object):
    """Grants a ClusterRole to subjects everywhere."""

    KIND: ClassVar[str] = "ClusterRoleBinding"
    metadata: RbacObjectMeta = Field(description="Standard object metadata; the name may hold ':'.")
    kind: Literal["ClusterRoleBinding"] = Field(
        default="ClusterRoleBinding", description="Always ClusterRoleBinding."
    )
    subjects: list[Subject] = Field(default_factory=list, description="Who is granted the role.")
    role_ref: RoleRef = Field(description="The role granted; must be a ClusterRole.")

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        if self.role_ref.kind != "ClusterRole":
            errors.append(
                FieldError(child_path(path, "roleRef", "kind"), "must be ClusterRole", self.role_ref.kind)
            )
        errors += [
            FieldError(
                child_path(path, "subjects", i, "namespace"),
                "a ServiceAccount subject of a ClusterRoleBinding needs its namespace",
            )
            for i, s in enumerate(self.subjects)
            if s.kind == "ServiceAccount" and not s.namespace
        ]
        return errors


class ServiceAccount(Object):
    """An identity for programs; tokens are issued to it (``muster token create
    --serviceaccount NS/NAME``) and bindings name it as ``system:serviceaccount:NS:NAME``."""

    KIND: ClassVar[str] = "ServiceAccount"
    kind: Literal["ServiceAccount"] = Field(default="ServiceAccount", description="Always ServiceAccount.")
