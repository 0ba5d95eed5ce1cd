"""Wire dicts for store tests. The store never looks inside spec, so these need not be valid kinds."""

from __future__ import annotations

from typing import Any


def job(name: str, ns: str = "default", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "muster.dev/v1", "kind": "TrainingJob", "metadata": meta, "spec": spec or {"x": 1}}


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "muster.dev/v1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}
