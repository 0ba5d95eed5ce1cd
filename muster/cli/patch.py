"""``muster patch KIND NAME -p JSON``: change fields of an object in place (a JSON merge patch,
as ``kubectl patch --type merge``; ``null`` removes a field)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from muster.cli.app import app, console
from muster.cli.common import BadInput, NamespaceOpt, ServerOpt, TokenOpt, connect, handle_errors, resolve_ref

__all__ = ["patch"]


@app.command()
def patch(
    kind: Annotated[str, typer.Argument(help="Kind (or KIND/NAME).")],
    name: Annotated[str | None, typer.Argument(help="Name of the object.", show_default=False)] = None,
    body: Annotated[
        str,
        typer.Option(
            "--patch",
            "-p",
            help='The merge patch as JSON, e.g. \'{"spec": {"runPolicy": {"suspend": true}}}\'.',
        ),
    ] = "",
    namespace: NamespaceOpt = "default",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Update fields of an object with a JSON merge patch."""
    with handle_errors():
        info, name = resolve_ref(kind, name)
        if not name:
            raise BadInput([f"error: name the {info.kind} to patch"])
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise BadInput([f"error: --patch is not JSON: {exc}"]) from None
        if not isinstance(doc, dict):
            raise BadInput(["error: --patch must be a JSON object"])
        with connect(server, token) as client:
            client.patch(info.kind, name, doc, namespace if info.namespaced else None)
        console.print(f"{info.kind.lower()}/{name} patched", markup=False)
