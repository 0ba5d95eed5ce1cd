"""The Python SDK: :class:`~muster.sdk.client.Client` (the REST client the CLI uses too) and
workflows written as Python functions (:func:`task`, :func:`workflow`; docs/workflows.md).

Names are imported on first use, so ``import muster.sdk.client`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunResult", "WorkflowFailed", "inputs_dir", "outputs_dir", "submit", "task", "workflow"]

_WHERE = {
    "task": "muster.sdk.dsl",
    "workflow": "muster.sdk.dsl",
    "submit": "muster.sdk.submit",
    "RunResult": "muster.sdk.submit",
    "WorkflowFailed": "muster.sdk.submit",
    "inputs_dir": "muster.sdk.run",
    "outputs_dir": "muster.sdk.run",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'muster.sdk' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
