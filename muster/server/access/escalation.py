"""Kubernetes' escalation rules for writes of RBAC objects: nobody grants what they do not hold.

* A Role or ClusterRole may be written only by an identity that holds every permission it
  grants (in the Role's namespace; everywhere for a ClusterRole), or that has the verb
  ``escalate`` on it.
* A RoleBinding or ClusterRoleBinding may be written only by an identity that holds every
  permission of the role it binds (in the binding's namespace; everywhere for a
  ClusterRoleBinding), or that has the verb ``bind`` on that role.
* A binding's ``roleRef`` cannot change once it exists (422): delete and re-create it.

A permission is held when one of the identity's rules covers it: the servant rule is split
into single (group, resource, verb, name) permissions (or (URL, verb)), and each must be
allowed by some rule of the owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from muster.api.base import GROUP
from muster.server.access.attributes import Attributes, native_resource
from muster.server.access.rbac import CompiledRule, compile_rule
from muster.server.errors import ApiError
from muster.store import NotFound

if TYPE_CHECKING:
    from muster.server.access.guard import Access

__all__ = ["check_write", "uncovered"]

Obj = Mapping[str, Any]
_KIND_OF = {
    "roles": "Role",
    "clusterroles": "ClusterRole",
    "rolebindings": "RoleBinding",
    "clusterrolebindings": "ClusterRoleBinding",
}
_ROLE_RESOURCE = {"Role": "roles", "ClusterRole": "clusterroles"}


def check_write(access: Access, attrs: Attributes, obj: Obj, pending_roles: Iterable[Obj] = ()) -> None:
    """Raise 403 (or 422 for a changed roleRef) when ``access`` may not write ``obj``, an RBAC
    object, as ``attrs`` asks; ``pending_roles`` are roles written in the same request (apply)."""
    if access.user.is_admin:
        return
    kind = _KIND_OF[attrs.resource]
    namespace = attrs.namespace if kind in ("Role", "RoleBinding") else None
    name = str((obj.get("metadata") or {}).get("name") or attrs.name)
    authorizer = access.control.authorizer
    owner = authorizer.rules_for(access.user, namespace)
    if kind in ("Role", "ClusterRole"):
        if access.can("escalate", attrs.resource, namespace, name):
            return
        servant = [compile_rule(r, kind) for r in obj.get("rules") or () if isinstance(r, dict)]
        missing = uncovered(owner, servant)
        if missing:
            raise _escalation(access, kind, name, namespace, missing, "escalate")
        return
    ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
    _check_role_ref_unchanged(access, kind, name, namespace, ref, attrs.verb)
    ref_kind, ref_name = str(ref.get("kind")), str(ref.get("name"))
    if ref_kind not in _ROLE_RESOURCE:
        return  # invalid: validation answers 422
    if access.can("bind", _ROLE_RESOURCE[ref_kind], namespace, ref_name):
        return
    rules = _pending_rules(pending_roles, ref_kind, ref_name, namespace)
    if rules is None:
        rules = authorizer.role_rules(ref_kind, ref_name, namespace)
    if rules is None:
        raise ApiError(
            403,
            f'{kind} "{name}": {ref_kind} "{ref_name}" does not exist, and User "{access.user.name}" '
            f'may not bind it (the verb bind on {_ROLE_RESOURCE[ref_kind]} "{ref_name}")',
            "Forbidden",
        )
    missing = uncovered(owner, rules)
    if missing:
        raise _escalation(access, kind, name, namespace, missing, "bind", f"{ref_kind} {ref_name}")


def uncovered(owner: list[CompiledRule], servant: Iterable[CompiledRule]) -> list[dict[str, Any]]:
    """The single permissions of ``servant`` no rule of ``owner`` allows (at most a few)."""
    missing: list[dict[str, Any]] = []
    for rule in servant:
        for atom in _atoms(rule):
            if not any(_covers(o, atom) for o in owner):
                missing.append(atom)
                if len(missing) >= 5:
                    return missing
    return missing


def _atoms(rule: CompiledRule) -> Iterable[dict[str, Any]]:
    for verb in sorted(rule.verbs):
        for url in sorted([*rule.urls, *(p + "*" for p in rule.url_prefixes)]):
            yield {"verb": verb, "nonResourceURL": url}
        for group in sorted(rule.groups):
            for resource in sorted(rule.resources):
                for name in sorted(rule.names) or [""]:
                    yield {"verb": verb, "apiGroup": group, "resource": resource, "resourceName": name}


def _covers(owner: CompiledRule, atom: dict[str, Any]) -> bool:
    verb = atom["verb"]
    if verb == "*" and "*" not in owner.verbs:
        return False
    if not owner.allows_verb(verb):
        return False
    if "nonResourceURL" in atom:
        url: str = atom["nonResourceURL"]
        if "*" in owner.urls:
            return True
        if url.endswith("*"):
            return any(url[:-1].startswith(p) for p in owner.url_prefixes)
        return url in owner.urls or url.startswith(owner.url_prefixes)
    group, resource, name = atom["apiGroup"], atom["resource"], atom["resourceName"]
    if owner.names and name not in owner.names:
        return False
    if "*" in (group, resource) or resource.startswith("*/"):
        # A wildcard is held only as the same wildcard or a wider one.
        group_held = "*" in owner.groups or (group != "*" and group in owner.groups)
        resource_held = "*" in owner.resources or (resource != "*" and resource in owner.resources)
        return group_held and resource_held
    base, _, sub = resource.partition("/")
    native = native_resource(group, base)
    attrs = Attributes(verb if verb != "*" else "get", native or base, sub, group=GROUP if native else group)
    return owner.matches_resource(attrs)


def _pending_rules(
    roles: Iterable[Obj], kind: str, name: str, namespace: str | None
) -> list[CompiledRule] | None:
    for role in roles:
        meta = role.get("metadata") or {}
        if role.get("kind") != kind or meta.get("name") != name:
            continue
        if kind == "Role" and (meta.get("namespace") or "default") != (namespace or "default"):
            continue
        return [compile_rule(r, kind) for r in role.get("rules") or () if isinstance(r, dict)]
    return None


def _check_role_ref_unchanged(
    access: Access, kind: str, name: str, namespace: str | None, ref: Obj, verb: str
) -> None:
    if verb == "create":
        return
    try:
        stored = access.control.store.get(kind, name, namespace)
    except NotFound:
        return
    old = stored.get("roleRef") or {}
    if (old.get("kind"), old.get("name")) != (ref.get("kind"), ref.get("name")):
        raise ApiError(
            422,
            f"{kind} {name!r}: roleRef cannot change (it is {old.get('kind')} {old.get('name')}); "
            "delete the binding and create it again",
            errors=[{"path": "roleRef", "rule": "cannot change once the binding exists", "got": dict(ref)}],
        )


def _escalation(
    access: Access,
    kind: str,
    name: str,
    namespace: str | None,
    missing: list[dict[str, Any]],
    verb: str,
    role: str = "",
) -> ApiError:
    where = f' in namespace "{namespace}"' if namespace else ""
    what = f"binding {role}" if role else "these rules"
    shown = "; ".join(
        f"{m['verb']} {m['nonResourceURL']}"
        if "nonResourceURL" in m
        else f"{m['verb']} {m['resource']}.{m['apiGroup'] or 'core'}"
        + (f" {m['resourceName']!r}" if m["resourceName"] else "")
        for m in missing
    )
    return ApiError(
        403,
        f'{kind} "{name}" is forbidden: User "{access.user.name}" may not grant permissions it does not '
        f"hold{where} ({what} would grant: {shown}); ask someone who holds them, or for the verb "
        f'"{verb}" on it',
        "Forbidden",
        details={
            "user": access.user.name,
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "missing": missing,
        },
    )
