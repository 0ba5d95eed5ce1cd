"""``muster delete KIND NAME...`` or ``muster delete -f FILE``."""

from __future__ import annotations

from typing import Annotated

import typer

from muster.api.errors import InvalidObject
from muster.cli.app import app, console, err_console
from muster.cli.common import (
    BadInput,
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    check_selector,
    complete_kind,
    connect,
    handle_errors,
    resolve_ref,
)
from muster.sdk.errors import ApiNotFound

__all__ = ["delete"]


@app.command()
def delete(
    kind: Annotated[
        str | None,
        typer.Argument(help="Kind (or KIND/NAME).", show_default=False, autocompletion=complete_kind),
    ] = None,
    names: Annotated[list[str] | None, typer.Argument(help="Names to delete.", show_default=False)] = None,
    filename: Annotated[
        list[str] | None,
        typer.Option("--filename", "-f", help="Delete the objects these files describe.", show_default=False),
    ] = None,
    namespace: NamespaceOpt = "default",
    ignore_not_found: Annotated[
        bool, typer.Option("--ignore-not-found", help="Objects already gone are not an error.")
    ] = False,
    all_: Annotated[bool, typer.Option("--all", help="Every object of KIND in the namespace.")] = False,
    selector: Annotated[
        str | None,
        typer.Option(
            "--selector", "-l", help="Every object of KIND matching this label selector.", show_default=False
        ),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Delete objects by name, every one of a kind (--all, -l), or those in FILE."""
    with handle_errors():
        if all_ or selector:
            _delete_collection(kind, names or [], filename or [], namespace, selector, server, token)
            return
        targets = _targets(kind, names or [], filename or [], namespace)
        missing = 0
        with connect(server, token) as client:
            for kind_name, name, ns in targets:
                ref = f"{kind_name.lower()}/{name}"
                try:
                    client.delete(kind_name, name, ns)
                except ApiNotFound as exc:
                    if not ignore_not_found:
                        err_console.print(f"error: {exc.message}", markup=False, style="red")
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
        raise BadInput([f"error: name the {info.kind}s to delete, or give --all or -l SELECTOR"])
    return [(info.kind, n, namespace if info.namespaced else None) for n in all_names]


def _delete_collection(
    kind: str | None,
    names: list[str],
    files: list[str],
    namespace: str,
    selector: str | None,
    server: str | None,
    token: str | None,
) -> None:
    if not kind or names or files or "/" in kind:
        raise BadInput(["error: --all and -l take a KIND alone (muster delete tj --all -n NAMESPACE)"])
    check_selector(selector)
    info, _ = resolve_ref(kind, None)
    with connect(server, token) as client:
        deleted = client.delete_collection(info.kind, namespace if info.namespaced else None, selector)
    for obj in deleted:
        console.print(f"{info.kind.lower()}/{obj['metadata']['name']} deleted", markup=False)
    if not deleted:
        console.print("No resources found.", markup=False)


def _from_files(files: list[str]) -> list[tuple[str, str, str | None]]:
    # Imported here: reading YAML and validating (a foreign kind converts to the native one it
    # names, which needs the models) are for `delete -f`; `muster delete KIND NAME` needs neither.
    from muster.api import registry
    from muster.api.errors import error_line
    from muster.cli.manifests import load_documents

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
