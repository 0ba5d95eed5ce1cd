"""``muster describe KIND [NAME]``: metadata, spec, status, conditions and recent events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from muster.cli.app import app, console
from muster.cli.columns import age
from muster.cli.common import (
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    complete_kind,
    connect,
    handle_errors,
    resolve_ref,
)
from muster.cli.output import print_rows, print_tasks, to_yaml
from muster.sdk.client import Client
from muster.sdk.status import task_rows
from muster.store.events import event_namespace, refers_to
from muster.store.objects import body

__all__ = ["describe"]

_RECENT_EVENTS = 20


@app.command()
def describe(
    kind: Annotated[str, typer.Argument(help="Kind (or KIND/NAME).", autocompletion=complete_kind)],
    name: Annotated[str | None, typer.Argument(help="Name; all objects of the kind when omitted.")] = None,
    namespace: NamespaceOpt = "default",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Show one object in detail, with the events recorded about it."""
    with handle_errors():
        info, name = resolve_ref(kind, name)
        ns = namespace if info.namespaced else None
        with connect(server, token) as client:
            objects = [client.get(info.kind, name, ns)] if name else client.list(info.kind, ns)["items"]
            if not objects:
                console.print("No resources found.", markup=False)
            for i, obj in enumerate(objects):
                if i:
                    console.print()
                _describe(client, obj)


def _describe(client: Client, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    now = datetime.now(UTC)
    fields = [
        ("Name", meta["name"]),
        ("Namespace", meta.get("namespace")),
        ("Kind", obj["kind"]),
        ("Labels", _pairs(meta.get("labels"))),
        ("Annotations", _pairs(meta.get("annotations"))),
        ("Created", f"{meta.get('creationTimestamp')} ({age(meta.get('creationTimestamp'), now)} ago)"),
        ("UID", meta.get("uid")),
        ("Resource Version", meta.get("resourceVersion")),
        ("Generation", meta.get("generation")),
    ]
    for label, value in fields:
        if value not in (None, ""):
            _line(f"{label + ':':<18}{value}")
    fields_ = body(obj)
    # Most kinds keep everything under spec; others (PriorityClass, Event) at the top level.
    spec = fields_["spec"] if set(fields_) == {"spec"} else fields_
    if spec:
        _section("Spec", spec)
    status = dict(obj.get("status") or {})
    conditions = status.pop("conditions", None) or []
    tasks = obj["kind"] == "Workflow" and status.pop("nodes", None) is not None
    if status:
        _section("Status", status)
    if tasks:
        _line("Tasks:")
        print_tasks(obj, wide=True, indent="  ")
        _results(obj)
    if conditions:
        _line("Conditions:")
        print_rows(
            ["TYPE", "STATUS", "REASON", "MESSAGE", "LAST-TRANSITION"],
            [
                [
                    c.get("type", ""),
                    c.get("status", ""),
                    c.get("reason", ""),
                    c.get("message", ""),
                    _ago(c, now),
                ]
                for c in conditions
            ],
            indent="  ",
        )
    if obj["kind"] != "Event":
        _events(client, obj, now)


def _results(wf: dict[str, Any]) -> None:
    """Each task run's output parameters and artifacts (what a later task or a person reads)."""
    nodes = (wf.get("status") or {}).get("nodes") or {}
    lines = []
    for row in task_rows(wf):
        outputs = (nodes.get(row.task.strip()) or {}).get("outputs") or {}
        values = [*(outputs.get("parameters") or {}).items(), *(outputs.get("artifacts") or {}).items()]
        if values:
            lines.append(f"  {row.task.strip()}:")
            lines += [f"    {name} = {value}" for name, value in values]
    if lines:
        _line("Results:")
        for text in lines:
            _line(text)


def _events(client: Client, obj: dict[str, Any], now: datetime) -> None:
    listed = client.list("Event", event_namespace(obj))["items"]
    events = sorted((e for e in listed if refers_to(e, obj)), key=lambda e: e.get("lastTimestamp") or "")
    if not events:
        _line("Events:           <none>")
        return
    _line("Events:")
    print_rows(
        ["LAST-SEEN", "TYPE", "REASON", "COUNT", "MESSAGE"],
        [
            [
                age(e.get("lastTimestamp"), now),
                e.get("type", ""),
                e.get("reason", ""),
                str(e.get("count", 1)),
                e.get("message", ""),
            ]
            for e in events[-_RECENT_EVENTS:]
        ],
        indent="  ",
    )


def _section(title: str, value: Any) -> None:
    _line(f"{title}:")
    for text in to_yaml(value).rstrip("\n").splitlines():
        _line(f"  {text}")


def _pairs(mapping: dict[str, str] | None) -> str | None:
    return ", ".join(f"{k}={v}" for k, v in sorted(mapping.items())) if mapping else None


def _ago(condition: dict[str, Any], now: datetime) -> str:
    when = condition.get("lastTransitionTime")
    return f"{age(when, now)} ago" if when else ""


def _line(text: str) -> None:
    console.print(text, markup=False, highlight=False)
