"""PriorityClass: a named priority value, exactly as ``scheduling.k8s.io/v1`` defines it."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import Object
from muster.api.errors import FieldError, child_path

__all__ = ["HIGHEST_USER_PRIORITY", "PriorityClass"]

# Kubernetes reserves values above one billion for system-* classes.
HIGHEST_USER_PRIORITY = 1_000_000_000
_SYSTEM_PRIORITY_MAX = 2_000_001_000


class PriorityClass(Object):
    """Maps a name to an integer priority; higher values are scheduled first and may preempt."""

    KIND: ClassVar[str] = "PriorityClass"
    kind: Literal["PriorityClass"] = Field(default="PriorityClass", description="Always PriorityClass.")
    value: int = Field(
        ge=-2_147_483_648,
        le=_SYSTEM_PRIORITY_MAX,
        description="The priority; workloads naming this class get it. At most 1000000000 "
        "unless the name starts with system-.",
    )
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority",
        description="Never: workloads of this class wait instead of preempting lower priorities.",
    )
    global_default: bool = Field(
        default=False, description="Use this class for workloads that name none (at most one class)."
    )
    description: str = Field(default="", description="When to use this class.")

    def field_rules(self, path: str) -> list[FieldError]:
        if self.value > HIGHEST_USER_PRIORITY and not self.metadata.name.startswith("system-"):
            return [
                FieldError(
                    child_path(path, "value"),
                    f"must be <= {HIGHEST_USER_PRIORITY} (higher values are reserved for system- classes)",
                    self.value,
                )
            ]
        return []
