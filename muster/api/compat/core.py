"""Kubernetes core kinds: ``scheduling.k8s.io/v1 PriorityClass`` and ``v1 Namespace``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter
from muster.api.errors import FieldError

__all__ = ["CONVERTERS", "convert_namespace", "convert_priority_class"]


def convert_priority_class(doc: Mapping[str, Any]) -> Conversion:
    """Muster's PriorityClass is scheduling.k8s.io/v1's, field for field."""
    return Conversion(doc={**doc, "apiVersion": API_VERSION})


def convert_namespace(doc: Mapping[str, Any]) -> Conversion:
    """Namespaces are implicit in Muster (one exists while anything lives in it): a Namespace
    document is accepted, so existing manifests apply, and creates nothing."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
    warnings = [
        FieldError(
            f"metadata.{key}",
            "namespace labels and annotations are not stored; namespaces are "
            "implicit (match them by name with kubernetes.io/metadata.name)",
        )
        for key in ("labels", "annotations")
        if meta.get(key)
    ]
    warnings += [
        FieldError(key, "ignored: namespaces are implicit in Muster") for key in ("spec",) if doc.get(key)
    ]
    return Conversion(doc=None, warnings=warnings)


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("scheduling.k8s.io/v1", "PriorityClass"): convert_priority_class,
    ("v1", "Namespace"): convert_namespace,
}
