"""``rbac.authorization.k8s.io/v1`` Role, ClusterRole, RoleBinding and ClusterRoleBinding:
Muster's own kinds are the same fields, so a Kubernetes manifest applies unchanged.

Kubernetes requires ``apiGroups`` on a rule that names resources (``""`` is the core group);
so does this converter, where the native kind would default it to ``muster.dev``. A
ClusterRole's ``aggregationRule`` is kept and reported (Muster does not aggregate roles).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError, InvalidObject, child_path
from muster.api.rbac import RBAC_GROUP

__all__ = ["CONVERTERS"]


def _convert(doc: Mapping[str, Any]) -> Conversion:
    native = copy.deepcopy(dict(doc))
    native["apiVersion"] = API_VERSION
    rules = native.get("rules")
    errors = []
    if isinstance(rules, list):
        for i, rule in enumerate(rules):
            if isinstance(rule, dict) and rule.get("resources") and "apiGroups" not in rule:
                errors.append(
                    FieldError(
                        child_path("rules", i, "apiGroups"),
                        "resource rules must supply at least one api group",
                        hint='"" is the core group (pods, serviceaccounts), muster.dev every Muster kind',
                    )
                )
            elif isinstance(rule, dict) and rule.get("nonResourceURLs") and "apiGroups" not in rule:
                rule["apiGroups"] = []
    if errors:
        raise InvalidObject(errors, str(doc.get("kind", "")))
    return Conversion(doc=native)


CONVERTERS: dict[tuple[str, str], Converter] = {
    (f"{RBAC_GROUP}/v1", kind): _convert
    for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
}
