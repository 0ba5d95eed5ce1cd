"""Base models shared by every kind: ObjectMeta, Condition and the two model bases.

Field names are snake_case in Python and camelCase on the wire (YAML, JSON, REST), as in
Kubernetes. Serialise with :meth:`MusterModel.to_dict`, which uses the aliases and drops
unset optional fields, so stored objects look like the manifests users wrote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from muster.api.conditions import wire_time
from muster.api.kinds import API_VERSION, GROUP

__all__ = [
    "API_VERSION",
    "DNS_LABEL_PATTERN",
    "DNS_SUBDOMAIN_PATTERN",
    "GROUP",
    "Condition",
    "ForeignModel",
    "MusterModel",
    "Object",
    "ObjectMeta",
    "OwnerReference",
    "controller_ref",
    "now_iso",
    "qualified_name_problem",
    "validate_dns_label",
    "validate_dns_subdomain",
    "validate_labels",
]


# As regular expressions both Python and JSON Schema (the OpenAPI document) read alike.
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def now_iso() -> str:
    """The current UTC time as RFC 3339 with a Z suffix (the only clock read in api/)."""
    return wire_time(datetime.now(UTC))


def validate_dns_label(value: str) -> str:
    """Kubernetes DNS-1123 label: lower-case alphanumerics and '-', at most 63 characters."""
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(
            "must be a DNS-1123 label: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )
    return value


def validate_dns_subdomain(value: str) -> str:
    """Kubernetes DNS-1123 subdomain: labels joined by '.', at most 253 characters."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise ValueError(
            "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters"
        )
    return value


def qualified_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a Kubernetes qualified name (``[prefix/]name``, as label
    keys and resource names are), or None."""
    prefix, slash, base = name.rpartition("/")
    if not base or len(base) > 63 or not _NAME_PART.fullmatch(base):
        return (
            "the name part must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a "
            "letter or digit"
        )
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "the part before '/' must be a DNS subdomain such as example.com"
    return None


def validate_labels(labels: dict[str, str]) -> dict[str, str]:
    """Kubernetes label rules: keys are qualified names; values are empty or at most 63
    letters, digits, '-', '_' or '.', starting and ending with a letter or digit."""
    for key, value in labels.items():
        why = qualified_name_problem(key)
        if why:
            raise ValueError(f"label key {key!r} is invalid: {why}")
        if value and (len(value) > 63 or not _NAME_PART.fullmatch(value)):
            raise ValueError(
                f"label {key}={value!r} is invalid: a value is at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit"
            )
    return labels


def _validate_annotation_keys(annotations: dict[str, str]) -> dict[str, str]:
    for key in annotations:
        why = qualified_name_problem(key)
        if why:
            raise ValueError(f"annotation key {key!r} is invalid: {why}")
    return annotations


class MusterModel(BaseModel):
    """Base of every user-facing Muster model: unknown fields are errors, camelCase on the wire."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_assignment=False,
        use_enum_values=True,
        # Validators are built at a model's first use, not at import: a process pays only for
        # the kinds it handles (about half a second less CPU to start a server).
        defer_build=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, unset optional fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    @model_serializer(mode="wrap")
    def _omit_unset_empty(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        # An empty list or map the user never wrote is noise in the wire form; one the user did
        # write is kept, because some are meaningful (a namespaceSelector of {} selects all).
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields_set = self.model_fields_set
        for name, field in type(self).model_fields.items():
            if name in fields_set:
                continue
            key = (field.alias or name) if info.by_alias else name
            value = data.get(key)
            if isinstance(value, (list, dict)) and not value:
                del data[key]
        return data


class ForeignModel(MusterModel):
    """Base for models of foreign kinds (PyTorchJob, Kueue, PodSpec): unknown fields are kept.

    Converters read ``model_extra`` to report each kept-but-ignored field as a warning.
    """

    model_config = ConfigDict(extra="allow")


class OwnerReference(MusterModel):
    api_version: str = Field(default=API_VERSION, description="API version of the owner.")
    kind: str = Field(description="Kind of the owner, e.g. TrainingJob.")
    name: str = Field(description="Name of the owner (same namespace).")
    uid: str = Field(default="", description="UID of the owner; empty matches any owner of that name.")
    controller: bool = Field(default=True, description="Whether the owner manages this object.")


def controller_ref(obj: Mapping[str, Any]) -> dict[str, str]:
    """Who ``obj`` belongs to, as ``{kind, name, uid}``: its controller (the ownerReference with
    ``controller: true``, else its first one), or the object itself when nothing owns it. A
    job's pods are re-created under the same names on every run; this names the job they
    ran for, so what outlives a pod (its events, its logs) is never taken for the next
    object of the same name."""
    meta = obj.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    owner = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if owner is None:
        return {
            "kind": str(obj.get("kind") or ""),
            "name": str(meta.get("name") or ""),
            "uid": str(meta.get("uid") or ""),
        }
    return {
        "kind": str(owner.get("kind") or ""),
        "name": str(owner.get("name") or ""),
        "uid": str(owner.get("uid") or ""),
    }


class ObjectMeta(MusterModel):
    """Standard object metadata. Server-set fields are ignored on create and kept on update."""

    # The pattern declares the rule in the OpenAPI document (empty: a PUT takes the name from its
    # URL); the validator below checks it, with a message that says more than "does not match".
    name: Annotated[
        str,
        Field(
            description="Unique name within the namespace (DNS-1123 subdomain).",
            json_schema_extra={"pattern": f"^({DNS_SUBDOMAIN_PATTERN[1:-1]})?$", "maxLength": 253},
        ),
    ]
    namespace: str | None = Field(
        default=None, description="Namespace of a namespaced object; 'default' when omitted."
    )
    uid: str | None = Field(default=None, description="Server-assigned unique id.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels for selection.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Free-form annotations.")
    resource_version: str | None = Field(
        default=None, description="Opaque version for optimistic concurrency; from one global revision."
    )
    generation: int | None = Field(default=None, description="Incremented on every spec change.")
    creation_timestamp: str | None = Field(default=None, description="When the object was created (UTC).")
    deletion_timestamp: str | None = Field(default=None, description="When deletion was requested (UTC).")
    owner_references: list[OwnerReference] = Field(
        default_factory=list, description="Objects that own this one; deleted with their owner."
    )
    finalizers: list[str] = Field(default_factory=list, description="Deletion blockers.")

    @field_validator("name")
    @classmethod
    def _name_rule(cls, v: str) -> str:
        return validate_dns_subdomain(v)

    @field_validator("namespace")
    @classmethod
    def _ns_rule(cls, v: str | None) -> str | None:
        return None if v is None else validate_dns_label(v)

    @field_validator("labels")
    @classmethod
    def _labels_rule(cls, v: dict[str, str]) -> dict[str, str]:
        return validate_labels(v)

    @field_validator("annotations")
    @classmethod
    def _annotations_rule(cls, v: dict[str, str]) -> dict[str, str]:
        return _validate_annotation_keys(v)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for key in ("labels", "annotations", "ownerReferences", "finalizers"):
            if not out.get(key):
                out.pop(key, None)
        return out


class Condition(MusterModel):
    """A status condition, as in Kubernetes."""

    type: str = Field(description="Condition type, e.g. Admitted, Running, Succeeded.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="Machine-readable CamelCase reason.")
    message: str = Field(default="", description="Human-readable explanation.")
    last_transition_time: str | None = Field(default=None, description="When the status last changed.")
    observed_generation: int | None = Field(default=None, description="Spec generation this reflects.")


class Object(MusterModel):
    """Base of every top-level kind. Subclasses set ``KIND`` and narrow ``spec``/``status``."""

    KIND: ClassVar[str] = ""
    api_version: str = Field(default=API_VERSION, description=f"Always {API_VERSION}.")
    kind: str = Field(description="The kind of object.")
    metadata: ObjectMeta = Field(description="Standard object metadata.")

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace
