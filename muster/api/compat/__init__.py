"""Converters from foreign manifests (PyTorchJob, Kueue, PriorityClass, batch/v1 Job,
Namespace) to Muster's own kinds.

A converter rewrites a foreign document into a native ``muster.dev/v1`` document and says
which native path prefixes stand for which foreign ones, so every error and warning names
the path the user wrote. The registry then validates the native document leniently: a field
the native model does not know is not an error but is kept (in the annotation
``muster.dev/ignored-fields``) with a warning naming its foreign path. Nothing is dropped
silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from muster.api.errors import FieldError

__all__ = ["IGNORED_FIELDS_ANNOTATION", "Conversion", "Converter", "converter_for", "foreign_kinds"]

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


def converter_for(api_version: str, kind: str) -> Converter | None:
    """The converter for a foreign apiVersion and kind, or None."""
    return _converters().get((api_version, kind))


def foreign_kinds() -> list[tuple[str, str]]:
    """Every (apiVersion, kind) a converter accepts."""
    return sorted(_converters())


def _converters() -> dict[tuple[str, str], Converter]:
    # Imported late: the converter modules import the kind models, which import this package.
    from muster.api.compat import core, jobs, kueue

    table: dict[tuple[str, str], Converter] = {}
    for module in (core, jobs, kueue):
        table.update(module.CONVERTERS)
    return table
