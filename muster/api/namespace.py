"""Namespace and ResourceQuota, the tenancy kinds of Kubernetes' core group (docs/access-control.md).

A Namespace is optional in Muster (objects may live in a namespace nobody created, as before),
but creating one gives it a ``default`` LocalQueue (the annotation
:data:`DEFAULT_QUEUE_ANNOTATION` or the server's setting names the ClusterQueue), its labels
are what a ClusterQueue's ``namespaceSelector`` matches, and RoleBindings in it are how a
team is given rights there.

A ResourceQuota caps what the admitted Workloads of one namespace may hold together, on top
of ClusterQueue quota: ``pods`` (pod count) and requests of any resource (``requests.cpu``
or ``cpu``, ``requests.memory``, ``requests.nvidia.com/gpu``; a GPU share counts its
fraction). Muster enforces it when it admits a Workload, where Kubernetes enforces it when a
pod is created; a Workload it blocks waits with reason ``ResourceQuotaExceeded`` naming the
quota. Keys Muster does not enforce (``limits.*``, object counts, storage) are accepted with a
warning each.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from muster.api.base import MusterModel, Object
from muster.api.common import NonNegativeQuantity, check_resource_name
from muster.api.errors import FieldError, child_path

__all__ = [
    "DEFAULT_QUEUE_ANNOTATION",
    "NAMESPACE_NAME_LABEL",
    "Namespace",
    "ResourceQuota",
    "enforced_quota_resource",
]

# Kubernetes labels every Namespace with its own name, so selectors can match it by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# On a Namespace: the ClusterQueue its `default` LocalQueue points at ("" for none), instead of
# the server's setting (MUSTER_NAMESPACE_DEFAULT_QUEUE).
DEFAULT_QUEUE_ANNOTATION = "muster.dev/default-cluster-queue"

_POD_COUNT_KEYS = ("pods", "count/pods")


class NamespaceSpec(MusterModel):
    finalizers: list[str] = Field(
        default_factory=list, description="Accepted for Kubernetes manifests; Muster keeps no finalizers."
    )


class NamespaceStatus(MusterModel):
    phase: Literal["Active", "Terminating"] = Field(default="Active", description="Active or Terminating.")
    default_local_queue: str | None = Field(
        default=None,
        description="The LocalQueue Muster created for the namespace (once: deleting it is respected).",
    )


class Namespace(Object):
    """A team's space: its objects, its RoleBindings, its default LocalQueue and its quotas."""

    KIND: ClassVar[str] = "Namespace"
    kind: Literal["Namespace"] = Field(default="Namespace", description="Always Namespace.")
    spec: NamespaceSpec = Field(default_factory=NamespaceSpec, description="Nothing Muster acts on.")
    status: NamespaceStatus | None = Field(default=None, description="Set by Muster.")

    @model_validator(mode="after")
    def _name_label(self) -> Namespace:
        self.metadata.labels.setdefault(NAMESPACE_NAME_LABEL, self.metadata.name)
        return self

    def field_rules(self, path: str) -> list[FieldError]:
        name = self.metadata.name
        if len(name) > 63 or "." in name:
            return [
                FieldError(
                    child_path(path, "metadata", "name"),
                    "a namespace name must be a DNS-1123 label (no dots, at most 63 characters)",
                    name,
                )
            ]
        label = self.metadata.labels.get(NAMESPACE_NAME_LABEL)
        if label is not None and label != name:
            return [
                FieldError(
                    child_path(path, "metadata", "labels", NAMESPACE_NAME_LABEL),
                    "must be the namespace's name (Muster sets it)",
                    label,
                )
            ]
        return []


class ResourceQuotaSpec(MusterModel):
    hard: dict[str, NonNegativeQuantity] = Field(
        default_factory=dict,
        description="The most the namespace's admitted Workloads may hold: pods, requests.cpu (or cpu), "
        "requests.memory, requests.nvidia.com/gpu, any requests.<resource>.",
    )


class ResourceQuotaStatus(MusterModel):
    hard: dict[str, str] = Field(default_factory=dict, description="The limits being enforced.")
    used: dict[str, str] = Field(default_factory=dict, description="What admitted Workloads hold now.")


class ResourceQuota(Object):
    """Caps on what one namespace's admitted Workloads hold, on top of ClusterQueue quota."""

    KIND: ClassVar[str] = "ResourceQuota"
    kind: Literal["ResourceQuota"] = Field(default="ResourceQuota", description="Always ResourceQuota.")
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec, description="The limits.")
    status: ResourceQuotaStatus | None = Field(default=None, description="Usage, set by Muster.")

    def field_rules(self, path: str) -> list[FieldError]:
        errors = []
        for key in self.spec.hard:
            resource = key.removeprefix("requests.").removeprefix("limits.")
            if key in _POD_COUNT_KEYS or key.startswith("count/") or key.startswith("limits."):
                continue
            why = check_resource_name(resource)
            if why:
                errors.append(FieldError(child_path(path, "spec", "hard", key), why))
        return errors

    def field_warnings(self, path: str) -> list[FieldError]:
        return [
            FieldError(
                child_path(path, "spec", "hard", key),
                "accepted but not enforced: Muster enforces pods and requests of resources "
                "(limits, object counts and storage are not)",
            )
            for key in self.spec.hard
            if enforced_quota_resource(key) is None
        ]


def enforced_quota_resource(key: str) -> str | None:
    """The resource a ``spec.hard`` key caps as Muster enforces it: ``pods`` for the pod count,
    the resource name for ``requests.X`` (or a bare compute resource), None for keys Muster
    accepts but does not enforce."""
    if key in _POD_COUNT_KEYS:
        return "pods"
    if key.startswith(("limits.", "count/")) or key in ("storage", "requests.storage"):
        return None
    if key.endswith(("persistentvolumeclaims", "services", "secrets", "configmaps")):
        return None
    return key.removeprefix("requests.")
