"""RBAC kinds (DESIGN §10), in the shapes of ``rbac.authorization.k8s.io/v1``: Role and
RoleBinding grant verbs on kinds in a namespace; ClusterRole and ClusterRoleBinding grant
them everywhere (and on cluster kinds); ServiceAccount is an identity for tokens.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import MusterModel, Object
from muster.api.errors import FieldError, child_path

__all__ = [
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

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*")


class PolicyRule(MusterModel):
    api_groups: list[str] = Field(
        default_factory=lambda: ["muster.dev"], description="API groups; muster.dev or * for all."
    )
    resources: list[str] = Field(
        min_length=1, description="Plural kind names (trainingjobs), subresources (pods/log), or *."
    )
    verbs: list[str] = Field(min_length=1, description=f"Allowed verbs: {', '.join(VERBS)}.")
    resource_names: list[str] = Field(
        default_factory=list, description="Only these object names (default: all)."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        return [
            FieldError(child_path(path, "verbs", i), f"must be one of {', '.join(VERBS)}", verb)
            for i, verb in enumerate(self.verbs)
            if verb not in VERBS
        ]


class Subject(MusterModel):
    kind: Literal["User", "Group", "ServiceAccount"] = Field(description="User, Group or ServiceAccount.")
    name: str = Field(min_length=1, description="Name of the user, group or service account.")
    namespace: str | None = Field(
        default=None, description="Namespace of a ServiceAccount (default: the binding's)."
    )


class RoleRef(MusterModel):
    api_group: str = Field(default="muster.dev", description="API group of the role.")
    kind: Literal["Role", "ClusterRole"] = Field(description="Role or ClusterRole.")
    name: str = Field(min_length=1, description="Name of the role.")


class Role(Object):
    """Verbs on kinds within one namespace."""

    KIND: ClassVar[str] = "Role"
    kind: Literal["Role"] = Field(default="Role", description="Always Role.")
    rules: list[PolicyRule] = Field(default_factory=list, description="What the role allows.")


class ClusterRole(Object):
    """Verbs on kinds in every namespace and on cluster kinds."""

    KIND: ClassVar[str] = "ClusterRole"
    kind: Literal["ClusterRole"] = Field(default="ClusterRole", description="Always ClusterRole.")
    rules: list[PolicyRule] = Field(default_factory=list, description="What the role allows.")


class RoleBinding(Object):
    """Grants a Role (or a ClusterRole, within this namespace) to subjects."""

    KIND: ClassVar[str] = "RoleBinding"
    kind: Literal["RoleBinding"] = Field(default="RoleBinding", description="Always RoleBinding.")
    subjects: list[Subject] = Field(default_factory=list, description="Who is granted the role.")
    role_ref: RoleRef = Field(description="The role granted.")


class ClusterRoleBinding(Object):
    """Grants a ClusterRole to subjects everywhere."""

    KIND: ClassVar[str] = "ClusterRoleBinding"
    kind: Literal["ClusterRoleBinding"] = Field(
        default="ClusterRoleBinding", description="Always ClusterRoleBinding."
    )
    subjects: list[Subject] = Field(default_factory=list, description="Who is granted the role.")
    role_ref: RoleRef = Field(description="The role granted; must be a ClusterRole.")

    def field_rules(self, path: str) -> list[FieldError]:
        if self.role_ref.kind != "ClusterRole":
            return [
                FieldError(child_path(path, "roleRef", "kind"), "must be ClusterRole", self.role_ref.kind)
            ]
        return []


class ServiceAccount(Object):
    """An identity for programs; tokens are issued to it."""

    KIND: ClassVar[str] = "ServiceAccount"
    kind: Literal["ServiceAccount"] = Field(default="ServiceAccount", description="Always ServiceAccount.")
