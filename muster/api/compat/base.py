"""What a converter returns (:class:`Conversion`) and what it is (:data:`Converter`)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from muster.api.base import API_VERSION
from muster.api.errors import FieldError, InvalidObject

__all__ = ["IGNORED_FIELDS_ANNOTATION", "Conversion", "Converter", "mapping_at", "native_copy"]

IGNORED_FIELDS_ANNOTATION = "muster.dev/ignored-fields"


@dataclass
class Conversion:
    """The result of converting one foreign document.

    ``doc`` is the native document (None when the foreign kind creates nothing, e.g.
    Namespace); ``warnings`` carry foreign paths; ``kept`` maps foreign paths of fields Muster
    cannot honour to their values; ``paths`` maps native path prefixes to foreign ones.
    """

    doc: dict[str, Any] | None
    warnings: list[FieldError] = field(default_factory=list)
    kept: dict[str, Any] = field(default_factory=dict)
    paths: tuple[tuple[str, str], ...] = ()

    def keep(self, path: str, value: Any) -> None:
        """Record a field Muster cannot honour: kept in the annotation, reported as a warning."""
        self.kept[path] = value

    def foreign_path(self, native: str) -> str:
        """The path in the user's document that ``native`` (a path in ``doc``) came from."""
        for prefix, foreign in sorted(self.paths, key=lambda p: -len(p[0])):
            if native == prefix or native.startswith((prefix + ".", prefix + "[")):
                return foreign + native[len(prefix) :]
        return native

    def foreign_text(self, text: str) -> str:
        """``text`` (a rule or hint) with every native path in it written as the foreign one."""
        if not self.paths:
            return text
        return _PATH_IN_TEXT.sub(lambda m: self.foreign_path(m.group(0)), text)


# A dotted path as rules quote them, e.g. spec.replicaSpecs.Master.template.spec.volumes.
_PATH_IN_TEXT = re.compile(r"\b(?:spec|metadata)(?:\.[A-Za-z][\w-]*|\[[^\]\s]+\])+")


Converter = Callable[[Mapping[str, Any]], Conversion]


def native_copy(doc: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A deep copy of a foreign document as a ``muster.dev/v1`` ``kind``, its status dropped."""
    native = copy.deepcopy(dict(doc))
    native["apiVersion"] = API_VERSION
    native["kind"] = kind
    native.pop("status", None)
    return native


def mapping_at(parent: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    """``parent[key]``, which must be a mapping (InvalidObject at ``path`` otherwise)."""
    value = parent.get(key)
    if not isinstance(value, dict):
        rule = "required field is missing" if value is None else "must be a mapping (key: value pairs)"
        raise InvalidObject([FieldError(path, rule)])
    return value
