"""The REST surface of every kind, generated from its :class:`KindInfo` (DESIGN §9):

namespaced kinds
    ``/apis/muster.dev/v1/namespaces/{namespace}/{plural}[/{name}[/status]]`` and
    ``/apis/muster.dev/v1/{plural}`` (list or watch across namespaces)
cluster kinds
    ``/apis/muster.dev/v1/{plural}[/{name}[/status]]``

Verbs as Kubernetes has them: GET (get, list, watch), POST (create), PUT (update), PATCH (a JSON
merge patch), DELETE of an object (delete) and of a collection (deletecollection, by label).

A list answers a ``{Kind}List``, a page of it with ``?limit=`` (``continue`` for the next:
:mod:`muster.server.services.paging`); ``?watch=true`` streams NDJSON events instead, after
``resourceVersion`` (default: from now). Routes are concrete per kind, so the OpenAPI
document names every kind's schema. Handlers are thin: they parse, then call the service.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body, Path, Query, Request
from starlette.responses import Response

from muster.api.base import API_VERSION, DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN
from muster.api.registry import KindInfo
from muster.server.access.guard import access_of
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.services.objects import ObjectService
from muster.server.services.paging import CONTINUE_PATTERN
from muster.server.watch import ndjson_watch
from muster.store import parse_selector
from muster.store.selector import SELECTOR_PATTERN
from muster.store.watch import REVISION_PATTERN

__all__ = ["API_PREFIX", "NAMESPACE_PATH", "NAME_PATH", "add_kind_routes", "collection_path", "object_path"]

API_PREFIX = f"/apis/{API_VERSION}"

# The formats are declared (so clients and fuzzers see the contract) and checked by the parsers
# behind them, whose errors say more than a pattern mismatch would.
_SELECTOR = Query(
    None,
    alias="labelSelector",
    description="Label selector, e.g. team=a,tier in (gold).",
    json_schema_extra={"pattern": SELECTOR_PATTERN},
)
_WATCH = Query(False, description="Stream NDJSON change events instead of returning a list.")
_SINCE = Query(
    None,
    alias="resourceVersion",
    description="Watch: stream changes after this revision (a list's metadata.resourceVersion); a "
    "revision the store has not reached yet is a 400. List: the list must be at least this recent. "
    "Delete: precondition.",
    json_schema_extra={"pattern": REVISION_PATTERN},
)
_LIMIT = Query(
    None,
    ge=1,
    description="List: answer at most this many objects, and metadata.continue when more follow "
    "(send it back as continue for the next page). Ignored with watch=true, as Kubernetes does.",
)
_CONTINUE = Query(
    None,
    alias="continue",
    description="List: the metadata.continue of the previous page, with the same labelSelector; "
    "the next page follows it. Not with watch=true.",
    json_schema_extra={"pattern": CONTINUE_PATTERN},
)
_TIMEOUT = Query(None, alias="timeoutSeconds", ge=0, description="Watch: end after this many quiet seconds.")
NAMESPACE_PATH = Path(pattern=DNS_LABEL_PATTERN, max_length=63, description="Namespace (a DNS-1123 label).")
NAME_PATH = Path(
    pattern=DNS_SUBDOMAIN_PATTERN, max_length=253, description="Object name (a DNS-1123 subdomain)."
)
# A list is JSON; with watch=true it streams NDJSON (sent to a client that accepts either).
_LIST_CONTENT = {"application/json": {}, "application/x-ndjson": {}}


def collection_path(info: KindInfo, namespaced_url: bool = True) -> str:
    if info.namespaced and namespaced_url:
        return f"{API_PREFIX}/namespaces/{{namespace}}/{info.plural}"
    return f"{API_PREFIX}/{info.plural}"


def object_path(info: KindInfo) -> str:
    return collection_path(info) + "/{name}"


def add_kind_routes(router: APIRouter, info: KindInfo) -> None:
    """Add the routes of one kind to ``router``.

    Added to the router itself rather than through an included router of their own: FastAPI
    builds an included route twice (when added, and again for the including app)."""
    schema = {"model": info.model, "description": f"A {info.kind}."}
    body_doc = _request_body(info)
    list_doc = {
        200: {
            "description": f"A {info.kind}List, or NDJSON events with watch=true.",
            "content": _LIST_CONTENT,
        }
    }
    deleted_doc = {200: {"description": f"A {info.kind}List of the objects deleted."}}

    def service(request: Request) -> ObjectService:
        return request.app.state.objects

    def list_or_watch(
        request: Request,
        namespace: str | None,
        label_selector: str | None,
        watch: bool,
        since: str | None,
        timeout: float | None,
        limit: int | None,
        continue_token: str | None,
    ) -> Response:
        svc = service(request)
        access = access_of(request)  # a caller who may see only some of them sees only those
        if watch:
            if continue_token:
                raise ApiError(
                    400,
                    "continue pages a list; a watch has no pages: watch from a list's "
                    "metadata.resourceVersion instead",
                    errors=[{"path": "continue", "rule": "not with watch=true"}],
                )
            events = svc.watch(info, namespace, since, timeout)
            return ndjson_watch(request, events, parse_selector(label_selector), access.watch_filter())
        svc.check_revision(since)  # the list is read now, so it is at least as recent as any valid one
        body = svc.list(info, namespace, label_selector, access.list_filter(), limit, continue_token)
        return Response(body, media_type="application/json")

    def add(
        path: str, method: str, endpoint: Callable[..., Any], op: str, responses: Any, **kwargs: Any
    ) -> None:
        router.add_api_route(
            path,
            endpoint,
            methods=[method],
            operation_id=f"{op}{info.kind}",
            tags=[info.kind],
            responses={**ERROR_RESPONSES, **responses},
            **kwargs,
        )

    if info.namespaced:

        def list_namespaced(
            request: Request,
            namespace: str = NAMESPACE_PATH,
            label_selector: str | None = _SELECTOR,
            watch: bool = _WATCH,
            since: str | None = _SINCE,
            timeout: float | None = _TIMEOUT,
            limit: int | None = _LIMIT,
            continue_token: str | None = _CONTINUE,
        ) -> Response:
            return list_or_watch(
                request, namespace, label_selector, watch, since, timeout, limit, continue_token
            )

        def list_all(
            request: Request,
            label_selector: str | None = _SELECTOR,
            watch: bool = _WATCH,
            since: str | None = _SINCE,
            timeout: float | None = _TIMEOUT,
            limit: int | None = _LIMIT,
            continue_token: str | None = _CONTINUE,
        ) -> Response:
            return list_or_watch(request, None, label_selector, watch, since, timeout, limit, continue_token)

        add(collection_path(info), "GET", list_namespaced, "list", responses=list_doc)
        add(collection_path(info, False), "GET", list_all, "listAllNamespaces", responses=list_doc)

        def create(request: Request, namespace: str = NAMESPACE_PATH, body: Any = Body(...)) -> Response:
            return json_response(service(request).create(info, namespace, body), 201)

        def read(request: Request, namespace: str = NAMESPACE_PATH, name: str = NAME_PATH) -> Response:
            return json_response(service(request).get(info, namespace, name))

        def replace(
            request: Request, namespace: str = NAMESPACE_PATH, name: str = NAME_PATH, body: Any = Body(...)
        ) -> Response:
            return json_response(service(request).replace(info, namespace, name, body))

        def remove(
            request: Request,
            namespace: str = NAMESPACE_PATH,
            name: str = NAME_PATH,
            since: str | None = _SINCE,
        ) -> Response:
            return json_response(service(request).delete(info, namespace, name, since))

        def patch(
            request: Request, namespace: str = NAMESPACE_PATH, name: str = NAME_PATH, body: Any = Body(...)
        ) -> Response:
            _merge_patch_only(request)
            return json_response(service(request).patch(info, namespace, name, body))

        def remove_all(
            request: Request, namespace: str = NAMESPACE_PATH, label_selector: str | None = _SELECTOR
        ) -> Response:
            body = service(request).delete_collection(info, namespace, label_selector)
            return Response(body, media_type="application/json")

        def replace_status(
            request: Request, namespace: str = NAMESPACE_PATH, name: str = NAME_PATH, body: Any = Body(...)
        ) -> Response:
            return json_response(service(request).replace_status(info, namespace, name, body))

    else:

        def list_cluster(
            request: Request,
            label_selector: str | None = _SELECTOR,
            watch: bool = _WATCH,
            since: str | None = _SINCE,
            timeout: float | None = _TIMEOUT,
            limit: int | None = _LIMIT,
            continue_token: str | None = _CONTINUE,
        ) -> Response:
            return list_or_watch(request, None, label_selector, watch, since, timeout, limit, continue_token)

        add(collection_path(info), "GET", list_cluster, "list", responses=list_doc)

        def create(request: Request, body: Any = Body(...)) -> Response:  # type: ignore[misc]
            return json_response(service(request).create(info, None, body), 201)

        def read(request: Request, name: str = NAME_PATH) -> Response:  # type: ignore[misc]
            return json_response(service(request).get(info, None, name))

        def replace(request: Request, name: str = NAME_PATH, body: Any = Body(...)) -> Response:  # type: ignore[misc]
            return json_response(service(request).replace(info, None, name, body))

        def remove(request: Request, name: str = NAME_PATH, since: str | None = _SINCE) -> Response:  # type: ignore[misc]
            return json_response(service(request).delete(info, None, name, since))

        def patch(request: Request, name: str = NAME_PATH, body: Any = Body(...)) -> Response:  # type: ignore[misc]
            _merge_patch_only(request)
            return json_response(service(request).patch(info, None, name, body))

        def remove_all(request: Request, label_selector: str | None = _SELECTOR) -> Response:  # type: ignore[misc]
            body = service(request).delete_collection(info, None, label_selector)
            return Response(body, media_type="application/json")

        def replace_status(request: Request, name: str = NAME_PATH, body: Any = Body(...)) -> Response:  # type: ignore[misc]
            return json_response(service(request).replace_status(info, None, name, body))

    add(
        collection_path(info),
        "POST",
        create,
        "create",
        status_code=201,
        responses={201: schema},
        openapi_extra=body_doc,
    )
    add(object_path(info), "GET", read, "read", responses={200: schema})
    add(object_path(info), "PUT", replace, "replace", responses={200: schema}, openapi_extra=body_doc)
    add(object_path(info), "DELETE", remove, "delete", responses={200: schema})
    add(object_path(info), "PATCH", patch, "patch", responses={200: schema}, openapi_extra=_patch_doc(info))
    add(collection_path(info), "DELETE", remove_all, "deleteCollection", responses=deleted_doc)
    if info.has_status:
        add(object_path(info) + "/status", "GET", read, "readStatus", responses={200: schema})
        add(object_path(info) + "/status", "PUT", replace_status, "replaceStatus", responses={200: schema})


def _merge_patch_only(request: Request) -> None:
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ("application/merge-patch+json", "application/json"):
        raise ApiError(
            415,
            "PATCH takes a JSON merge patch (Content-Type: application/merge-patch+json), "
            f"not {kind or 'nothing'}",
            "UnsupportedMediaType",
        )


def _patch_doc(info: KindInfo) -> dict[str, Any]:
    ref = {"$ref": f"#/components/schemas/{info.model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/merge-patch+json": {"schema": ref}}}}


def _request_body(info: KindInfo) -> dict[str, Any]:
    # The body is validated by muster.api (for field-path errors), not by FastAPI; this only
    # documents it, pointing at the schema the responses above put into the components.
    ref = {"$ref": f"#/components/schemas/{info.model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}
