"""``muster delete KIND NAME...`` or ``muster delete -f FILE``."""

from __future__ import annotations

from typing import Annotated

import typer

from muster.api.errors import InvalidObject
from muster.cli.app import app, console
from muster.cli.common import (
    BadInput,
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    connect,
    handle_errors,
    resolve_ref,
)
from muster.sdk.errors import ApiNotFound

__all__ = ["delete"]


@app.command()
def delete(
    kind: Annotated[str | None, typer.Argument(help="Kind (or KIND/NAME).", show_default=False)] = None,
    names: Annotated[list[str] | None, typer.Argument(help="Names to delete.", show_default=False)] = None,
    filename: Annotated[
        list[str] | None,
        typer.Option("--filename", "-f", help="Delete the objects these files describe.", show_default=False),
    ] = None,
    namespace: NamespaceOpt = "default",
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="Objects already gone are not an error.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Delete objects by name, or those in FILE."""
    with handle_errors():
        targets = _targets(kind, names or [], filename or [], namespace)
        missing = 0
        with connect(server, token) as client:
            for kind_name, name, ns in targets:
                ref = f"{kind_name.lower()}/{name}"
                try:
                    client.delete(kind_name, name, ns)
                except ApiNotFound as exc:
                    if not ignore_not_found:
                        console.print(f"error: {exc.message}", markup=False, style="red")
                        missing += 1
                    continue
                console.print(f"{ref} deleted", markup=False)
        if missing:
            raise typer.Exit(1)


def _targets(
    kind: str | None, names: list[str], files: list[str], namespace: str
) -> list[tuple[str, str, str | None]]:
    if files:
        if kind or names:
            raise BadInput(["error: give either -f FILE or KIND NAME, not both"])
        return _from_files(files)
    if not kind:
        raise BadInput(["error: give KIND NAME... or -f FILE (see muster delete --help)"])
    info, first = resolve_ref(kind, None)
    all_names = ([first] if first else []) + names
    if not all_names:
        raise BadInput([f"error: name the {info.kind}s to delete (deleting all of a kind is not supported)"])
    return [(info.kind, n, namespace if info.namespaced else None) for n in all_names]


def _from_files(files: list[str]) -> list[tuple[str, str, str | None]]:
    # Imported here: reading YAML and validating (a foreign kind converts to the native one it
    # names, which needs the models) are for `delete -f`; `muster delete KIND NAME` needs neither.
    from muster.api import registry
    from muster.cli.manifests import error_line, load_documents

    docs = load_documents(files)
    targets: list[tuple[str, str, str | None]] = []
    problems: list[str] = []
    for doc in docs:
        try:
            validated = registry.validate(doc.body)
        except InvalidObject as exc:
            problems += [error_line(doc.where, e) for e in exc.errors]
            continue
        if validated.obj is not None:
            meta = validated.obj["metadata"]
            targets.append((validated.obj["kind"], meta["name"], meta.get("namespace")))
    if problems:
        raise BadInput(problems)
    return targets
