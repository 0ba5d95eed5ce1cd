"""The RBAC matrix: every verb on every kind, in both team namespaces and at the cluster scope,
for alice (edit in team-a), bob (edit in team-b) and val (view everywhere), with what the
built-in roles should allow written out here, apart from the server's code.

A channel (REST, dashboard, CLI) performs one cell and says whether it succeeded; the matrix
counts unauthorised successes and authorised failures, and checks that every successful list
holds only what the user may see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from muster.api.registry import KindInfo, kinds
from muster.sdk.client import Client
from muster.testing.tenancy import TEAMS, sample

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
READ = frozenset({"get", "list", "watch"})
ALL = frozenset(VERBS)
TEAM_OF = {"alice": "team-a", "bob": "team-b"}

# What `edit` grants in its namespace, and `view` everywhere (docs/access-control.md).
EDIT: dict[str, frozenset[str]] = {
    "trainingjobs": ALL,
    "workflows": ALL,
    "experiments": ALL,
    "inferenceservices": ALL,
    "localqueues": ALL,
    "cacheentries": ALL,
    "serviceaccounts": ALL,
    "pods": READ | {"delete", "deletecollection"},
    "workloads": READ,
    "events": READ,
    "trials": READ,
    "trialmetrics": READ,
    "resourcequotas": READ,
}
VIEW: dict[str, frozenset[str]] = {plural: READ for plural in EDIT}
# muster:cluster-info, bound to every signed-in identity.
EVERYONE: dict[str, frozenset[str]] = {
    plural: READ
    for plural in ("nodes", "clusterqueues", "cohorts", "resourceflavors", "topologies", "priorityclasses")
}


def expected(user: str, plural: str, verb: str, namespace: str | None, name: str) -> bool:
    """Whether ``user`` may ``verb`` ``plural`` (object ``name``) in ``namespace``."""
    if plural in EVERYONE:
        return verb in EVERYONE[plural]
    if plural == "namespaces":
        if user == "val":
            return verb in READ
        # edit grants get on the namespace it is bound in; a list shows that namespace only.
        return verb in ("list", "watch") or (verb == "get" and name == TEAM_OF[user])
    if namespace is None:
        return False  # roles, bindings of the cluster: cluster-admin only
    if user == "val":
        return verb in VIEW.get(plural, frozenset())
    return namespace == TEAM_OF[user] and verb in EDIT.get(plural, frozenset())


def visible(user: str, plural: str, namespace: str | None, obj_namespace: str | None, name: str) -> bool:
    """Whether a listed object may be shown to ``user``."""
    if plural == "namespaces":
        return user == "val" or name == TEAM_OF[user]
    if obj_namespace is None:
        return True
    return user == "val" or obj_namespace == TEAM_OF[user]


@dataclass(frozen=True)
class Cell:
    user: str
    info: KindInfo
    verb: str
    namespace: str | None
    name: str
    selector: str = ""  # deletecollection: the label of this user's victims

    @property
    def expected(self) -> bool:
        return expected(self.user, self.info.plural, self.verb, self.namespace, self.name)

    def __str__(self) -> str:
        where = self.namespace or "cluster"
        return f"{self.user} {self.verb} {self.info.plural}/{self.name} in {where}"


@dataclass
class Outcome:
    """What one channel's run of the matrix came to."""

    cells: int = 0
    allowed: int = 0
    unauthorised_successes: list[str] = field(default_factory=list)
    authorised_failures: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    wrong_denials: list[str] = field(default_factory=list)  # refused, but not with 403 Forbidden

    def summary(self, channel: str) -> str:
        return (
            f"{channel}: {self.cells} checks ({self.allowed} allowed, {self.cells - self.allowed} denied): "
            f"{len(self.unauthorised_successes)} unauthorised successes, "
            f"{len(self.authorised_failures)} authorised failures, {len(self.leaks)} leaked objects, "
            f"{len(self.wrong_denials)} denials without 403"
        )


# A channel does a cell: (succeeded, detail); for list/watch the names it returned, as
# (namespace, name) pairs, when it can read them.
Perform = Callable[[Cell, dict[str, Any] | None], tuple[bool, str, list[tuple[str | None, str]] | None]]


class Matrix:
    """The cells, the objects they act on (made by the admin), and the run."""

    def __init__(
        self, admin: Client, users: tuple[str, ...] = ("alice", "bob", "val"), tag: str = "m"
    ) -> None:
        self.admin = admin
        self.users = users
        self.tag = tag

    def places(self) -> list[tuple[KindInfo, str | None]]:
        out: list[tuple[KindInfo, str | None]] = []
        for info in kinds():
            if info.namespaced:
                out += [(info, ns) for ns in TEAMS]
            else:
                out.append((info, None))
        return out

    def name(self, info: KindInfo, role: str, user: str = "") -> str:
        if info.kind == "Namespace" and role == "target":
            return ""  # the team namespaces themselves, chosen per cell
        return "-".join(p for p in (self.tag, role, user, info.singular) if p)

    def prepare(self) -> None:
        """The objects every cell needs: a target per kind and place, and per user a victim
        for delete and one for deletecollection (labelled for the user)."""
        docs = []
        for info, ns in self.places():
            if info.kind != "Namespace":
                docs.append(sample(info.kind, self.name(info, "target"), ns))
            for user in self.users:
                docs.append(sample(info.kind, self.name(info, "del", user), ns))
                docs.append(
                    sample(
                        info.kind, self.name(info, "dc", user), ns, labels={"matrix-dc": f"{self.tag}-{user}"}
                    )
                )
        self.admin.apply(docs)
        self.targets = {}
        for d in docs:
            meta = d["metadata"]
            if "-target-" in meta["name"]:
                key = (d["kind"], meta.get("namespace"), meta["name"])
                self.targets[key] = self.admin.get(d["kind"], meta["name"], meta.get("namespace"))

    def cells(self) -> list[Cell]:
        out = []
        for user in self.users:
            for info, ns in self.places():
                for verb in VERBS:
                    name = self._name_for(info, verb, user, ns)
                    out.append(Cell(user, info, verb, ns, name, f"matrix-dc={self.tag}-{user}"))
                if info.kind == "Namespace":  # get/update/patch of the other team's namespace too
                    for other in TEAMS:
                        for verb in ("get", "update", "patch"):
                            out.append(Cell(user, info, verb, None, other))
        return [c for c in out if c.name or c.verb in ("list", "watch", "deletecollection")]

    def run(self, perform: Perform) -> Outcome:
        result = Outcome()
        for cell in self.cells():
            target = None
            if cell.verb == "update":
                target = self.targets.get((cell.info.kind, cell.namespace, cell.name))
                if target is None:  # a team namespace
                    target = self.admin.get(cell.info.kind, cell.name, cell.namespace)
            ok, detail, listed = perform(cell, target)
            result.cells += 1
            if not ok and not cell.expected and "forbidden" not in detail.lower():
                result.wrong_denials.append(f"{cell}: {detail}")
            result.allowed += cell.expected
            if ok and not cell.expected:
                result.unauthorised_successes.append(f"{cell}: {detail}")
            elif not ok and cell.expected:
                result.authorised_failures.append(f"{cell}: {detail}")
            for obj_ns, obj_name in listed or ():
                if (cell.namespace is not None and obj_ns != cell.namespace) or not visible(
                    cell.user, cell.info.plural, cell.namespace, obj_ns, obj_name
                ):
                    result.leaks.append(f"{cell}: returned {obj_ns}/{obj_name}")
        return result

    def _name_for(self, info: KindInfo, verb: str, user: str, ns: str | None) -> str:
        if verb == "create":
            return self.name(info, "new", user)
        if verb == "delete":
            return self.name(info, "del", user)
        if verb in ("list", "watch", "deletecollection"):
            return ""
        return self.name(info, "target")
