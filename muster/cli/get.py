"""``muster get KIND [NAME]``: tables per kind, -o wide|yaml|json|name, and -w to follow."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from muster.api.kinds import Kind
from muster.cli.app import app, console
from muster.cli.common import (
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    connect,
    handle_errors,
    resolve_ref,
)
from muster.cli.output import Output, Table, print_objects, print_tasks, to_yaml
from muster.sdk.client import Client
from muster.store.selector import parse_selector

__all__ = ["get"]


@app.command()
def get(
    kind: Annotated[str, typer.Argument(help="Kind: TrainingJob, trainingjobs, tj, ... or KIND/NAME.")],
    name: Annotated[str | None, typer.Argument(help="Name of one object.", show_default=False)] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="Output format.")] = Output.table,
    namespace: NamespaceOpt = "default",
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")] = False,
    selector: Annotated[
        str | None, typer.Option("--selector", "-l", help="Label selector, e.g. team=a,tier!=spot.")
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="After listing, print changes as they happen.")
    ] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List objects of a kind, or show one."""
    with handle_errors():
        info, name = resolve_ref(kind, name)
        if selector:
            parse_selector(selector)  # a typo fails here, before any request
        ns = None if (all_namespaces and not name) or not info.namespaced else namespace
        with connect(server, token) as client:
            if name:
                objects = [client.get(info.kind, name, ns)]
                version = objects[0]["metadata"]["resourceVersion"]
            else:
                listed = client.list(info.kind, ns, selector)
                objects, version = listed["items"], listed["metadata"]["resourceVersion"]
            show_ns = info.namespaced and ns is None
            table = Table(info.kind, output == Output.wide, show_ns)
            if output in (Output.table, Output.wide) and watch:
                table.print(objects)  # the header even when empty: rows follow
            else:
                print_objects(info.kind, objects, output, single=bool(name), namespaces=show_ns)
                if name and info.kind == "Workflow" and output in (Output.table, Output.wide):
                    console.print()
                    print_tasks(objects[0], wide=output == Output.wide)
            if watch:
                _follow(client, info, ns, name, selector, version, output, table)


def _follow(
    client: Client,
    info: Kind,
    namespace: str | None,
    name: str | None,
    selector: str | None,
    version: str,
    output: Output,
    table: Table,
) -> None:
    """Print every change after ``version`` until interrupted (Ctrl-C ends it quietly)."""
    try:
        for event in client.watch(info.kind, namespace, resource_version=version, selector=selector):
            obj: dict[str, Any] = event["object"]
            if name and obj["metadata"]["name"] != name:
                continue
            _print_event(event["type"], obj, output, table, info)
    except KeyboardInterrupt:
        pass


def _print_event(type_: str, obj: dict[str, Any], output: Output, table: Table, info: Kind) -> None:
    if output in (Output.table, Output.wide):
        table.print([obj], header=False)
    elif output == Output.name:
        console.print(f"{info.kind.lower()}/{obj['metadata']['name']}", markup=False)
    elif output == Output.json:
        console.print(json.dumps({"type": type_, "object": obj}), markup=False, soft_wrap=True)
    else:
        console.print("---\n" + to_yaml({"type": type_, "object": obj}).rstrip("\n"), markup=False)
