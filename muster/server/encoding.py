"""JSON responses without FastAPI's per-field encoder: objects are plain JSON-able dicts
already, and re-encoding a 10k-item list field by field would dominate list latency."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

__all__ = ["dumps", "json_response"]


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_response(value: Any, status_code: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(dumps(value), status_code=status_code, headers=headers, media_type="application/json")
