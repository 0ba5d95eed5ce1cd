"""``muster retry workflow/NAME``: run a failed workflow's failed, skipped and omitted tasks
again, with what depends on them and its onExit task; what succeeded keeps its outputs.

The request is the annotation ``muster.dev/retry`` set one above ``status.retries`` (with the
object's resourceVersion, so two concurrent retries are one); the Workflow controller resets
the tasks and records the request as carried out (docs/workflows.md, "Retry").
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

import typer

from muster.cli.app import app, console
from muster.cli.common import NamespaceOpt, ServerOpt, TokenOpt, connect, fail, handle_errors, resolve_ref
from muster.controllers.workflow import RETRY_ANNOTATION
from muster.controllers.workflow_retry import reset_for_retry
from muster.sdk.client import Client
from muster.sdk.errors import ObjectConflict

__all__ = ["retry"]

_ATTEMPTS = 5


@app.command()
def retry(
    target: Annotated[str, typer.Argument(help="workflow/NAME (or wf/NAME).")],
    namespace: NamespaceOpt = "default",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Retry a failed workflow: re-run its failed, skipped and omitted tasks and what depends
    on them; keep the rest."""
    with handle_errors():
        info, name = resolve_ref(target, None)
        if info.kind != "Workflow" or not name:
            fail(f"{target!r}: give workflow/NAME; only workflows are retried", 2)
        with connect(server, token) as client:
            tasks = _request(client, name, namespace)
        console.print(
            f"workflow/{name} retried: {', '.join(tasks) or 'its onExit task'} run again", markup=False
        )


def _request(client: Client, name: str, namespace: str) -> list[str]:
    for _ in range(_ATTEMPTS):
        wf = client.get("Workflow", name, namespace)
        status = wf.get("status") or {}
        phase = status.get("phase") or "Pending"
        if phase == "Succeeded":
            fail(f"workflow/{name} succeeded: there is nothing to retry")
        if phase not in ("Failed", "Error"):
            fail(
                f"workflow/{name} is {phase}: only a workflow that failed can be retried; wait for it to end"
            )
        changed = copy.deepcopy(wf)
        annotations: dict[str, Any] = changed["metadata"].setdefault("annotations", {})
        annotations[RETRY_ANNOTATION] = str(int(status.get("retries") or 0) + 1)
        try:
            client.update(changed)
        except ObjectConflict:
            continue  # changed meanwhile (the controller wrote its status): look again
        nodes = copy.deepcopy(status.get("nodes") or {})
        reset, _events = reset_for_retry(wf["spec"], nodes, 0.0)
        return [t for t in reset if t != wf["spec"].get("onExit")]
    fail(f"workflow/{name} kept changing; try again")
