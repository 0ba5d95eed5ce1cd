"""The provider contract: what the capacity controller asks of "where nodes come from".

Implement :class:`NodeProvider` in one file to bring your cloud (docs/capacity.md has a
complete example): ``create`` a machine for a :class:`NodeRequest`, ``get``/``list`` what you
made, ``delete`` one. The controller calls these from one thread, with the NodeClaim's name
(``request.claim``) as the idempotency key, and it may call ``create`` again for a claim
after a restart: return the machine you already made for that claim instead of a second one.
A call that cannot succeed now raises :class:`ProviderError`; the controller keeps the work
pending with your message in ``muster why`` and retries with backoff. No call may block for
long (a cloud API call, a few seconds at most): report a machine that is still booting as
``pending`` and let the controller ask again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from muster.runtime.base import MachineShape

__all__ = ["Instance", "Interruption", "NodeProvider", "NodeRequest", "ProviderError"]


class ProviderError(Exception):
    """A provider call that failed; the message is shown to users as it is (say what failed and,
    if you know, what would fix it)."""


@dataclass(frozen=True)
class NodeRequest(MachineShape):
    """One machine of the given shape to make, as the NodeClaim ``claim`` of pool ``pool`` asks
    for it.

    ``labels`` and ``taints`` are what the Node must carry (the pool's template plus
    ``muster.dev/nodepool``, ``muster.dev/nodeclaim``, ``muster.dev/capacity-type`` and
    ``muster.dev/price-per-hour``); a provider that names its machines itself registers the
    node with those labels so the controller recognises it. ``ready_in_seconds`` is the pool's
    provisioning delay; ``config`` its ``providerConfig``.
    """

    claim: str
    pool: str
    capacity_type: str
    price_per_hour: float
    ready_in_seconds: float = 0.0
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Interruption:
    """A spot notice from the cloud, shaped like AWS's instance-action (``action``, ``time``):
    the machine is taken back at ``time`` (epoch seconds)."""

    time: float
    action: str = "terminate"


@dataclass(frozen=True)
class Instance:
    """A machine a provider made for a claim.

    ``state``: ``pending`` (booting), ``running`` (up; its Node may take a moment to register),
    ``failed`` (it will never come up: ``message`` says why), ``terminated`` (gone).
    ``node_name``: the Node it registers as, when the provider knows it (else the controller
    matches the Node by the ``muster.dev/nodeclaim`` label, or by the pool's labels).
    ``interruption``: a spot notice the cloud gave for it, if any.
    """

    claim: str
    provider_id: str
    state: Literal["pending", "running", "failed", "terminated"]
    node_name: str = ""
    message: str = ""
    interruption: Interruption | None = None


@runtime_checkable
class NodeProvider(Protocol):
    """Makes and removes machines (module docstring)."""

    name: str

    def create(self, request: NodeRequest) -> Instance:
        """Start making the machine and return at once (``pending``); for a claim you already
        made a machine for, return that one. Raises :class:`ProviderError`."""
        ...

    def get(self, claim: str) -> Instance | None:
        """The machine of ``claim``, or None when there is none (never made, or deleted)."""
        ...

    def list(self) -> list[Instance]:
        """Every machine you made that still exists (the controller removes those whose claim is
        gone, so a crash between your create and the claim's update leaves nothing behind)."""
        ...

    def delete(self, claim: str) -> None:
        """Give the machine of ``claim`` back; deleting one that is gone does nothing."""
        ...
