"""``POST /apis/muster.dev/v1/nodes/{name}/fault-injection``: make a fake GPU fail, for tests.

Testing only: it drives a fake GPU (``muster up --fake-gpus``) unhealthy (an XID error, a
lost GPU), healthy again, or sets its readings, so tests and drills can watch Muster react
(taints, jobs moved, metrics, ``muster doctor``). Nodes with real GPUs refuse it (409).
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as FutureTimeout

from fastapi import APIRouter, Request
from pydantic import ConfigDict, Field, model_validator
from starlette.responses import Response

from muster.api.base import MusterModel
from muster.runtime.base import GpuFault, PodRuntimeError
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.routes.objects import API_PREFIX
from muster.server.views import manager_of
from muster.store import NotFound

__all__ = ["FaultInjection", "router"]

router = APIRouter(tags=["testing"], responses=ERROR_RESPONSES)
_APPLY_TIMEOUT = 15.0


class FaultInjection(MusterModel):
    """What to do to one fake GPU; fields combine, and at least one must be given."""

    model_config = ConfigDict(strict=True)  # as the kinds: "1" is not a GPU index

    gpu: int = Field(ge=0, description="Index of the GPU on the node.")
    xid: int | None = Field(
        default=None, ge=1, description="Report this XID error (critical ones make the GPU unhealthy)."
    )
    lost: bool = Field(default=False, description="The GPU falls off the bus (NVML_ERROR_GPU_IS_LOST).")
    clear: bool = Field(default=False, description="Forget injected faults: the GPU is healthy again.")
    utilization: float | None = Field(
        default=None, ge=0, le=1, description="Utilisation it reports from now on (a ratio, 0 to 1)."
    )
    memory_used_bytes: int | None = Field(default=None, ge=0, description="Memory in use it reports.")
    temperature_celsius: float | None = Field(default=None, description="Temperature it reports.")
    power_watts: float | None = Field(default=None, ge=0, description="Power draw it reports.")

    @model_validator(mode="after")
    def _something(self) -> FaultInjection:
        if (
            self.xid is None
            and not self.lost
            and not self.clear
            and all(
                v is None
                for v in (
                    self.utilization,
                    self.memory_used_bytes,
                    self.temperature_celsius,
                    self.power_watts,
                )
            )
        ):
            raise ValueError(
                "give a fault (xid, lost), clear, or a reading (utilization, memoryUsedBytes, "
                "temperatureCelsius, powerWatts)"
            )
        return self

    def fault(self) -> GpuFault:
        return GpuFault(
            gpu=self.gpu,
            xid=self.xid,
            lost=self.lost,
            clear=self.clear,
            utilization_pct=None if self.utilization is None else self.utilization * 100.0,
            memory_used_bytes=self.memory_used_bytes,
            temperature_c=self.temperature_celsius,
            power_w=self.power_watts,
        )


@router.post(f"{API_PREFIX}/nodes/{{name}}/fault-injection", operation_id="injectGpuFault")
def inject_fault(request: Request, name: str, body: FaultInjection) -> Response:
    """Testing only: inject a fault (or readings) into a fake GPU of the node."""
    try:
        request.app.state.store.get("Node", name)
    except NotFound:
        raise ApiError(404, f"node {name} not found") from None
    manager = manager_of(request.app, required="fault injection")
    assert manager is not None
    future = manager.request_fault(name, body.fault())
    try:
        device = future.result(timeout=_APPLY_TIMEOUT)
    except FutureTimeout:
        raise ApiError(503, "the control plane did not apply the fault in time; try again") from None
    except KeyError as exc:
        raise ApiError(
            422,
            str(exc.args[0]) if exc.args else str(exc),
            errors=[{"path": "gpu", "rule": "must be a GPU of the node", "got": body.gpu}],
        ) from None
    except PodRuntimeError as exc:
        raise ApiError(409, str(exc), reason="FaultInjectionUnsupported") from None
    return json_response(
        {
            "node": name,
            "gpu": {
                "index": device.index,
                "uuid": device.uuid,
                "model": device.model,
                "health": device.health,
                "healthReason": device.health_reason,
            },
        }
    )
