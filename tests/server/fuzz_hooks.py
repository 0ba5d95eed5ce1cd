"""schemathesis hooks for tests/server/test_fuzz.py (loaded through ``SCHEMATHESIS_HOOKS``)."""

from __future__ import annotations

from typing import Any

import schemathesis

# pydantic's spellings of true (FastAPI reads a boolean query parameter with it).
_TRUE = {"1", "on", "t", "true", "y", "yes"}


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """A watch streams until the client leaves: give each one a timeout so it ends."""
    query = case.query if isinstance(case.query, dict) else None
    if query is not None and str(query.get("watch", "")).lower() in _TRUE:
        query["timeoutSeconds"] = "0"
