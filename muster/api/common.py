"""Field types shared by several kinds: quantities, resource names and lists, label selectors,
taints, tolerations and node affinity (all in their Kubernetes shapes).

A quantity field accepts what Kubernetes accepts (``2``, ``"500m"``, ``"16Gi"``, a YAML
number) and is stored in Kubernetes' canonical form, so the wire form of an object does not
depend on how a user spelled a number.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from muster.api.base import (
    MusterModel,
    qualified_name_problem,
    validate_dns_label,
    validate_dns_subdomain,
    validate_labels,
)
from muster.api.errors import FieldError, child_path
from muster.api.labels import GPU, GPU_MEMORY
from muster.api.quantity import Quantity, QuantityError

__all__ = [
    "GPU",
    "GPU_MEMORY",
    "STANDARD_RESOURCES",
    "Affinity",
    "DNSLabel",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Labels",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NonNegativeQuantity",
    "ObjectName",
    "PreferredSchedulingTerm",
    "QuantityStr",
    "ResourceList",
    "ResourceName",
    "Taint",
    "Toleration",
    "check_resource_name",
    "parse_resources",
    "unhonoured",
]

# Resource names Kubernetes allows without a domain prefix; every other resource is an
# extended resource and must be written with its domain (nvidia.com/gpu, example.com/fpga).
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage", "storage", "pods")

_KNOWN_NAMES = (*STANDARD_RESOURCES, GPU, GPU_MEMORY)


def unhonoured(description: str, reason: str, **kwargs: Any) -> Any:
    """A Field that Kubernetes defines and Muster accepts, but cannot honour on every runtime.

    Validation emits one warning per such field a document sets, naming its path and ``reason``.
    """
    kwargs.setdefault("default", None)
    return Field(
        description=f"{description} Not honoured on every runtime: {reason}.",
        json_schema_extra={"unhonoured": reason},
        **kwargs,
    )


# Labels (and node selectors) checked as Kubernetes checks them.
Labels = Annotated[dict[str, str], AfterValidator(validate_labels)]

# A reference to another object by name (DNS-1123 subdomain), and a DNS-1123 label.
ObjectName = Annotated[str, AfterValidator(validate_dns_subdomain)]
DNSLabel = Annotated[str, AfterValidator(validate_dns_label)]


# -- quantities --------------------------------------------------------------------------


def _canonical(value: Any) -> str:
    try:
        return str(Quantity.parse(value))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _non_negative(value: str) -> str:
    if Quantity.parse(value) < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return value


# A Kubernetes quantity such as 2, 500m or 16Gi, stored in canonical form.
QuantityStr = Annotated[str, BeforeValidator(_canonical)]
NonNegativeQuantity = Annotated[QuantityStr, AfterValidator(_non_negative)]


# -- resource names and lists ------------------------------------------------------------


def check_resource_name(name: str) -> str | None:
    """Why ``name`` is not a valid resource name, or None when it is.

    Names follow Kubernetes: a qualified name (``cpu``, ``nvidia.com/gpu``,
    ``nvidia.com/mig-1g.10gb``); a name without a domain must be a standard resource or
    ``hugepages-<size>``.
    """
    why = qualified_name_problem(name)
    if why:
        return f"{name!r} is not a valid resource name: {why}"
    if "/" not in name and name not in STANDARD_RESOURCES and not name.startswith("hugepages-"):
        close = difflib.get_close_matches(name, _KNOWN_NAMES, n=1, cutoff=0.5)
        extra = f"; did you mean {close[0]}?" if close else ""
        if name == "gpu":
            extra = f"; did you mean {GPU}?"
        return f"unknown resource {name!r}: extended resources need a domain prefix (e.g. {GPU}){extra}"
    return None


def _resource_name(value: str) -> str:
    why = check_resource_name(value)
    if why:
        raise ValueError(why)
    return value


ResourceName = Annotated[str, AfterValidator(_resource_name)]
ResourceList = dict[ResourceName, NonNegativeQuantity]


def parse_resources(resources: dict[str, str]) -> dict[str, Quantity]:
    """A validated ResourceList as Quantities (the strings are already canonical)."""
    return {name: Quantity.parse(value) for name, value in resources.items()}


# -- selectors, taints, tolerations, affinity --------------------------------------------


class LabelSelectorRequirement(MusterModel):
    key: str = Field(description="The label key the requirement applies to.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: list[str] = Field(
        default_factory=list,
        description="Values for In and NotIn (at least one); must be empty for Exists and DoesNotExist.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        return _values_rule(self.operator, self.values, path, ("In", "NotIn"))


class LabelSelector(MusterModel):
    """A Kubernetes label selector; an empty selector ({}) matches everything."""

    match_labels: Labels = Field(
        default_factory=dict, description="Labels that must all be present with these values."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Requirements that must all hold."
    )


class Taint(MusterModel):
    key: str = Field(description="Taint key, e.g. nvidia.com/gpu.")
    value: str = Field(default="", description="Taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        description="What happens to pods that do not tolerate the taint."
    )
    time_added: str | None = Field(default=None, description="When a NoExecute taint was added.")


class Toleration(MusterModel):
    key: str = Field(default="", description="Taint key to tolerate; empty with Exists tolerates all.")
    operator: Literal["Equal", "Exists"] = Field(
        default="Equal", description="Equal matches key and value; Exists matches any value."
    )
    value: str = Field(default="", description="Taint value to match with Equal.")
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(
        default="", description="Taint effect to match; empty matches all effects."
    )
    toleration_seconds: int | None = Field(
        default=None, description="How long a NoExecute taint is tolerated once added."
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if not self.key and self.operator != "Exists":
            errors.append(
                FieldError(child_path(path, "operator"), "must be Exists when key is empty", self.operator)
            )
        if self.operator == "Exists" and self.value:
            errors.append(
                FieldError(child_path(path, "value"), "must be empty when operator is Exists", self.value)
            )
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            errors.append(
                FieldError(child_path(path, "tolerationSeconds"), "may only be set when effect is NoExecute")
            )
        return errors


class NodeSelectorRequirement(MusterModel):
    key: str = Field(description="The node label key (or field for matchFields).")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="How the key relates to the values."
    )
    values: list[str] = Field(
        default_factory=list,
        description="At least one value for In/NotIn, exactly one integer for Gt/Lt, none for Exists.",
    )

    def field_rules(self, path: str) -> list[FieldError]:
        errors = _values_rule(self.operator, self.values, path, ("In", "NotIn", "Gt", "Lt"))
        one_integer = len(self.values) == 1 and re.fullmatch(r"-?\d+", self.values[0])
        if self.operator in ("Gt", "Lt") and not errors and not one_integer:
            errors.append(
                FieldError(
                    child_path(path, "values"),
                    f"must be exactly one integer for {self.operator}",
                    self.values,
                )
            )
        return errors


class NodeSelectorTerm(MusterModel):
    match_expressions: list[NodeSelectorRequirement] = Field(
        default_factory=list, description="Requirements on node labels, all of which must hold."
    )
    match_fields: list[NodeSelectorRequirement] = Field(
        default_factory=list, description="Requirements on node fields (metadata.name), all must hold."
    )


class NodeSelector(MusterModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, description="Terms ORed together: a node matching any term qualifies."
    )


class PreferredSchedulingTerm(MusterModel):
    weight: int = Field(ge=1, le=100, description="Weight added to a node's score when it matches (1-100).")
    preference: NodeSelectorTerm = Field(description="The node term that earns the weight.")


class NodeAffinity(MusterModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, description="Nodes a pod may run on; a hard rule."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list, description="Nodes a pod prefers; a soft rule summed into node scores."
    )


class Affinity(MusterModel):
    node_affinity: NodeAffinity | None = Field(default=None, description="Rules on node labels.")
    pod_affinity: dict[str, Any] | None = unhonoured(
        "Kubernetes pod affinity terms.", "Muster places gangs by topology requests instead"
    )
    pod_anti_affinity: dict[str, Any] | None = unhonoured(
        "Kubernetes pod anti-affinity terms.",
        "Muster spreads pods with the Workload's podAntiAffinity flag instead",
    )


def _values_rule(
    operator: str, values: list[str], path: str, needs_values: tuple[str, ...]
) -> list[FieldError]:
    where = child_path(path, "values")
    if operator in needs_values and not values:
        return [FieldError(where, f"must not be empty when operator is {operator}")]
    if operator not in needs_values and values:
        return [FieldError(where, f"must be empty when operator is {operator}", values)]
    return []
