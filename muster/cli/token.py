"""``muster token create|list|revoke|show``: tokens of users and ServiceAccounts.

``create`` prints the token alone on stdout (``export MUSTER_TOKEN=$(muster token create ...)``)
and what it is on stderr; the server keeps only its hash, so it is shown this once.
``show`` prints the bootstrap admin token ``muster up`` wrote into ``$MUSTER_HOME/credentials``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

from muster.cli.app import app, console, err_console
from muster.cli.common import (
    EXIT_BAD_INPUT,
    BadInput,
    ServerOpt,
    TokenOpt,
    connect,
    fail,
    handle_errors,
)
from muster.cli.output import Output, print_records, print_value
from muster.home import CREDENTIALS, home_dir, read_credentials

__all__ = ["parse_duration", "token_app"]

token_app = typer.Typer(name="token", help="Tokens of users and ServiceAccounts.", no_args_is_help=True)
app.add_typer(token_app)

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@token_app.command("create")
def create(
    user: Annotated[
        str | None, typer.Option("--user", help="The user the token signs in as.", show_default=False)
    ] = None,
    group: Annotated[
        list[str] | None,
        typer.Option(
            "--group", "-g", help="A group the user is in with this token (repeat).", show_default=False
        ),
    ] = None,
    serviceaccount: Annotated[
        str | None,
        typer.Option("--serviceaccount", help="NAMESPACE/NAME of a ServiceAccount.", show_default=False),
    ] = None,
    expires: Annotated[str, typer.Option("--expires", help="Lifetime: 30m, 12h, 30d, 2w, or never.")] = "30d",
    description: Annotated[str, typer.Option("--description", help="What the token is for.")] = "",
    output: Annotated[
        Output | None,
        typer.Option("--output", "-o", help="json or yaml: the whole answer.", show_default=False),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Make a token for a user (--user, --group) or a ServiceAccount (--serviceaccount NS/NAME)."""
    with handle_errors():
        if bool(user) == bool(serviceaccount):
            raise BadInput(["error: give --user NAME or --serviceaccount NAMESPACE/NAME (one of them)"])
        if serviceaccount and group:
            raise BadInput(["error: --group is for users; a ServiceAccount's groups are its own"])
        seconds = parse_duration(expires)
        sa = _service_account(serviceaccount) if serviceaccount else None
        with connect(server, token) as client:
            made = client.create_token(
                user, group or [], service_account=sa, expiration_seconds=seconds, description=description
            )
        if output in (Output.json, Output.yaml):
            print_value(made, output)
            return
        spec = made["spec"]
        until = spec.get("expirationTimestamp") or "never"
        groups = f" (groups {', '.join(spec['groups'])})" if spec.get("groups") else ""
        err_console.print(
            f"token {made['metadata']['name']} for {spec['user']}{groups}, expires {until}; "
            "it is shown only now: keep it safe",
            markup=False,
        )
        console.print(made["status"]["token"], markup=False, soft_wrap=True)


@token_app.command("list")
def list_tokens(
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="Only the ServiceAccount tokens of this namespace.", show_default=False
        ),
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """The tokens you may list (never a token itself)."""
    with handle_errors(), connect(server, token) as client:
        items = client.tokens(namespace)
    headers = ["ID", "NAMESPACE", "USER", "GROUPS", "EXPIRES", "CREATED BY", "DESCRIPTION"]
    print_records("TokenList", items, output, headers, [_row(t) for t in items], "No tokens found.")


@token_app.command("revoke")
def revoke(
    ids: Annotated[list[str], typer.Argument(help="Token ids (muster token list).")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="The namespace of ServiceAccount tokens.", show_default=False),
    ] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Revoke tokens: refused from the next request on."""
    with handle_errors(), connect(server, token) as client:
        where = {t["metadata"]["name"]: t["metadata"].get("namespace") for t in client.tokens(namespace)}
        for token_id in ids:
            if token_id not in where:
                fail(
                    f"token {token_id} not found (muster token list{' -n ' + namespace if namespace else ''})"
                )
            client.revoke_token(token_id, where[token_id])
            console.print(f"token {token_id} revoked", markup=False)


@token_app.command("show")
def show() -> None:
    """Print the bootstrap admin token of this MUSTER_HOME (what `muster up` made)."""
    path = home_dir() / CREDENTIALS
    creds = read_credentials(path)
    if creds is None:
        fail(f"no credentials in {path}: `muster up` makes them on its first start")
    console.print(creds["token"], markup=False, soft_wrap=True)


def parse_duration(text: str) -> int | None:
    """Seconds of ``30m``, ``12h``, ``30d``, ``2w``; None for ``never``."""
    if text.strip().lower() == "never":
        return None
    m = _DURATION.match(text.strip())
    if not m:
        fail(f"--expires {text!r}: give a number with s, m, h, d or w (30d, 12h), or never", EXIT_BAD_INPUT)
    return int(m.group(1)) * _SECONDS[m.group(2)]


def _service_account(text: str) -> tuple[str, str]:
    ns, _, name = text.partition("/")
    if not ns or not name or "/" in name:
        raise BadInput([f"error: --serviceaccount {text!r}: give NAMESPACE/NAME"])
    return ns, name


def _row(t: dict[str, Any]) -> list[str]:
    spec, status = t["spec"], t.get("status") or {}
    expires = spec.get("expirationTimestamp") or "never"
    if status.get("expired"):
        expires += " (expired)"
    return [
        t["metadata"]["name"],
        t["metadata"].get("namespace") or "",
        spec.get("user", ""),
        ",".join(spec.get("groups") or []),
        expires,
        spec.get("createdBy", ""),
        spec.get("description", ""),
    ]
