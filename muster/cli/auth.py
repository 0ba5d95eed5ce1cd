"""``muster whoami`` and ``muster auth can-i``, as ``kubectl auth whoami`` and ``kubectl auth can-i``.

``can-i VERB RESOURCE[/NAME]`` prints ``yes`` (exit 0) or ``no`` (exit 1, the reason on stderr);
``can-i VERB /PATH`` asks about a non-resource URL; ``--list`` prints every rule that applies
in the namespace; ``--as USER`` asks about someone else (needs ``create subjectaccessreviews``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from muster.cli.app import app, console, err_console
from muster.cli.common import BadInput, NamespaceOpt, ServerOpt, TokenOpt, connect, handle_errors
from muster.cli.output import Output, print_rows, print_value

__all__ = ["auth_app", "whoami"]

auth_app = typer.Typer(name="auth", help="Inspect what you may do.", no_args_is_help=True)
app.add_typer(auth_app)


@app.command()
def whoami(
    output: Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml.")] = Output.table,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Who the server takes you for: user name, groups and the token's id and expiry."""
    with handle_errors(), connect(server, token) as client:
        info = client.whoami()
    if output in (Output.json, Output.yaml):
        print_value(info, output)
        return
    extra = info.get("extra") or {}
    rows = [["Username", info["username"]], ["Groups", "[" + " ".join(info.get("groups") or []) + "]"]]
    if extra.get("muster.dev/token-id"):
        rows.append(["Token", extra["muster.dev/token-id"][0]])
    if extra.get("muster.dev/token-expiration"):
        rows.append(["Expires", extra["muster.dev/token-expiration"][0]])
    print_rows(["ATTRIBUTE", "VALUE"], rows)


@auth_app.command("can-i")
def can_i(
    verb: Annotated[
        str | None,
        typer.Argument(
            help="get, list, watch, create, update, patch, delete, deletecollection, *.", show_default=False
        ),
    ] = None,
    resource: Annotated[
        str | None,
        typer.Argument(
            help="RESOURCE[.GROUP][/NAME] (trainingjobs, tj/mnist, pods, localqueues.kueue.x-k8s.io) "
            "or a /PATH.",
            show_default=False,
        ),
    ] = None,
    namespace: NamespaceOpt = "default",
    all_namespaces: Annotated[
        bool, typer.Option("--all-namespaces", "-A", help="In every namespace (cluster-wide).")
    ] = False,
    subresource: Annotated[
        str | None,
        typer.Option("--subresource", help="A subresource, e.g. log or status.", show_default=False),
    ] = None,
    as_user: Annotated[
        str | None, typer.Option("--as", help="Ask about this user instead of yourself.", show_default=False)
    ] = None,
    as_group: Annotated[
        list[str] | None, typer.Option("--as-group", help="A group of --as (repeat).", show_default=False)
    ] = None,
    list_rules: Annotated[
        bool, typer.Option("--list", help="Print every rule that applies to you in the namespace.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing; answer by exit code.")] = False,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Check whether an action is allowed: prints yes (exit 0) or no (exit 1)."""
    ns = None if all_namespaces else namespace
    with handle_errors(), connect(server, token) as client:
        if list_rules:
            _print_rules(client.rules(ns))
            return
        if verb is None or resource is None:
            raise BadInput(["error: give VERB and RESOURCE (or /PATH) to check, or --list"])
        if resource.startswith("/"):
            allowed, reason = client.can_i(verb, path=resource, as_user=as_user, as_groups=as_group or [])
        else:
            base, _, name = resource.partition("/")
            plural, _, group = base.partition(".")
            allowed, reason = client.can_i(
                verb,
                plural,
                ns,
                name or None,
                subresource=subresource,
                group=group or None,
                as_user=as_user,
                as_groups=as_group or [],
            )
    if not quiet:
        console.print("yes" if allowed else "no", markup=False)
        if not allowed and reason:
            err_console.print(reason, markup=False)
    raise typer.Exit(0 if allowed else 1)


def _print_rules(status: dict) -> None:
    rows = [
        [
            ",".join(r.get("resources") or []) + _groups(r.get("apiGroups") or []),
            "[]",
            "[" + " ".join(r.get("resourceNames") or []) + "]",
            "[" + " ".join(r.get("verbs") or []) + "]",
        ]
        for r in status.get("resourceRules") or []
    ]
    rows += [
        [
            "",
            "[" + " ".join(r.get("nonResourceURLs") or []) + "]",
            "[]",
            "[" + " ".join(r.get("verbs") or []) + "]",
        ]
        for r in status.get("nonResourceRules") or []
    ]
    print_rows(["RESOURCES", "NON-RESOURCE URLS", "RESOURCE NAMES", "VERBS"], rows)


def _groups(groups: list[str]) -> str:
    shown = [g for g in groups if g != "muster.dev"]
    return ("." + "|".join(g or "core" for g in shown)) if shown else ""
