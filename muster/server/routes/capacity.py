"""Capacity routes: what GPUs cost (``GET /api/v1/cost``) and spot notices for drills
(``POST /apis/muster.dev/v1/nodes/{name}/interruption``).

The cost view is computed with the pure :func:`muster.controllers.insight.cost.cost_report`
over the cost ledger (UsageRecords). The notice route is for tests and drills, like GPU fault
injection: it tells the control plane that the provider takes a pool node back, shaped like the
clouds' warning (AWS's instance-action: ``{"action": "terminate", "time": ...}``), and the node is
drained and terminated as a real notice would have it (docs/capacity.md).
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout

from fastapi import APIRouter, Query, Request
from pydantic import Field, model_validator
from starlette.responses import Response

from muster.api.base import MusterModel
from muster.api.conditions import epoch
from muster.controllers.capacity.interruption import DEFAULT_NOTICE_SECONDS, NotInterruptible
from muster.controllers.insight.cost import cost_report
from muster.server.access.guard import Requirement, requires
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.routes.insight import INSIGHT_PREFIX
from muster.server.routes.objects import API_PREFIX
from muster.server.views import manager_of

__all__ = ["SpotNotice", "router"]

router = APIRouter(tags=["capacity"], responses=ERROR_RESPONSES)
_APPLY_TIMEOUT = 15.0
_WEEK = 7 * 86400.0


class SpotNotice(MusterModel):
    """A spot interruption notice, as AWS's instance-action document: what happens and when."""

    action: str = Field(default="terminate", description="What the provider does: terminate or stop.")
    time: str | None = Field(default=None, description="When (RFC 3339); default: inSeconds from now.")
    in_seconds: float | None = Field(
        default=None, ge=0, description="Seconds from now (default 120, the clouds' two-minute warning)."
    )

    @model_validator(mode="after")
    def _one_time(self) -> SpotNotice:
        if self.time is not None and self.in_seconds is not None:
            raise ValueError("give time or inSeconds, not both")
        if self.time is not None and epoch(self.time) is None:
            raise ValueError(f"time {self.time!r} is not an RFC 3339 time such as 2025-01-01T12:00:00Z")
        if self.action not in ("terminate", "stop", "hibernate"):
            raise ValueError(f"action must be terminate, stop or hibernate, got {self.action!r}")
        return self


@router.post(f"{API_PREFIX}/nodes/{{name}}/interruption", operation_id="interruptNode")
def interrupt_node(request: Request, name: str, body: SpotNotice) -> Response:
    """Testing and drills: a spot interruption notice for a pool node."""
    manager = manager_of(request.app, required="spot interruption notices")
    assert manager is not None
    now = manager.ctx.now()
    at = (
        epoch(body.time)
        if body.time is not None
        else now + (DEFAULT_NOTICE_SECONDS if body.in_seconds is None else body.in_seconds)
    )
    future = manager.request_interruption(name, float(at or now), body.action)
    try:
        claim = future.result(timeout=_APPLY_TIMEOUT)
    except FutureTimeout:
        raise ApiError(503, "the control plane did not take the notice in time; try again") from None
    except KeyError:
        raise ApiError(404, f"node {name} not found") from None
    except NotInterruptible as exc:
        raise ApiError(409, str(exc), reason="NotInterruptible") from None
    return json_response(
        {
            "node": name,
            "nodeClaim": claim["metadata"]["name"],
            "nodePool": claim["spec"]["nodePool"],
            "phase": claim["status"]["phase"],
            "interruption": claim["status"]["interruption"],
        }
    )


@router.get(f"{INSIGHT_PREFIX}/cost", operation_id="cost")
@requires(Requirement("list", "usagerecords"))  # the report is read off the cost ledger
def cost(
    request: Request,
    start: str | None = Query(None, description="Window start (RFC 3339); default: a week before end."),
    end: str | None = Query(None, description="Window end (RFC 3339); default: now."),
    by: str = Query("namespace", description="namespace, queue, job, pool, capacity-type or label:KEY."),
    bucket: float | None = Query(None, gt=0, description="Also the cost per group per bucket of seconds."),
    spread_idle: bool = Query(
        False, alias="spreadIdle", description="Chargeback: spread the pools' idle cost pro rata."
    ),
) -> Response:
    """GPU-hours and cost per group, idle cost per pool, over a window (``muster cost`` as JSON)."""
    t1 = _time(end, "end") if end else time.time()
    t0 = _time(start, "start") if start else t1 - _WEEK
    records = request.app.state.store.list("UsageRecord").items
    try:
        report = cost_report(records, t0, t1, by=by, bucket=bucket, spread_idle=spread_idle)
    except ValueError as exc:
        raise ApiError(
            422, str(exc), errors=[{"path": "by" if "group" in str(exc) else "start", "rule": str(exc)}]
        ) from None
    return json_response(report.to_dict())


def _time(text: str, name: str) -> float:
    value = epoch(text)
    if value is None:
        raise ApiError(
            422,
            f"{name} {text!r} is not an RFC 3339 time",
            errors=[
                {"path": name, "rule": "must be an RFC 3339 time such as 2025-01-01T00:00:00Z", "got": text}
            ],
        )
    return value
