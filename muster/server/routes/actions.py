"""Requests that ask a controller to act, where the answer needs the controller's own rules.

``POST .../namespaces/{ns}/workflows/{name}/resubmit``: ``muster resubmit``, Argo's resubmit:
a new Workflow ``<name>-<5 letters or digits>`` with the same spec, labels and annotations (but
the retry request), annotated ``muster.dev/resubmitted-from: <name>``; it runs from the start
(its cached steps come from the cache). Answers the new object (201).

``POST .../namespaces/{ns}/workflows/{name}/retry``: ``muster retry``. The request itself is
the annotation ``muster.dev/retry`` set one above ``status.retries`` (written with the object's
resourceVersion, so two concurrent retries are one); the Workflow controller resets the tasks
and records the request as carried out (docs/workflows.md, "Retry"). The answer names the
tasks that will run again, by the controller's rule (:func:`reset_for_retry`).
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from muster.api import registry
from muster.api.labels import RESUBMITTED_FROM_ANNOTATION, RETRY_ANNOTATION
from muster.controllers.workflow.retry import reset_for_retry
from muster.server.encoding import json_response
from muster.server.errors import ERROR_RESPONSES, ApiError
from muster.server.routes.objects import API_PREFIX
from muster.server.services.objects import ObjectService
from muster.store import AlreadyExists, Conflict, NotFound

__all__ = ["router"]

router = APIRouter(tags=["actions"], responses=ERROR_RESPONSES)
_ATTEMPTS = 5
_SUFFIX_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
_NAME_ROOM = 57  # a DNS label holds 63 characters: the name, "-" and 5 more


@router.post(
    f"{API_PREFIX}/namespaces/{{namespace}}/workflows/{{name}}/resubmit",
    operation_id="resubmitWorkflow",
    status_code=201,
)
def resubmit_workflow(request: Request, namespace: str, name: str) -> Response:
    """Run a workflow again from the start as a new Workflow (Argo's resubmit); the new object."""
    store = request.app.state.store
    try:
        wf = store.get("Workflow", name, namespace)
    except NotFound:
        raise ApiError(404, f"workflow/{name} not found in namespace {namespace}") from None
    meta = wf["metadata"]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != RETRY_ANNOTATION}
    annotations[RESUBMITTED_FROM_ANNOTATION] = name
    info = registry.lookup("Workflow")
    for _ in range(_ATTEMPTS):
        suffix = "".join(secrets.choice(_SUFFIX_CHARS) for _ in range(5))
        doc = {
            "apiVersion": wf["apiVersion"],
            "kind": "Workflow",
            "metadata": {
                "name": f"{name[:_NAME_ROOM].rstrip('-.')}-{suffix}",
                "namespace": namespace,
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
            },
            "spec": copy.deepcopy(wf["spec"]),
        }
        try:
            created = ObjectService(store).create(info, namespace, doc)
        except AlreadyExists:
            continue
        return json_response(created, status_code=201)
    raise ApiError(409, f"could not find a free name for a copy of workflow/{name}; try again")


@router.post(f"{API_PREFIX}/namespaces/{{namespace}}/workflows/{{name}}/retry", operation_id="retryWorkflow")
def retry_workflow(request: Request, namespace: str, name: str) -> Response:
    """Retry a failed workflow: its failed, skipped and omitted tasks and what depends on them
    run again; the rest keep their outputs. Answers ``{"tasks": [...]}``, the tasks that run
    again (the onExit task not named)."""
    store = request.app.state.store
    for _ in range(_ATTEMPTS):
        try:
            wf = store.get("Workflow", name, namespace)
        except NotFound:
            raise ApiError(404, f"workflow/{name} not found in namespace {namespace}") from None
        status = wf.get("status") or {}
        phase = status.get("phase") or "Pending"
        if phase == "Succeeded":
            raise ApiError(409, f"workflow/{name} succeeded: there is nothing to retry")
        if phase not in ("Failed", "Error"):
            raise ApiError(
                409,
                f"workflow/{name} is {phase}: only a workflow that failed can be retried; wait for it to end",
            )
        changed = copy.deepcopy(wf)
        annotations: dict[str, Any] = changed["metadata"].setdefault("annotations", {})
        annotations[RETRY_ANNOTATION] = str(int(status.get("retries") or 0) + 1)
        try:
            store.update(changed)
        except Conflict:
            continue  # changed meanwhile (the controller wrote its status): look again
        reset, _events = reset_for_retry(wf["spec"], copy.deepcopy(status.get("nodes") or {}), 0.0)
        return json_response({"tasks": [t for t in reset if t != wf["spec"].get("onExit")]})
    raise ApiError(409, f"workflow/{name} kept changing; try again")
