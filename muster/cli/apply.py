"""``muster apply -f FILE|DIR|-``: create or update every document, all or none."""

# No `from __future__ import annotations` here: Typer would evaluate the string annotations of
# the commands again on every call (docs/cli.md, "Start-up").

from typing import Annotated

import typer

from muster.api.errors import FieldError, error_line
from muster.cli.app import app, console, err_console
from muster.cli.common import BadInput, ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.manifests import read_sources
from muster.sdk.errors import Invalid

__all__ = ["apply"]


@app.command()
def apply(
    filename: Annotated[
        list[str],
        typer.Option("--filename", "-f", help="A YAML/JSON file, a directory of them, or - for stdin."),
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate and show what would change.")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Create or update the objects in FILE (multi-document YAML or JSON).

    Every document is validated first; if any is bad, nothing is applied and each problem
    is printed as FILE[DOC] PATH: RULE (exit status 2). The server parses the files (this
    command stays quick to start: docs/cli.md)."""
    with handle_errors():
        sources = read_sources(filename)
        with connect(server, token) as client:
            try:
                results = client.apply_sources(sources, dry_run=dry_run)
            except Invalid as exc:
                raise BadInput(_error_lines(exc)) from None
    suffix = " (dry run)" if dry_run else ""
    for result in results:
        ref = f"{result['kind'].lower()}/{result['name']}"
        for warning in result.get("warnings") or []:
            err_console.print(f"warning: {ref}: {warning}", markup=False)
        console.print(f"{ref} {result['action']}{suffix}", markup=False)


def _error_lines(exc: Invalid) -> list[str]:
    lines = []
    for data in exc.errors:
        index = data.get("document")
        where = data.get("where") or (f"document {index}" if index is not None else "request")
        lines.append(error_line(where, FieldError.from_dict(data)))
    lines.append("error: nothing was applied; fix the documents above and apply again")
    return lines
