"""The one place every route is authorized: :func:`guard`, a dependency of the whole app.

``create_app`` gives the FastAPI app ``dependencies=[Depends(guard)]``, so every route
included into it, now or later (a serving gateway, a new view), runs :func:`guard` before
its handler. By default a route is authorized by its path (Kubernetes' rules,
:func:`~muster.server.access.attributes.request_attributes`): a route under
``/apis/{group}/{version}/`` as a resource request, any other path as a non-resource URL
(which only a ClusterRole rule naming that URL, or the bootstrap admin, allows). A route
whose path does not tell declares what it needs with :func:`requires`::

    @router.get("/api/v1/queues/usage")
    @requires(Requirement(verb="list", resource="clusterqueues"))
    def queues_usage(request: Request) -> Response: ...

    @router.get("/api/v1/why/{kind}/{namespace}/{name}")
    @requires(Requirement(verb="get", resource="{kind}", namespace_param="namespace", name_param="name"))
    def why(...): ...

    @router.get("/ui/api/jobs")
    @requires(AUTHENTICATED)  # any signed-in identity; the handler shows only what it may see
    def jobs_view(request: Request) -> Response: ...

A denial is 403 ``Forbidden`` naming the user, verb, resource, namespace, name and the
missing rule (``error.details``). A list or watch that the identity may make only in some
namespaces, or only for some names, is not refused but narrowed: the handler gets the
:class:`~muster.server.access.rbac.Visibility` through :func:`access_of`, and returns only
what it allows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request

from muster.api import registry
from muster.api.base import GROUP
from muster.server.access.attributes import Attributes, UserInfo, request_attributes
from muster.server.access.escalation import check_write
from muster.server.access.policy import AccessControl
from muster.server.access.rbac import Visibility, missing_rule
from muster.server.errors import ApiError
from muster.server.services.objects import merge_patch
from muster.store import NotFound

__all__ = [
    "AUTHENTICATED",
    "PUBLIC",
    "Access",
    "Requirement",
    "access_of",
    "forbidden",
    "guard",
    "requires",
    "resource_of",
]

F = TypeVar("F", bound=Callable[..., Any])
_RBAC_WRITE_VERBS = frozenset({"create", "update", "patch"})
_RBAC_RESOURCES = frozenset({"roles", "clusterroles", "rolebindings", "clusterrolebindings"})
# Resources outside the registry that live in namespaces (their lists filter by namespace).
_NAMESPACED_EXTRA = frozenset({"tokens", "auditevents"})


@dataclass(frozen=True)
class Requirement:
    """What a route needs, where its path does not say. ``resource`` may name a path parameter
    in braces (``{kind}``: any name the registry knows); ``namespace_param`` and
    ``name_param`` name the path parameters that hold them. ``authenticated``: any signed-in
    identity (the handler narrows what it shows); ``public``: not even that."""

    verb: str = "get"
    resource: str = ""
    group: str = GROUP
    namespace_param: str | None = None
    name_param: str | None = None
    authenticated: bool = False
    public: bool = False

    def attributes(self, request: Request) -> Attributes:
        params = request.path_params
        resource = self.resource
        if resource.startswith("{") and resource.endswith("}"):
            resource = resource_of(str(params.get(resource[1:-1], "")))
        base, _, sub = resource.partition("/")
        return Attributes(
            verb=self.verb,
            resource=base,
            subresource=sub,
            namespace=params.get(self.namespace_param) if self.namespace_param else None,
            name=str(params.get(self.name_param, "")) if self.name_param else "",
            group=self.group,
            path=request.url.path,
        )


AUTHENTICATED = Requirement(authenticated=True)
PUBLIC = Requirement(public=True)
_DECLARED: dict[Callable[..., Any], Requirement] = {}


def requires(requirement: Requirement) -> Callable[[F], F]:
    """Declare what a route's endpoint needs (apply it below the router's decorator)."""

    def mark(endpoint: F) -> F:
        _DECLARED[endpoint] = requirement
        return endpoint

    return mark


class Access:
    """The identity of a request and what it may see, for handlers (:func:`access_of`)."""

    def __init__(
        self,
        user: UserInfo,
        control: AccessControl,
        visibility: Visibility | None = None,
        attributes: Attributes | None = None,
        namespaced: bool = False,
    ) -> None:
        self.user = user
        self.control = control
        self.visibility = visibility  # None: everything the route serves
        self.attributes = attributes
        self.namespaced = namespaced

    def list_filter(self) -> Callable[[dict[str, Any]], bool] | None:
        """For a list: which objects to return (None: all)."""
        vis = self.visibility
        if vis is None:
            return None
        return lambda obj: vis.allows(namespace_of(obj), obj["metadata"]["name"])

    def watch_filter(self) -> Callable[[dict[str, Any]], bool] | None:
        """For a watch: which events to send, judged by the policy as it is when each event
        comes (a binding removed mid-watch hides what it granted); a revoked or expired token
        ends the stream with a 401 line. None for the bootstrap admin."""
        user, control, attrs = self.user, self.control, self.attributes
        if user.is_admin or attrs is None:
            return None
        seen: list[Any] = [None, self.visibility]  # the authorizer the visibility was computed by

        def keep(obj: dict[str, Any]) -> bool:
            if not control.still_valid(user):
                raise ApiError(401, "the token was revoked or has expired", "Unauthorized")
            authorizer = control.authorizer
            if seen[0] is not authorizer:
                vis = control.visibility(user, attrs, self.namespaced)
                seen[0], seen[1] = authorizer, None if vis.everything else vis
            vis = seen[1]
            return vis is None or vis.allows(namespace_of(obj), obj["metadata"]["name"])

        return keep

    def can(
        self,
        verb: str,
        resource: str,
        namespace: str | None = None,
        name: str = "",
        group: str = GROUP,
    ) -> bool:
        base, _, sub = resource.partition("/")
        attrs = Attributes(verb, base, sub, namespace, name, group)
        return self.control.authorize(self.user, attrs).allowed

    def check(
        self, verb: str, resource: str, namespace: str | None = None, name: str = "", group: str = GROUP
    ) -> None:
        """Raise 403 unless the identity may do it."""
        base, _, sub = resource.partition("/")
        attrs = Attributes(verb, base, sub, namespace, name, group)
        decision = self.control.authorize(self.user, attrs)
        if not decision.allowed:
            raise forbidden(self.user, attrs, decision.reason)

    def visible(self, kind: str, verb: str = "list") -> Visibility:
        """What of ``kind`` (every namespace) the identity may see."""
        info = registry.lookup(kind)
        attrs = Attributes(verb, info.plural)
        return self.control.visibility(self.user, attrs, info.namespaced or info.kind == "Namespace")

    def redacted_pods(self, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``pods`` for views of GPUs and nodes: those the identity may not see keep what they
        hold (node, GPUs, share, phase) but not who they are."""
        vis = self.visible("Pod")
        if vis.everything:
            return pods
        return [p if vis.allows(namespace_of(p), p["metadata"]["name"]) else _hidden(p) for p in pods]

    def filter(self, kind: str, objects: list[dict[str, Any]], verb: str = "list") -> list[dict[str, Any]]:
        """The ``objects`` of ``kind`` the identity may see."""
        vis = self.visible(kind, verb)
        if vis.everything:
            return objects
        return [o for o in objects if vis.allows(namespace_of(o), o["metadata"]["name"])]


def access_of(request: Request) -> Access:
    """The :class:`Access` :func:`guard` left for the handler."""
    access = getattr(request.state, "access", None)
    if access is None:  # a route the guard did not see (an app built without it): refuse
        raise ApiError(403, "the request was not authorized", "Forbidden")
    return access


async def guard(request: Request) -> None:
    """Authorize the request (see the module docstring); the app-wide dependency."""
    requirement = _DECLARED.get(request.scope.get("endpoint"))  # type: ignore[arg-type]
    if requirement is not None and requirement.public:
        return
    control: AccessControl = request.app.state.access
    user: UserInfo | None = getattr(request.state, "user", None)
    if user is None:
        raise ApiError(401, "authentication required", "Unauthorized")
    if requirement is not None and requirement.authenticated:
        request.state.access = Access(user, control)
        return
    if requirement is not None:
        attrs = requirement.attributes(request)
    else:
        attrs = request_attributes(request.method, request.url.path, request.query_params)
    request.state.attributes = attrs
    if attrs.is_resource and attrs.verb in ("list", "watch") and not attrs.name:
        namespaced = _namespaced(attrs.resource)
        vis = control.visibility(user, attrs, namespaced)
        if vis.nothing:
            reason = control.authorize(user, attrs).reason
            request.state.audit_reason = reason
            raise forbidden(user, attrs, reason)
        request.state.access = Access(user, control, None if vis.everything else vis, attrs, namespaced)
        return
    decision = control.authorize(user, attrs)
    request.state.audit_reason = decision.reason
    if not decision.allowed:
        raise forbidden(user, attrs, decision.reason)
    access = request.state.access = Access(user, control, None, attrs)
    if attrs.verb == "create" and attrs.is_resource and not attrs.name:
        created = await _json_body(request)
        meta = created.get("metadata") if isinstance(created, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            request.state.audit_name = meta["name"]  # the audit log names what was created
    if attrs.verb in _RBAC_WRITE_VERBS and attrs.resource in _RBAC_RESOURCES and not attrs.subresource:
        body = await _json_body(request)
        if isinstance(body, dict) and attrs.verb == "patch":
            try:
                stored = control.store.get(registry.lookup(attrs.resource).kind, attrs.name, attrs.namespace)
            except NotFound:
                return  # the handler answers 404
            body = merge_patch(stored, body)
        if isinstance(body, dict):
            check_write(access, attrs, body)


def forbidden(user: UserInfo, attrs: Attributes, reason: str) -> ApiError:
    """The 403 for ``attrs``, worded as Kubernetes words it, with the missing rule."""
    who = f'User "{user.name}"'
    details: dict[str, Any] = {"user": user.name, "groups": list(user.groups), **attrs.to_dict()}
    if not attrs.is_resource:
        message = f'forbidden: {who} cannot {attrs.verb} path "{attrs.path}": {reason}'
        details["missingRule"] = {"nonResourceURLs": [attrs.path], "verbs": [attrs.verb]}
        return ApiError(403, message, "Forbidden", details=details)
    what = f"{attrs.full_resource}.{attrs.group}" if attrs.group else attrs.full_resource
    subject = f'{what} "{attrs.name}"' if attrs.name else what
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    message = (
        f'{subject} is forbidden: {who} cannot {attrs.verb} resource "{attrs.full_resource}" '
        f'in API group "{attrs.group}" {where}: {reason}'
    )
    details["missingRule"] = missing_rule(attrs)
    return ApiError(403, message, "Forbidden", details=details)


def resource_of(kind: str) -> str:
    """The plural resource name of a kind as a user names it (``tj`` -> ``trainingjobs``);
    an unknown name is kept (nothing grants it but ``*``)."""
    try:
        return registry.lookup(kind).plural
    except registry.UnknownKind:
        return kind.lower()


def namespace_of(obj: dict[str, Any]) -> str | None:
    """The namespace an object is authorized in (a Namespace: its own name)."""
    meta = obj["metadata"]
    if obj.get("kind") == "Namespace":
        return meta["name"]
    return meta.get("namespace")


def _hidden(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return {
        "apiVersion": pod.get("apiVersion"),
        "kind": "Pod",
        "metadata": {"name": HIDDEN, "namespace": HIDDEN},
        "spec": {
            **{k: spec[k] for k in ("nodeName", "gpus", "gpuMilli", "gpuMemory") if k in spec},
            **{
                k: [{kk: c[kk] for kk in ("name", "image", "resources") if kk in c} for c in spec[k]]
                for k in ("containers", "initContainers")
                if k in spec
            },
        },
        "status": {k: status[k] for k in ("phase",) if k in status},
    }


HIDDEN = "(hidden)"


def _namespaced(resource: str) -> bool:
    if resource in _NAMESPACED_EXTRA or resource == "namespaces":
        return True
    try:
        return registry.lookup(resource).namespaced
    except registry.UnknownKind:
        return False


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"null")
    except ValueError:
        return None  # the handler answers 400
