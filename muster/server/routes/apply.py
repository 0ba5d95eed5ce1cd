"""``POST /apis/muster.dev/v1/apply``: many documents, all stored or none."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from muster.api import registry
from muster.config import settings
from muster.server.access.attributes import Attributes
from muster.server.access.escalation import check_write
from muster.server.access.guard import AUTHENTICATED, Access, access_of, requires
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.routes.objects import API_PREFIX
from muster.server.services.apply import apply_documents
from muster.server.views import manager_of
from muster.store import NotFound, Store

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
@requires(AUTHENTICATED)  # each document is authorized below, as create or update of its object
def apply(request: Request, body: ApplyRequest) -> Response:
    """Validate every document, then create or update them all in one transaction.

    On any invalid document the answer is 422 with ``errors[].document`` (0-based) and nothing
    is stored; on a conflict, 409 and nothing is stored. Each object needs ``create`` (new) or
    ``update`` (existing) on its resource; one refused document refuses them all (403 naming it)."""
    access = access_of(request)
    store = request.app.state.store

    def authorize(objects: list[tuple[int, dict[str, Any]]]) -> None:
        request.state.audit_objects = [_ref(obj) for _, obj in objects]
        _authorize(access, store, objects)

    manager = manager_of(request.app)
    queue = (
        manager.config.namespace_default_queue if manager is not None else settings().namespace_default_queue
    )
    results = apply_documents(
        store,
        body.documents,
        dry_run=body.dry_run,
        authorize=authorize,
        observe=access.control.observe,
        namespace_queue=queue,
    )
    return json_response({"results": results})


def _authorize(access: Access, store: Store, objects: list[tuple[int, dict[str, Any]]]) -> None:
    roles = [obj for _, obj in objects if obj["kind"] in ("Role", "ClusterRole")]
    for index, obj in objects:
        info = registry.lookup(obj["kind"])
        meta = obj["metadata"]
        ns = meta.get("namespace") if info.namespaced else None
        try:
            store.get(info.kind, meta["name"], meta.get("namespace"))
            # A namespace's own RoleBindings may grant changes to it (not its creation).
            ns = meta["name"] if info.kind == "Namespace" else ns
            attrs = Attributes("update", info.plural, namespace=ns, name=meta["name"])
        except NotFound:
            attrs = Attributes("create", info.plural, namespace=ns)
        try:
            access.check(attrs.verb, info.plural, attrs.namespace, attrs.name)
            if info.plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings"):
                check_write(access, attrs, obj, roles)
        except ApiError as exc:
            raise ApiError(
                exc.code,
                f"document {index} ({_ref(obj)}): {exc.message}; nothing was applied",
                exc.reason,
                details={**(exc.details or {}), "document": index},
            ) from None


def _ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{where}{meta['name']}"
