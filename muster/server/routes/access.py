"""Identities, access reviews and the audit log (docs/access-control.md):

* tokens: ``POST /apis/muster.dev/v1/tokens`` (a user's), ``POST .../namespaces/{ns}/
  serviceaccounts/{name}/token`` (a ServiceAccount's, as Kubernetes' TokenRequest), list, get
  and ``DELETE`` (revoke) under ``/apis/muster.dev/v1[/namespaces/{ns}]/tokens``;
* who am I: ``POST /apis/authentication.k8s.io/v1/selfsubjectreviews``;
* may I: ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``, what may I
  (``selfsubjectrulesreviews``) and may they (``subjectaccessreviews``), as Kubernetes answers them;
* the audit log: ``GET /apis/muster.dev/v1[/namespaces/{ns}]/auditevents``.

Every route is authorized by its path like any other (:mod:`muster.server.access.guard`).
"""

from __future__ import annotations

import re
import time
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from muster.api.conditions import epoch, iso
from muster.server.access.attributes import (
    SERVICE_ACCOUNT_PREFIX,
    Attributes,
    UserInfo,
    native_resource,
)
from muster.server.access.guard import access_of, resource_of
from muster.server.access.tokens import TOKEN_KIND, new_token, public_view, token_record
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.routes.objects import API_PREFIX
from muster.store import NotFound
from muster.store.audit import AuditQuery
from muster.store.capabilities import AuditLog

__all__ = ["router"]

router = APIRouter(tags=["access"], responses=ERROR_RESPONSES)

_AUTHN = "/apis/authentication.k8s.io/v1"
_AUTHZ = "/apis/authorization.k8s.io/v1"
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    user: str = Field(min_length=1, max_length=253, description="The user the token signs in as.")
    groups: list[str] = Field(default_factory=list, description="Groups the user is in with this token.")
    expiration_seconds: int | None = Field(
        default=None, alias="expirationSeconds", ge=60, description="Lifetime; null: it never expires."
    )
    description: str = Field(default="", max_length=500, description="What the token is for.")


class ServiceAccountTokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    expiration_seconds: int | None = Field(
        default=None, alias="expirationSeconds", ge=60, description="Lifetime; null: it never expires."
    )
    description: str = Field(default="", max_length=500, description="What the token is for.")


# -- tokens ------------------------------------------------------------------------------------


@router.post(f"{API_PREFIX}/tokens", operation_id="createToken", status_code=201)
def create_token(request: Request, body: TokenRequest) -> Response:
    """A token for a user. Minting one acts as that user: it needs ``create tokens`` and
    ``impersonate`` on the user and each group (core group ``users``/``groups``)."""
    access = access_of(request)
    if body.user.startswith(SERVICE_ACCOUNT_PREFIX):
        raise ApiError(
            422,
            "user: a ServiceAccount's token is made with POST .../namespaces/NS/serviceaccounts/NAME/token "
            "(muster token create --serviceaccount NS/NAME)",
            errors=[{"path": "user", "rule": "must not name a ServiceAccount", "got": body.user}],
        )
    access.check("impersonate", "users", name=body.user, group="")
    for group in body.groups:
        access.check("impersonate", "groups", name=group, group="")
    token_id, token = new_token()
    record = token_record(
        token_id,
        token,
        user=body.user,
        groups=body.groups,
        expires=_expiry(body.expiration_seconds),
        description=body.description,
        created_by=access.user.name,
    )
    return _created(request, record, token)


@router.post(
    f"{API_PREFIX}/namespaces/{{namespace}}/serviceaccounts/{{name}}/token",
    operation_id="createServiceAccountToken",
    status_code=201,
)
def create_service_account_token(
    request: Request, namespace: str, name: str, body: ServiceAccountTokenRequest | None = None
) -> Response:
    """A token for ServiceAccount ``namespace/name`` (which must exist); it stops working when
    the ServiceAccount is deleted."""
    access = access_of(request)
    body = body or ServiceAccountTokenRequest()
    try:
        sa = request.app.state.store.get("ServiceAccount", name, namespace)
    except NotFound:
        raise ApiError(
            404, f"serviceaccount {namespace}/{name} not found; create it first (kind ServiceAccount)"
        ) from None
    token_id, token = new_token()
    record = token_record(
        token_id,
        token,
        service_account={"namespace": namespace, "name": name, "uid": sa["metadata"]["uid"]},
        expires=_expiry(body.expiration_seconds),
        description=body.description,
        created_by=access.user.name,
    )
    return _created(request, record, token)


@router.get(f"{API_PREFIX}/tokens", operation_id="listTokens")
def list_tokens(request: Request) -> Response:
    """Every token the caller may list (never a token itself or its hash)."""
    return _token_list(request, None)


@router.get(f"{API_PREFIX}/namespaces/{{namespace}}/tokens", operation_id="listNamespacedTokens")
def list_namespaced_tokens(request: Request, namespace: str) -> Response:
    """The tokens of the namespace's ServiceAccounts."""
    return _token_list(request, namespace)


@router.get(f"{API_PREFIX}/tokens/{{name}}", operation_id="readToken")
def read_token(request: Request, name: str) -> Response:
    return json_response(public_view(_stored_token(request, name, None), time.time()))


@router.get(f"{API_PREFIX}/namespaces/{{namespace}}/tokens/{{name}}", operation_id="readNamespacedToken")
def read_namespaced_token(request: Request, namespace: str, name: str) -> Response:
    return json_response(public_view(_stored_token(request, name, namespace), time.time()))


@router.delete(f"{API_PREFIX}/tokens/{{name}}", operation_id="revokeToken")
def revoke_token(request: Request, name: str) -> Response:
    """Revoke a user's token: refused from the next request on."""
    return _revoke(request, name, None)


@router.delete(f"{API_PREFIX}/namespaces/{{namespace}}/tokens/{{name}}", operation_id="revokeNamespacedToken")
def revoke_namespaced_token(request: Request, namespace: str, name: str) -> Response:
    """Revoke a ServiceAccount's token."""
    return _revoke(request, name, namespace)


# -- who am I, may I ---------------------------------------------------------------------------


@router.post(f"{_AUTHN}/selfsubjectreviews", operation_id="selfSubjectReview", status_code=201)
def self_subject_review(request: Request) -> Response:
    """Who the caller is (``muster whoami``, ``kubectl auth whoami``)."""
    user = access_of(request).user
    extra: dict[str, list[str]] = {}
    if user.token_id:
        extra["muster.dev/token-id"] = [user.token_id]
    if user.expires:
        extra["muster.dev/token-expiration"] = [user.expires]
    info: dict[str, Any] = {"username": user.name, "groups": list(user.groups)}
    if extra:
        info["extra"] = extra
    return json_response(
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
            "status": {"userInfo": info},
        },
        201,
    )


@router.post(f"{_AUTHZ}/selfsubjectaccessreviews", operation_id="selfSubjectAccessReview", status_code=201)
async def self_subject_access_review(request: Request) -> Response:
    """May the caller do it (``muster auth can-i``)? Kubernetes' request and answer."""
    body = await _review_body(request)
    return _access_review(request, access_of(request).user, body, "SelfSubjectAccessReview")


@router.post(f"{_AUTHZ}/subjectaccessreviews", operation_id="subjectAccessReview", status_code=201)
async def subject_access_review(request: Request) -> Response:
    """May ``spec.user`` (with ``spec.groups``) do it (``muster auth can-i --as``)?"""
    body = await _review_body(request)
    spec = body.get("spec") or {}
    user = spec.get("user")
    if not isinstance(user, str) or not user:
        raise ApiError(422, "spec.user: required", errors=[{"path": "spec.user", "rule": "required"}])
    groups = tuple(dict.fromkeys([*(spec.get("groups") or []), "system:authenticated"]))
    return _access_review(request, UserInfo(user, groups), body, "SubjectAccessReview")


@router.post(f"{_AUTHZ}/selfsubjectrulesreviews", operation_id="selfSubjectRulesReview", status_code=201)
async def self_subject_rules_review(request: Request) -> Response:
    """Every rule that applies to the caller in ``spec.namespace`` (``muster auth can-i --list``)."""
    body = await _review_body(request)
    namespace = (body.get("spec") or {}).get("namespace") or None
    access = access_of(request)
    rules = access.control.authorizer.rules_for(access.user, namespace)
    resource = [r.to_dict() for r in rules if r.resources]
    non_resource = [r.to_dict() for r in rules if not r.resources]
    return json_response(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace or ""},
            "status": {"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": False},
        },
        201,
    )


# -- the audit log -----------------------------------------------------------------------------


@router.get(f"{API_PREFIX}/auditevents", operation_id="listAuditEvents")
def list_audit_events(
    request: Request,
    since: str | None = Query(None, description="RFC 3339 time, or a duration back from now (30m, 2h, 7d)."),
    until: str | None = Query(None, description="RFC 3339 time, or a duration back from now."),
    user: str | None = Query(None, description="Only requests of this user."),
    verb: str | None = Query(None, description="Only this verb (create, update, patch, delete, ...)."),
    resource: str | None = Query(None, description="Only this resource (trainingjobs, tj, ...)."),
    name: str | None = Query(None, description="Only objects of this name."),
    failed: bool | None = Query(
        None, description="true: only refused or failed requests; false: only successes."
    ),
    limit: int = Query(500, ge=1, le=10_000, description="At most this many, newest first."),
) -> Response:
    """Audit records across namespaces (those the caller may read), newest first."""
    return _audit(request, None, since, until, user, verb, resource, name, failed, limit)


@router.get(f"{API_PREFIX}/namespaces/{{namespace}}/auditevents", operation_id="listNamespacedAuditEvents")
def list_namespaced_audit_events(
    request: Request,
    namespace: str,
    since: str | None = Query(None, description="RFC 3339 time, or a duration back from now (30m, 2h, 7d)."),
    until: str | None = Query(None, description="RFC 3339 time, or a duration back from now."),
    user: str | None = Query(None, description="Only requests of this user."),
    verb: str | None = Query(None, description="Only this verb."),
    resource: str | None = Query(None, description="Only this resource."),
    name: str | None = Query(None, description="Only objects of this name."),
    failed: bool | None = Query(None, description="true: only refused or failed requests."),
    limit: int = Query(500, ge=1, le=10_000, description="At most this many, newest first."),
) -> Response:
    """Audit records of one namespace, newest first."""
    return _audit(request, namespace, since, until, user, verb, resource, name, failed, limit)


# -- internals ---------------------------------------------------------------------------------


def _created(request: Request, record: dict[str, Any], token: str) -> Response:
    access = access_of(request)
    created = request.app.state.store.create(record)
    access.control.observe(created)
    out = public_view(created, time.time())
    out["status"] = {**out.get("status", {}), "token": token}
    request.state.audit_objects = [f"token/{created['metadata']['name']}"]
    return json_response(out, 201)


def _token_list(request: Request, namespace: str | None) -> Response:
    access = access_of(request)
    records = access.control.list(TOKEN_KIND, namespace)
    vis = access.visibility
    now = time.time()
    items = [
        public_view(r, now)
        for r in records
        if vis is None or vis.allows(r["metadata"].get("namespace"), r["metadata"]["name"])
    ]
    items.sort(
        key=lambda t: (t["metadata"].get("namespace") or "", t["metadata"].get("creationTimestamp") or "")
    )
    return json_response({"apiVersion": "muster.dev/v1", "kind": "TokenList", "items": items})


def _stored_token(request: Request, name: str, namespace: str | None) -> dict[str, Any]:
    record = access_of(request).control.get(TOKEN_KIND, name, namespace)
    if record is None:
        where = f" in namespace {namespace}" if namespace else ""
        raise ApiError(404, f"token {name} not found{where}")
    return record


def _revoke(request: Request, name: str, namespace: str | None) -> Response:
    access = access_of(request)
    _stored_token(request, name, namespace)
    try:
        deleted = request.app.state.store.delete(TOKEN_KIND, name, namespace)
    except NotFound:
        raise ApiError(404, f"token {name} not found") from None
    access.control.forget(deleted)
    return json_response(public_view(deleted, time.time()))


async def _review_body(request: Request) -> dict[str, Any]:
    import json

    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise ApiError(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def _access_review(request: Request, user: UserInfo, body: dict[str, Any], kind: str) -> Response:
    spec = body.get("spec") or {}
    attrs = _review_attributes(spec)
    decision = access_of(request).control.authorize(user, attrs)
    return json_response(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": kind,
            "spec": spec,
            "status": {"allowed": decision.allowed, "reason": decision.reason},
        },
        201,
    )


def _review_attributes(spec: dict[str, Any]) -> Attributes:
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(non_resource, dict) and not resource:
        return Attributes(
            verb=str(non_resource.get("verb") or "get"), path=str(non_resource.get("path") or "/")
        )
    if not isinstance(resource, dict) or not resource.get("resource"):
        raise ApiError(
            422,
            "spec: give resourceAttributes (verb, resource, namespace, name) "
            "or nonResourceAttributes (verb, path)",
            errors=[{"path": "spec.resourceAttributes", "rule": "required"}],
        )
    group = str(resource.get("group") or "")
    base = str(resource["resource"])
    if group in ("", "muster.dev"):
        # Muster serves every kind in muster.dev; a core-group name (pods) is the same resource.
        native = native_resource(group, base) if group else None
        group, base = "muster.dev", native or resource_of(base)
    else:
        native = native_resource(group, base)
        if native is not None:
            group, base = "muster.dev", native
    return Attributes(
        verb=str(resource.get("verb") or "get"),
        resource=base,
        subresource=str(resource.get("subresource") or ""),
        namespace=resource.get("namespace") or None,
        name=str(resource.get("name") or ""),
        group=group,
    )


def _audit(
    request: Request,
    namespace: str | None,
    since: str | None,
    until: str | None,
    user: str | None,
    verb: str | None,
    resource: str | None,
    name: str | None,
    failed: bool | None,
    limit: int,
) -> Response:
    store = request.app.state.store
    if not isinstance(store, AuditLog):
        raise ApiError(501, "this server's store keeps no audit log", "NotImplemented")
    access = access_of(request)
    request.app.state.audit.flush()  # what was just done shows
    vis = access.visibility
    query = AuditQuery(
        since=_when(since, "since"),
        until=_when(until, "until"),
        user=user,
        verb=verb,
        resource=resource_of(resource) if resource else None,
        namespace=namespace,
        name=name,
        failed=failed,
        namespaces=None if vis is None else vis.namespaces,
        limit=limit,
    )
    items = [{**r, "time": iso(float(r["time"]))} for r in store.query_audit(query)]
    return json_response({"apiVersion": "muster.dev/v1", "kind": "AuditEventList", "items": items})


def _when(text: str | None, what: str) -> float | None:
    if not text:
        return None
    m = _DURATION.match(text.strip())
    if m:
        return time.time() - float(m.group(1)) * _UNITS[m.group(2)]
    value = epoch(text)
    if value is None:
        raise ApiError(
            400, f"{what}: expected an RFC 3339 time or a duration such as 30m, 2h or 7d, got {text!r}"
        )
    return value


def _expiry(seconds: int | None) -> str | None:
    return iso(time.time() + seconds) if seconds else None
