"""``muster audit`` (and ``muster get events --audit``): who changed what, when, with what result.

Newest first; ``-n`` one namespace, ``-A`` all you may read (the default); filters by user,
verb, resource, name, time (``--since 2h``) and outcome (``--failed``). The server keeps the
records ``MUSTER_AUDIT_RETENTION_DAYS`` days (30).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from muster.cli.app import app
from muster.cli.common import ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.output import Output, print_records

__all__ = ["audit", "print_audit"]


@app.command()
def audit(
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Only this namespace (default: every one you may read).",
            show_default=False,
        ),
    ] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user.", show_default=False)] = None,
    verb: Annotated[str | None, typer.Option("--verb", help="Only this verb.", show_default=False)] = None,
    resource: Annotated[
        str | None,
        typer.Option("--resource", help="Only this resource (tj, trainingjobs, ...).", show_default=False),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="Only objects of this name.", show_default=False)
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="RFC 3339 time or a duration back (30m, 2h, 7d).", show_default=False),
    ] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only refused or failed requests.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10_000, help="At most this many.")] = 200,
    output: Annotated[
        Output, typer.Option("--output", "-o", help="table, wide, json or yaml.")
    ] = Output.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """The audit log: every request that changed (or tried to change) something."""
    with handle_errors(), connect(server, token) as client:
        items = client.audit(
            namespace,
            user=user,
            verb=verb,
            resource=resource,
            name=name,
            since=since,
            failed=True if failed else None,
            limit=limit,
        )
    print_audit(items, output)


def print_audit(items: list[dict[str, Any]], output: Output) -> None:
    wide = output == Output.wide
    headers = ["TIME", "USER", "VERB", "RESOURCE", "NAMESPACE", "NAME", "CODE"]
    if wide:
        headers += ["SOURCE", "TOKEN", "OBJECTS"]
    rows = []
    for e in items:
        res = e.get("resource", "") + (f"/{e['subresource']}" if e.get("subresource") else "")
        row = [
            e["time"][:19] + "Z",
            e.get("user", ""),
            e.get("verb", ""),
            res,
            e.get("namespace", ""),
            e.get("name", ""),
            str(e.get("code", "")),
        ]
        if wide:
            row += [e.get("sourceIP", ""), e.get("tokenId", ""), ",".join(e.get("objects") or [])]
        rows.append(row)
    print_records("AuditEventList", items, output, headers, rows, "No audit records found.")
