"""The names of every kind Muster serves, and how a name a user types resolves to one.

Plain data and the standard library only: the CLI and the SDK client resolve ``tj``,
``trainingjobs`` or ``TrainingJob`` on every call and must not pay for the pydantic models
(:mod:`muster.api.registry` pairs each kind here with its model, and a test keeps the two in
step).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["API_VERSION", "GROUP", "Kind", "UnknownKind", "kinds", "lookup"]

GROUP = "muster.dev"
API_VERSION = f"{GROUP}/v1"


@dataclass(frozen=True)
class Kind:
    """What the layers above need to know about a kind's names and shape."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    has_status: bool


class UnknownKind(LookupError):
    """A kind name that is not served; the message lists the close matches."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        close = difflib.get_close_matches(name.lower(), candidates, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"unknown kind {name!r}{hint} (docs/api.md lists every kind)")
        self.name = name
        self.close_matches = close


def _k(kind: str, plural: str, short: tuple[str, ...], namespaced: bool, status: bool = True) -> Kind:
    return Kind(kind, plural, kind.lower(), short, namespaced, status)


# In a stable order (`muster get` and the docs list them so).
KINDS: tuple[Kind, ...] = (
    _k("Node", "nodes", ("no",), namespaced=False),
    _k("ResourceFlavor", "resourceflavors", ("rf", "flavor", "flavors"), namespaced=False, status=False),
    _k("Topology", "topologies", (), namespaced=False, status=False),
    _k("ClusterQueue", "clusterqueues", ("cq",), namespaced=False),
    _k("Cohort", "cohorts", (), namespaced=False),
    _k("LocalQueue", "localqueues", ("lq", "queue", "queues"), namespaced=True),
    _k("PriorityClass", "priorityclasses", ("pc",), namespaced=False, status=False),
    _k("TrainingJob", "trainingjobs", ("tj",), namespaced=True),
    _k("Workflow", "workflows", ("wf",), namespaced=True),
    _k("CacheEntry", "cacheentries", ("ce",), namespaced=True, status=False),
    _k("Workload", "workloads", ("wl",), namespaced=True),
    _k("Pod", "pods", ("po",), namespaced=True),
    _k("Event", "events", ("ev",), namespaced=True, status=False),
    _k("Role", "roles", (), namespaced=True, status=False),
    _k("RoleBinding", "rolebindings", (), namespaced=True, status=False),
    _k("ServiceAccount", "serviceaccounts", ("sa",), namespaced=True, status=False),
    _k("ClusterRole", "clusterroles", (), namespaced=False, status=False),
    _k("ClusterRoleBinding", "clusterrolebindings", (), namespaced=False, status=False),
)

_BY_NAME: dict[str, Kind] = {}
for _entry in KINDS:
    for _name in (_entry.kind, _entry.plural, _entry.singular, *_entry.short_names):
        _BY_NAME[_name.lower()] = _entry


def kinds() -> list[Kind]:
    """Every native kind, in a stable order."""
    return list(KINDS)


def lookup(name: str) -> Kind:
    """The kind a user means by ``name``: a Kind, plural, singular or short name, any case."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        raise UnknownKind(name, sorted(_BY_NAME))
    return found
