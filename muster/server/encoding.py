"""JSON responses without FastAPI's per-field encoder: objects are plain JSON-able dicts
already, and re-encoding a 10k-item list field by field would dominate list latency."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from muster.store.codec import dumps_bytes as dumps

__all__ = ["dumps", "json_response"]


def json_response(value: Any, status_code: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(dumps(value), status_code=status_code, headers=headers, media_type="application/json")
