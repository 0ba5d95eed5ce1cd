"""``POST /apis/muster.dev/v1/apply``: many documents, all stored or none."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.responses import Response

from muster.api import registry
from muster.api.manifests import parse_sources
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


class ApplySource(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(description="Where the text came from (a file; '-': stdin); JSON if named *.json.")
    text: str = Field(description="Multi-document YAML, or JSON (one object or a list of them).")


class ApplyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    documents: list[Any] | None = Field(
        default=None, description="Documents to create or update (native or convertible kinds)."
    )
    sources: list[ApplySource] | None = Field(
        default=None,
        description="Instead of documents: texts the server parses (errors then say where: job.yaml[1]).",
    )
    dry_run: bool = Field(default=False, alias="dryRun", description="Validate and report actions only.")

    @model_validator(mode="after")
    def _one_of(self) -> ApplyRequest:
        if (self.documents is None) == (self.sources is None):
            raise ValueError("give either documents (parsed objects) or sources (texts to parse), not both")
        return self


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
    documents, where = body.documents, None
    if body.sources is not None:
        documents, where = _parse(body.sources)
    try:
        results = apply_documents(
            store,
            documents or [],
            dry_run=body.dry_run,
            authorize=authorize,
            observe=access.control.observe,
            namespace_queue=queue,
        )
    except ApiError as exc:
        if where is not None and exc.errors:  # say where each bad document came from
            for error in exc.errors:
                index = error.get("document")
                if isinstance(index, int) and 0 <= index < len(where):
                    error["where"] = where[index]
        raise
    return json_response({"results": results})


def _parse(sources: list[ApplySource]) -> tuple[list[Any], list[str]]:
    """The documents of the sources and where each came from; 422 naming every unreadable one
    (syntax errors, duplicate keys) or an input without documents."""
    docs, problems = parse_sources((s.name, s.text) for s in sources)
    errors = [{**p.error.to_dict(), "where": p.where} for p in problems]
    if not problems and not docs:
        names = ", ".join(s.name for s in sources) or "the request"
        errors = [{"path": "", "rule": f"no documents in {names}", "where": "error"}]
    if errors:
        raise ApiError(422, f"{len(errors)} unreadable document(s); nothing was applied", errors=errors)
    return [d.body for d in docs], [d.where for d in docs]


def _authorize(access: Access, store: Store, objects: list[tuple[int, dict[str, Any]]]) -> None:
    roles = [obj for _, obj in objects if obj["kind"] in ("Role", "ClusterRole")]
    for index, obj in objects:
        info = registry.lookup(obj["kind"])
        meta = obj["metadata"]
        ns = meta.get("namespace") if info.namespaced else None
        if (
            info.plural not in _RBAC_PLURALS
            and info.kind != "Namespace"
            and access.can("create", info.plural, ns)
            and access.can("update", info.plural, ns, meta["name"])
        ):
            continue  # allowed whether it exists or not: no read of it (a round trip) to tell
        try:
            store.get(info.kind, meta["name"], meta.get("namespace"))
            # A namespace's own RoleBindings may grant changes to it (not its creation).
            ns = meta["name"] if info.kind == "Namespace" else ns
            attrs = Attributes("update", info.plural, namespace=ns, name=meta["name"])
        except NotFound:
            attrs = Attributes("create", info.plural, namespace=ns)
        try:
            access.check(attrs.verb, info.plural, attrs.namespace, attrs.name)
            if info.plural in _RBAC_PLURALS:
                check_write(access, attrs, obj, roles)
        except ApiError as exc:
            raise ApiError(
                exc.code,
                f"document {index} ({_ref(obj)}): {exc.message}; nothing was applied",
                exc.reason,
                details={**(exc.details or {}), "document": index},
            ) from None


_RBAC_PLURALS = ("roles", "clusterroles", "rolebindings", "clusterrolebindings")


def _ref(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{where}{meta['name']}"
