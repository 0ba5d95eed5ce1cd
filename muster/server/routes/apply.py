"""``POST /apis/muster.dev/v1/apply``: many documents, all stored or none."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES
from muster.server.routes.objects import API_PREFIX
from muster.server.services.apply import apply_documents

__all__ = ["router"]

router = APIRouter(tags=["apply"], responses=ERROR_RESPONSES)


class ApplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    documents: list[Any] = Field(description="Documents to create or update (native or convertible kinds).")
    dry_run: bool = Field(default=False, alias="dryRun", description="Validate and report actions only.")


class ApplyResult(BaseModel):
    kind: str = Field(description="Kind of the document.")
    namespace: str | None = Field(default=None, description="Namespace, for namespaced kinds.")
    name: str = Field(description="Name of the object.")
    action: str = Field(description="created, configured or unchanged.")
    warnings: list[str] = Field(default_factory=list, description="Fields accepted but ignored.")


class ApplyResponse(BaseModel):
    results: list[ApplyResult] = Field(description="One result per document, in order.")


@router.post(
    f"{API_PREFIX}/apply",
    operation_id="apply",
    responses={200: {"model": ApplyResponse}, 422: {"description": "A bad document; nothing was stored."}},
)
def apply(request: Request, body: ApplyRequest) -> Response:
    """Validate every document, then create or update them all in one transaction.

    On any invalid document the answer is 422 with ``errors[].document`` (0-based) and nothing
    is stored; on a conflict, 409 and nothing is stored."""
    results = apply_documents(request.app.state.store, body.documents, dry_run=body.dry_run)
    return json_response({"results": results})
