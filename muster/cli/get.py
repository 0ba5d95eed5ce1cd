"""``muster get KIND [NAME]``: tables per kind, -o wide|yaml|json|name|jsonpath=..., --sort-by,
``get all`` and -w to follow."""

# No `from __future__ import annotations` here: Typer would evaluate the string annotations of
# the commands again on every call (docs/cli.md, "Start-up").

import json
from typing import Annotated, Any

import typer

from muster.api import kinds
from muster.api.kinds import Kind
from muster.api.labels import EXPERIMENT_LABEL
from muster.cli.app import app, console
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
from muster.cli.jsonpath import JsonPathError, sort_key
from muster.cli.output import (
    OUTPUT_HELP,
    Output,
    OutputFormat,
    Table,
    parse_output,
    print_objects,
    print_raw,
    print_tasks,
    to_yaml,
)
from muster.sdk.client import DEFAULT_CHUNK_SIZE, Client

__all__ = ["get"]

# Events read best in the order they happened (kubectl users reach for --sort-by for this).
_DEFAULT_SORT = {"Event": ".lastTimestamp"}


@app.command()
def get(
    kind: Annotated[
        str,
        typer.Argument(
            help="Kind: TrainingJob, trainingjobs, tj, pytorchjobs, ... or KIND/NAME; `all` for every "
            "kind of work (jobs, workflows, workloads, pods).",
            autocompletion=complete_kind,
        ),
    ],
    name: Annotated[str | None, typer.Argument(help="Name of one object.", show_default=False)] = None,
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", help=f"{OUTPUT_HELP} For one Workflow also tree (as argo get shows it)."
        ),
    ] = "table",
    namespace: NamespaceOpt = "default",
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")] = False,
    selector: Annotated[
        str | None, typer.Option("--selector", "-l", help="Label selector, e.g. team=a,tier!=spot.")
    ] = None,
    sort_by: Annotated[
        str | None,
        typer.Option(
            "--sort-by",
            help="Sort by a field's JSONPath, e.g. .metadata.creationTimestamp (numbers and "
            "quantities by size; events are sorted by .lastTimestamp unless told otherwise).",
            show_default=False,
        ),
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="After listing, print changes as they happen.")
    ] = False,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            "--request-timeout",
            min=0,
            help="With -w: stop after this many seconds without a change.",
            show_default=False,
        ),
    ] = None,
    audit: Annotated[
        bool, typer.Option("--audit", help="With events: the audit log instead (see muster audit).")
    ] = False,
    chunk_size: Annotated[
        int,
        typer.Option(
            "--chunk-size",
            min=0,
            help="Fetch a list this many objects per request (0: all in one request), as kubectl's "
            "--chunk-size.",
        ),
    ] = DEFAULT_CHUNK_SIZE,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """List objects of a kind, or show one."""
    with handle_errors():
        if output == "tree":
            _tree(kind, name, namespace, server, token, watch)
            return
        fmt = _output(output)
        key = _sort_key(sort_by)
        if kind.lower() == "all" and "/" not in kind:
            if name or watch:
                raise BadInput(["error: `get all` lists; give no NAME and no --watch"])
            check_selector(selector)
            with connect(server, token) as client:
                _get_all(client, None if all_namespaces else namespace, selector, fmt, key, chunk_size)
            return
        info, name = resolve_ref(kind, name)
        if audit:
            if info.kind != "Event" or name:
                raise BadInput(["error: --audit goes with `get events` (or use `muster audit`)"])
            with connect(server, token) as client:
                items = client.audit(None if all_namespaces else namespace, limit=200)
            from muster.cli.audit import print_audit  # loaded for --audit only

            print_audit(items, fmt.output)
            return
        check_selector(selector)
        key = key or _sort_key(_DEFAULT_SORT.get(info.kind))
        ns = None if (all_namespaces and not name) or not info.namespaced else namespace
        with connect(server, token) as client:
            if name:
                objects = [client.get(info.kind, name, ns)]
                version = objects[0]["metadata"]["resourceVersion"]
            else:
                listed = client.list(info.kind, ns, selector, chunk_size=chunk_size)
                objects, version = listed["items"], listed["metadata"]["resourceVersion"]
            if key is not None:
                objects.sort(key=key)
            show_ns = info.namespaced and ns is None
            table = Table(info.kind, fmt.output == Output.wide, show_ns, watch=watch)
            if fmt.tabular and watch:
                table.print(objects)  # the header even when empty: rows follow
            else:
                print_objects(info.kind, objects, fmt, single=bool(name), namespaces=show_ns)
                if name and info.kind == "Workflow" and fmt.tabular:
                    console.print()
                    print_tasks(objects[0], wide=fmt.output == Output.wide)
                if name and info.kind == "Experiment" and fmt.tabular:
                    console.print()
                    selected = f"{EXPERIMENT_LABEL}={name}"
                    trials = client.list("Trial", ns, selected, chunk_size=chunk_size)["items"]
                    trials.sort(key=lambda t: int(t["spec"].get("index") or 0))
                    print_objects("Trial", trials, fmt, single=False, namespaces=False)
            if watch:
                _follow(client, info, ns, name, selector, version, fmt, table, request_timeout)


def _tree(
    kind: str, name: str | None, namespace: str, server: str | None, token: str | None, watch: bool
) -> None:
    info, name = resolve_ref(kind, name)
    if info.kind != "Workflow" or not name or watch:
        raise BadInput(["error: -o tree goes with `get workflow NAME` (without --watch)"])
    from muster.cli.workflow_tree import print_tree

    with connect(server, token) as client:
        print_tree(client.get("Workflow", name, namespace))


def _output(text: str) -> OutputFormat:
    try:
        return parse_output(text)
    except ValueError as exc:
        raise BadInput([f"error: {exc}"]) from None


def _sort_key(path: str | None) -> Any:
    if path is None:
        return None
    try:
        return sort_key(path)
    except JsonPathError as exc:
        raise BadInput([f"error: --sort-by: {exc}"]) from None


def _get_all(
    client: Client, namespace: str | None, selector: str | None, fmt: OutputFormat, key: Any, chunk_size: int
) -> None:
    """Every kind of the ``all`` category, one table each (rows named ``kind/name``)."""
    found: list[tuple[Kind, list[dict[str, Any]]]] = []
    for info in kinds.category("all"):
        items = client.list(info.kind, namespace, selector, chunk_size=chunk_size)["items"]
        if key is not None:
            items.sort(key=key)
        if items:
            found.append((info, items))
    if not fmt.tabular and fmt.output != Output.name:
        items = [obj for _, objs in found for obj in objs]
        print_objects("List", items, fmt, single=False, namespaces=namespace is None)
        return
    if not found and fmt.tabular:
        where = "any namespace" if namespace is None else f"{namespace} namespace"
        console.print(f"No resources found in {where}.", markup=False)
        return
    for i, (info, objs) in enumerate(found):
        if i and fmt.tabular:
            console.print()
        print_objects(info.kind, objs, fmt, single=False, namespaces=namespace is None, kind_prefix=True)


def _follow(
    client: Client,
    info: Kind,
    namespace: str | None,
    name: str | None,
    selector: str | None,
    version: str,
    fmt: OutputFormat,
    table: Table,
    timeout: float | None = None,
) -> None:
    """Print every change after ``version`` until interrupted (Ctrl-C ends it quietly) or
    ``timeout`` seconds pass without one."""
    try:
        for event in client.watch(
            info.kind, namespace, resource_version=version, selector=selector, timeout=timeout
        ):
            obj: dict[str, Any] = event["object"]
            if name and obj["metadata"]["name"] != name:
                continue
            _print_event(event["type"], obj, fmt, table, info)
    except KeyboardInterrupt:
        pass


def _print_event(type_: str, obj: dict[str, Any], fmt: OutputFormat, table: Table, info: Kind) -> None:
    if fmt.tabular:
        table.print([obj], header=False)
    elif fmt.output == Output.name:
        console.print(f"{info.kind.lower()}/{obj['metadata']['name']}", markup=False)
    elif fmt.template is not None:
        print_raw(fmt.template.render(obj) + "\n")
    elif fmt.output == Output.json:
        console.print(json.dumps({"type": type_, "object": obj}), markup=False, soft_wrap=True)
    else:
        console.print("---\n" + to_yaml({"type": type_, "object": obj}).rstrip("\n"), markup=False)
