"""What the client commands share: the server/token options, connecting, and turning errors
into messages and exit codes.

Exit codes: 0 success; 1 a runtime or server error (no server, not found, conflict); 2 bad
input (YAML syntax, an invalid document, an unknown kind, a bad selector or option).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, NoReturn

import typer

from muster.api import kinds
from muster.api.kinds import Kind, UnknownKind, lookup
from muster.cli.app import err_console
from muster.sdk.client import Client, discover
from muster.sdk.contexts import ConfigError
from muster.sdk.errors import ApiError, ApiUnavailable, BadRequest, Invalid, InvalidServerUrl, Unauthorized
from muster.store.errors import InvalidSelector

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ERROR",
    "BadInput",
    "NamespaceOpt",
    "ServerOpt",
    "TokenOpt",
    "check_selector",
    "complete_kind",
    "connect",
    "fail",
    "handle_errors",
    "resolve_kind",
    "resolve_ref",
    "resolve_target",
    "split_ref",
]

EXIT_ERROR = 1
EXIT_BAD_INPUT = 2

ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Server URL (default: $MUSTER_SERVER, the context's cluster, then the running `muster up`).",
        show_default=False,
    ),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Bearer token (default: $MUSTER_TOKEN, the context's user, then $MUSTER_HOME/credentials).",
        show_default=False,
    ),
]
NamespaceOpt = Annotated[
    str, typer.Option("--namespace", "-n", help="Namespace of namespaced kinds (default: the context's).")
]


class BadInput(Exception):
    """Input the user must fix; each line is printed as is, then the command exits 2."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def connect(server: str | None, token: str | None) -> Client:
    """A client for the discovered server. No request is made yet: when none answers, the
    command's first request raises ApiUnavailable, which :func:`handle_errors` turns into how
    to start one (exit 1), so a call costs no extra round trip."""
    url, tok = discover(server, token)
    return Client(url, tok)


def check_selector(selector: str | None) -> None:
    """Refuse a malformed -l before any request (InvalidSelector); the parser is loaded only
    when a selector is given."""
    if selector:
        from muster.store.selector import parse_selector

        parse_selector(selector)


def complete_kind(incomplete: str) -> list[str]:
    """Shell completion of a KIND argument: the plural names and short names (and the
    converted kinds' names) that start with what was typed."""
    typed = incomplete.lower()
    return [n for n in kinds.names() if n.startswith(typed)]


def resolve_kind(name: str) -> Kind:
    try:
        return lookup(name)
    except UnknownKind as exc:
        raise BadInput([f"error: {exc}"]) from None


def split_ref(kind: str, name: str | None) -> tuple[str, str | None]:
    """``tj/mnist`` -> (``tj``, ``mnist``); a second NAME with KIND/NAME is an error."""
    if "/" not in kind:
        return kind, name
    kind_part, _, name_part = kind.partition("/")
    if name:
        raise BadInput([f"error: give KIND/NAME or KIND NAME, not both ({kind} {name})"])
    if not kind_part or not name_part:
        raise BadInput([f"error: {kind!r} is not KIND/NAME"])
    return kind_part, name_part


def resolve_ref(kind: str, name: str | None) -> tuple[Kind, str | None]:
    """The kind and name of ``KIND NAME`` or ``KIND/NAME`` (name None when not given)."""
    kind, name = split_ref(kind, name)
    return resolve_kind(kind), name


def resolve_target(ref: str, kinds: tuple[str, ...], default_kind: str | None = None) -> tuple[str, str]:
    """``(Kind, name)`` of ``KIND/NAME`` (``job/NAME`` is a TrainingJob), or of a bare NAME of
    ``default_kind``; the kind must be one of ``kinds``."""
    if "/" not in ref:
        if default_kind is None:
            raise BadInput([f"error: {ref!r} is not KIND/NAME (e.g. job/{ref})"])
        return default_kind, ref
    kind_part, name = split_ref(ref, None)
    assert name is not None
    kind = resolve_kind(kind_part).kind  # `job/NAME` too: a converted batch/v1 Job is a TrainingJob
    if kind not in kinds:
        allowed = ", ".join(f"{k.lower()}/NAME" for k in kinds)
        raise BadInput([f"error: {ref!r}: this command takes {allowed} (and job/NAME for a TrainingJob)"])
    return kind, name


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    err_console.print(f"error: {message}", markup=False)
    raise typer.Exit(code)


@contextmanager
def handle_errors() -> Iterator[None]:
    """Print an error the way a user can act on it and exit with its code."""
    try:
        yield
    except BadInput as exc:
        for line in exc.lines:
            err_console.print(line, markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except (InvalidSelector, InvalidServerUrl) as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except ConfigError as exc:
        fail(f"{exc} (muster config get-contexts)", EXIT_BAD_INPUT)
    except ApiUnavailable as exc:
        fail(f"no Muster server at {exc.url}; start one with `muster up` (or set MUSTER_SERVER)")
    except Unauthorized as exc:
        fail(f"{exc.message} (server {exc.code}); check --token, MUSTER_TOKEN or $MUSTER_HOME/credentials")
    except (Invalid, BadRequest) as exc:
        lines = [f"error: {fe}" for _doc, fe in exc.field_errors()] or [f"error: {exc.message}"]
        for line in lines:
            err_console.print(line, markup=False)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ApiError as exc:
        fail(exc.message)
