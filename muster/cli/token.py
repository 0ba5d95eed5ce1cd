"""``muster token show``: the bearer token the CLI uses, bare, for the dashboard's sign-in
and for scripts (``curl -H "Authorization: Bearer $(muster token show)"``)."""

from __future__ import annotations

import typer

from muster.cli.app import app, console
from muster.cli.common import EXIT_BAD_INPUT, TokenOpt, fail

__all__ = ["token_app"]

token_app = typer.Typer(name="token", help="The bearer token the CLI uses.", no_args_is_help=True)
app.add_typer(token_app)


@token_app.command()
def show(token: TokenOpt = None) -> None:
    """Print the token (--token, else $MUSTER_TOKEN, else $MUSTER_HOME/credentials) alone on a line.

    Exit status 2 when none is found: start the server with `muster up`, which writes one.
    """
    from muster.home import CREDENTIALS, home_dir
    from muster.sdk.client import discover_token

    found = discover_token(token)
    if not found:
        fail(
            f"no token: neither --token, MUSTER_TOKEN nor {home_dir() / CREDENTIALS} names one "
            "(`muster up` writes it there on first start)",
            EXIT_BAD_INPUT,
        )
    console.print(found, markup=False)
