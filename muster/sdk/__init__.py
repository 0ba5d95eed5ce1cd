"""The Python SDK: :class:`~muster.sdk.client.Client` (the REST client the CLI uses too) and
workflows written as Python functions (:func:`task`, :func:`workflow`; docs/workflows.md).

Names are imported on first use, so ``import muster.sdk.client`` stays light.
"""

from __future__ import annotations

from muster.util import lazy_names

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

__getattr__ = lazy_names(__name__, _WHERE)
