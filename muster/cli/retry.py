"""``muster retry workflow/NAME``: run a failed workflow's failed, skipped and omitted tasks
again, with what depends on them and its onExit task; what succeeded keeps its outputs.
``muster resubmit workflow/NAME``: run it again from the start, as a new workflow.

The server records the request (``POST .../workflows/NAME/retry``, the annotation
``muster.dev/retry``) and the Workflow controller carries it out (docs/workflows.md, "Retry");
a resubmission is a new Workflow the server creates (``POST .../workflows/NAME/resubmit``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from muster.cli.app import app, console
from muster.cli.common import NamespaceOpt, ServerOpt, TokenOpt, connect, fail, handle_errors, resolve_ref

__all__ = ["resubmit", "retry"]


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
        name = _workflow_name(target, "retry")
        with connect(server, token) as client:
            tasks = client.retry_workflow(name, namespace)
        console.print(
            f"workflow/{name} retried: {', '.join(tasks) or 'its onExit task'} run again", markup=False
        )


@app.command()
def resubmit(
    target: Annotated[str, typer.Argument(help="workflow/NAME (or wf/NAME).")],
    namespace: NamespaceOpt = "default",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Run a workflow again from the start, as a new workflow named NAME-xxxxx (Argo's resubmit);
    steps whose results are cached are not run again."""
    with handle_errors():
        name = _workflow_name(target, "resubmit")
        with connect(server, token) as client:
            created = client.resubmit_workflow(name, namespace)
        console.print(f"workflow/{created['metadata']['name']} created from workflow/{name}", markup=False)


def _workflow_name(target: str, verb: str) -> str:
    if "/" not in target:
        fail(f"expected workflow/NAME, got {target!r}: muster {verb} workflow/{target}", 2)
    info, name = resolve_ref(target, None)
    if info.kind != "Workflow" or not name:
        done = {"retry": "retried", "resubmit": "resubmitted"}[verb]
        fail(f"{target!r}: give workflow/NAME; only workflows are {done}", 2)
    return name
