"""Event: something that happened to an object, in the shape of Kubernetes core/v1 Event.

Events are created by controllers and aggregated by ``muster.store.events.record_event``
(the same type, reason and object bump ``count`` and ``lastTimestamp``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from muster.api.base import API_VERSION, MusterModel, Object

__all__ = ["Event", "EventSource", "ObjectReference"]


class ObjectReference(MusterModel):
    api_version: str = Field(default=API_VERSION, description="API version of the object.")
    kind: str = Field(description="Kind of the object, e.g. TrainingJob.")
    namespace: str | None = Field(default=None, description="Namespace; absent for cluster kinds.")
    name: str = Field(description="Name of the object.")
    uid: str | None = Field(default=None, description="UID of the object the event is about.")
    resource_version: str | None = Field(default=None, description="Version of the object then.")
    field_path: str | None = Field(default=None, description="Part of the object, e.g. spec.containers[0].")


class EventSource(MusterModel):
    component: str = Field(default="", description="What reported it, e.g. trainingjob-controller.")
    host: str = Field(default="", description="The host it was reported on.")


class Event(Object):
    """A record of a lifecycle transition, a warning or a decision about an object."""

    KIND: ClassVar[str] = "Event"
    kind: Literal["Event"] = Field(default="Event", description="Always Event.")
    involved_object: ObjectReference = Field(description="The object this event is about.")
    related: ObjectReference | None = Field(
        default=None,
        description="The object that owns the one this event is about (its controller, e.g. the "
        "TrainingJob of a pod), as events.k8s.io/v1's related: an owner's history keeps the events "
        "of its pods after they are replaced, and never takes those of an earlier owner's pods.",
    )
    type: Literal["Normal", "Warning"] = Field(default="Normal", description="Normal or Warning.")
    reason: str = Field(description="Short CamelCase reason, e.g. Preempted, Admitted.")
    message: str = Field(default="", description="Human-readable description.")
    count: int = Field(default=1, ge=1, description="How many times this event has happened.")
    first_timestamp: str | None = Field(default=None, description="When it first happened (UTC).")
    last_timestamp: str | None = Field(default=None, description="When it last happened (UTC).")
    source: EventSource = Field(default_factory=EventSource, description="Who reported it.")
