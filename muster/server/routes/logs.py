"""``GET /apis/muster.dev/v1/namespaces/{namespace}/pods/{name}/log``: a container's output as
text, streamed while it grows with ``follow=true`` (DESIGN §9, as ``kubectl logs``)."""

from __future__ import annotations

import threading

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from muster.api.base import DNS_LABEL_PATTERN
from muster.server.errors import ERROR_RESPONSES
from muster.server.logs import LogRequest, log_source, open_log
from muster.server.routes.objects import API_PREFIX, NAME_PATH, NAMESPACE_PATH
from muster.server.streaming import Relay, relay_response

__all__ = ["router"]

router = APIRouter(tags=["Pod"], responses=ERROR_RESPONSES)


@router.get(
    f"{API_PREFIX}/namespaces/{{namespace}}/pods/{{name}}/log",
    operation_id="readPodLog",
    responses={200: {"description": "The log as UTF-8 text.", "content": {"text/plain": {}}}},
)
def read_log(
    request: Request,
    namespace: str = NAMESPACE_PATH,
    name: str = NAME_PATH,
    container: str | None = Query(
        None,
        description="Container name; needed when the pod has several.",
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
    ),
    follow: bool = Query(False, description="Keep streaming new output until the container ends."),
    previous: bool = Query(False, description="The previous incarnation's log (before a restart)."),
    tail_lines: int | None = Query(None, alias="tailLines", ge=0, description="Only the last N lines."),
) -> Response:
    """A pod container's stdout and stderr. Logs are kept after the pod is gone."""
    req = LogRequest(namespace, name, container, follow, previous, tail_lines)
    cancel = threading.Event()
    lines = open_log(log_source(request.app), request.app.state.store, req, cancel)
    relay = Relay(lines, _encode, _failure, on_close=cancel.set, thread_name="muster-log")
    return relay_response(request, relay, media_type="text/plain; charset=utf-8")


def _encode(line: str) -> bytes:
    return line.encode("utf-8", errors="replace")


def _failure(exc: Exception) -> bytes:
    # The response has started: the reader gets the reason as the last line of text.
    return f"\nerror: reading the log failed: {exc}\n".encode()
