"""The RBAC authorizer: Kubernetes' rules over Role, ClusterRole, RoleBinding and
ClusterRoleBinding objects (wire dicts). Pure: built from the objects, asked about a user
and :class:`Attributes`, no I/O.

* A ClusterRoleBinding grants its ClusterRole's rules everywhere: in every namespace, on
  cluster-scoped resources and on non-resource URLs.
* A RoleBinding grants its Role's (same namespace) or ClusterRole's rules in its namespace
  only; non-resource rules bound that way grant nothing.
* A rule matches when its verbs, API groups (any of the names the resource has:
  :func:`~muster.server.access.attributes.identities`) and resources (``*``, ``res``,
  ``res/sub`` or ``*/sub``) match and, when it lists ``resourceNames``, the request names one
  of them (a create or a list names none, so such a rule never allows them). Non-resource
  URLs match exactly or by a trailing ``*``.
* Subjects: ``User`` by name, ``Group`` by any of the user's groups, ``ServiceAccount`` as
  ``system:serviceaccount:NS:NAME`` (NS defaulting to a RoleBinding's namespace). A binding
  whose role does not exist grants nothing. The group ``system:masters`` is allowed
  everything without looking (the bootstrap admin).

Rules are compiled once per identity (a user and its groups) and kept until the policy
changes, so a decision is a few set lookups however many bindings exist.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from muster.server.access.attributes import SERVICE_ACCOUNT_PREFIX, Attributes, UserInfo, identities

__all__ = ["Authorizer", "CompiledRule", "Decision", "Grants", "Visibility", "compile_rule"]

Obj = Mapping[str, Any]
_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """One PolicyRule as sets, with where it came from (for messages and reviews)."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]
    names: frozenset[str]
    urls: frozenset[str]
    url_prefixes: tuple[str, ...]
    source: str

    def allows_verb(self, verb: str) -> bool:
        return verb in self.verbs or "*" in self.verbs

    def matches_resource(self, attrs: Attributes) -> bool:
        """Verb, group and resource match (names aside)."""
        if not self.resources or not self.allows_verb(attrs.verb):
            return False
        res, sub = attrs.resource, attrs.subresource
        any_group = "*" in self.groups
        for group, name in identities(attrs.group, res):
            if not (any_group or group in self.groups):
                continue
            if "*" in self.resources:
                return True
            if (f"{name}/{sub}" if sub else name) in self.resources:
                return True
            if sub and f"*/{sub}" in self.resources:
                return True
        return False

    def matches(self, attrs: Attributes) -> bool:
        if not attrs.is_resource:
            return self.matches_url(attrs.verb, attrs.path)
        if not self.matches_resource(attrs):
            return False
        return not self.names or attrs.name in self.names

    def matches_url(self, verb: str, path: str) -> bool:
        if not (self.urls or self.url_prefixes) or not self.allows_verb(verb):
            return False
        return "*" in self.urls or path in self.urls or path.startswith(self.url_prefixes)

    def to_dict(self) -> dict[str, list[str]]:
        if self.urls or self.url_prefixes:
            return {
                "verbs": sorted(self.verbs),
                "nonResourceURLs": sorted([*self.urls, *(p + "*" for p in self.url_prefixes)]),
            }
        out = {
            "verbs": sorted(self.verbs),
            "apiGroups": sorted(self.groups),
            "resources": sorted(self.resources),
        }
        if self.names:
            out["resourceNames"] = sorted(self.names)
        return out


def compile_rule(rule: Obj, source: str) -> CompiledRule:
    """A wire-form PolicyRule as a :class:`CompiledRule`."""
    urls = [u for u in rule.get("nonResourceURLs") or () if u != "*" and u.endswith("*")]
    return CompiledRule(
        verbs=frozenset(rule.get("verbs") or ()),
        groups=frozenset(rule.get("apiGroups") or ()),
        resources=frozenset(rule.get("resources") or ()),
        names=frozenset(rule.get("resourceNames") or ()),
        urls=frozenset(u for u in rule.get("nonResourceURLs") or () if u not in urls),
        url_prefixes=tuple(u[:-1] for u in urls),
        source=source,
    )


@dataclass(frozen=True)
class Decision:
    """The answer for one request: allowed or not, and why (the rule's source, or what is missing)."""

    allowed: bool
    reason: str


@dataclass(frozen=True)
class Visibility:
    """What a list or watch may return. ``everything``: no filter. Otherwise objects of the
    ``namespaces`` (any name) and the ``names`` per namespace (``None``: any namespace; the key
    of cluster-scoped objects too)."""

    everything: bool = False
    namespaces: frozenset[str] = frozenset()
    names: Mapping[str | None, frozenset[str]] | None = None

    @property
    def nothing(self) -> bool:
        return not self.everything and not self.namespaces and not self.names

    def allows(self, namespace: str | None, name: str) -> bool:
        if self.everything or (namespace is not None and namespace in self.namespaces):
            return True
        if not self.names:
            return False
        return name in self.names.get(None, ()) or (
            namespace is not None and name in self.names.get(namespace, ())
        )


class Grants:
    """The rules one identity holds: everywhere (from ClusterRoleBindings) and per namespace."""

    __slots__ = ("cluster", "namespaced")

    def __init__(self) -> None:
        self.cluster: list[CompiledRule] = []
        self.namespaced: dict[str, list[CompiledRule]] = {}

    def rules_in(self, namespace: str | None) -> list[CompiledRule]:
        if namespace is None:
            return self.cluster
        local = self.namespaced.get(namespace)
        return self.cluster + local if local else self.cluster


_EVERYTHING = Visibility(everything=True)


class Authorizer:
    """Decisions over one version of the RBAC objects; build a new one when they change."""

    def __init__(
        self,
        roles: Iterable[Obj] = (),
        cluster_roles: Iterable[Obj] = (),
        bindings: Iterable[Obj] = (),
        cluster_bindings: Iterable[Obj] = (),
    ) -> None:
        self._roles: dict[tuple[str, str], list[CompiledRule]] = {}
        for role in roles:
            ns, name = role["metadata"].get("namespace") or "default", role["metadata"]["name"]
            src = f"Role {ns}/{name}"
            self._roles[(ns, name)] = [compile_rule(r, src) for r in role.get("rules") or ()]
        self._cluster_roles: dict[str, list[CompiledRule]] = {}
        for role in cluster_roles:
            name = role["metadata"]["name"]
            self._cluster_roles[name] = [
                compile_rule(r, f"ClusterRole {name}") for r in role.get("rules") or ()
            ]
        # subject key -> [(namespace or None for cluster-wide, binding description, roleRef)]
        self._by_subject: dict[tuple[str, ...], list[tuple[str | None, str, Obj]]] = {}
        for b in cluster_bindings:
            self._index(b, None)
        for b in bindings:
            self._index(b, b["metadata"].get("namespace") or "default")
        self._grants: dict[tuple[str, tuple[str, ...]], Grants] = {}
        self._lock = threading.Lock()

    # -- decisions ------------------------------------------------------------------------

    def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        """Whether ``user`` may do ``attrs``; the reason names the granting binding and role, or
        the rule that is missing."""
        if user.is_admin:
            return Decision(True, "the group system:masters is allowed everything")
        grants = self.grants(user)
        rules = grants.cluster if not attrs.is_resource else grants.rules_in(attrs.namespace)
        for rule in rules:
            if rule.matches(attrs):
                return Decision(True, f"allowed by {rule.source}")
        return Decision(False, missing_rule_text(attrs))

    def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        return self.authorize(user, attrs).allowed

    def visibility(self, user: UserInfo, attrs: Attributes, namespaced_kind: bool) -> Visibility:
        """What a list or watch (``attrs`` without a name) may return to ``user``: everything
        when allowed outright; else, for a request across namespaces (``attrs.namespace``
        None on a namespaced kind), the namespaces where it is allowed; and the names that
        rules with ``resourceNames`` allow."""
        if user.is_admin:
            return _EVERYTHING
        grants = self.grants(user)
        scoped = grants.rules_in(attrs.namespace)
        names: dict[str | None, set[str]] = {}
        for rule in scoped:
            if rule.matches_resource(attrs):
                if not rule.names:
                    return _EVERYTHING
                names.setdefault(attrs.namespace, set()).update(rule.names)
        namespaces: set[str] = set()
        if namespaced_kind and attrs.namespace is None:
            for ns, rules in grants.namespaced.items():
                for rule in rules:
                    if rule.matches_resource(attrs):
                        if rule.names:
                            names.setdefault(ns, set()).update(rule.names)
                        else:
                            namespaces.add(ns)
                            break
        return Visibility(
            namespaces=frozenset(namespaces), names={k: frozenset(v) for k, v in names.items()} or None
        )

    def rules_for(self, user: UserInfo, namespace: str | None) -> list[CompiledRule]:
        """Every rule that applies to ``user`` in ``namespace`` (None: cluster-wide only), as
        a SelfSubjectRulesReview lists them."""
        if user.is_admin:
            return [compile_rule({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, "system:masters")]
        return list(self.grants(user).rules_in(namespace))

    def role_rules(self, kind: str, name: str, namespace: str | None) -> list[CompiledRule] | None:
        """The rules of a Role (in ``namespace``) or ClusterRole; None when it does not exist."""
        if kind == "ClusterRole":
            return self._cluster_roles.get(name)
        return self._roles.get((namespace or "default", name))

    def grants(self, user: UserInfo) -> Grants:
        key = (user.name, user.groups)
        grants = self._grants.get(key)
        if grants is None:
            grants = self._compile(user)
            with self._lock:
                if len(self._grants) >= _CACHE_LIMIT:
                    self._grants.clear()
                self._grants[key] = grants
        return grants

    # -- internals ------------------------------------------------------------------------

    def _index(self, binding: Obj, namespace: str | None) -> None:
        kind = "RoleBinding" if namespace is not None else "ClusterRoleBinding"
        name = binding["metadata"]["name"]
        where = f"{kind} {namespace}/{name}" if namespace is not None else f"{kind} {name}"
        ref = binding.get("roleRef") or {}
        for s in binding.get("subjects") or ():
            if s.get("kind") == "ServiceAccount":
                key: tuple[str, ...] = (
                    "User",
                    f"{SERVICE_ACCOUNT_PREFIX}{s.get('namespace') or namespace or 'default'}:{s.get('name')}",
                )
            else:
                key = (str(s.get("kind")), str(s.get("name")))
            self._by_subject.setdefault(key, []).append((namespace, where, ref))

    def _compile(self, user: UserInfo) -> Grants:
        grants = Grants()
        keys = [("User", user.name), *(("Group", g) for g in user.groups)]
        for key in keys:
            for namespace, where, ref in self._by_subject.get(key, ()):
                rules = self._rules_of(ref, namespace)
                if not rules:
                    continue
                source = f"{where} ({ref.get('kind')} {ref.get('name')})"
                bound = [
                    CompiledRule(r.verbs, r.groups, r.resources, r.names, r.urls, r.url_prefixes, source)
                    for r in rules
                ]
                if namespace is None:
                    grants.cluster.extend(bound)
                else:
                    # Non-resource URLs are granted by ClusterRoleBindings only.
                    grants.namespaced.setdefault(namespace, []).extend(r for r in bound if r.resources)
        return grants

    def _rules_of(self, ref: Obj, namespace: str | None) -> list[CompiledRule] | None:
        if ref.get("kind") == "ClusterRole":
            return self._cluster_roles.get(str(ref.get("name")))
        if namespace is None:
            return None  # a ClusterRoleBinding cannot grant a Role
        return self._roles.get((namespace, str(ref.get("name"))))


def missing_rule_text(attrs: Attributes) -> str:
    """The rule that would allow ``attrs``, as a sentence."""
    if not attrs.is_resource:
        rule = json.dumps({"nonResourceURLs": [attrs.path], "verbs": [attrs.verb]})
        return f"no rule allows it; missing rule {rule} in a ClusterRole bound by a ClusterRoleBinding"
    where = (
        f'a Role of namespace "{attrs.namespace}" bound by a RoleBinding there, or a ClusterRole '
        "bound by a RoleBinding there or a ClusterRoleBinding"
        if attrs.namespace
        else "a ClusterRole bound by a ClusterRoleBinding"
    )
    return f"no rule allows it; missing rule {json.dumps(missing_rule(attrs))} in {where}"


def missing_rule(attrs: Attributes) -> dict[str, list[str]]:
    """The PolicyRule that would allow ``attrs`` (wire form)."""
    rule = {"apiGroups": [attrs.group], "resources": [attrs.full_resource], "verbs": [attrs.verb]}
    if attrs.name:
        rule["resourceNames"] = [attrs.name]
    return rule
