"""Kubernetes core kinds: ``scheduling.k8s.io/v1 PriorityClass`` and the ``v1`` Namespace,
ServiceAccount and ResourceQuota, which are Muster's own kinds field for field (what Muster
does not honour, such as a ServiceAccount's secrets or a quota's scopes, is kept and reported)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from muster.api.base import API_VERSION
from muster.api.compat.base import Conversion, Converter

__all__ = ["CONVERTERS", "convert_same"]


def convert_same(doc: Mapping[str, Any]) -> Conversion:
    """A foreign kind whose fields are Muster's: only the apiVersion changes."""
    return Conversion(doc={**doc, "apiVersion": API_VERSION})


CONVERTERS: dict[tuple[str, str], Converter] = {
    ("scheduling.k8s.io/v1", "PriorityClass"): convert_same,
    ("v1", "Namespace"): convert_same,
    ("v1", "ServiceAccount"): convert_same,
    ("v1", "ResourceQuota"): convert_same,
}
