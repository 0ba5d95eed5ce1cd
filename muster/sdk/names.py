"""Names the SDK's two halves agree on: the compiler (:mod:`muster.sdk.dsl`) writes them into a
Workflow and the runner (:mod:`muster.sdk.submit`) reads them back from its status."""

from __future__ import annotations

__all__ = ["RESULT_ANNOTATION", "RETURN"]

RETURN = "return"  # the output parameter / artifact that holds a task's return value
RESULT_ANNOTATION = "muster.dev/sdk-result"  # the task whose value the workflow function returned
