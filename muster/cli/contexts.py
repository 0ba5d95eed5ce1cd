"""``muster config``: servers, credentials and contexts in the client config file, as kubeconfig.

    muster config set-cluster lab --server http://gpu-box:7070
    muster config set-credentials alice --token "$(cat alice.token)"
    muster config set-context team-a --cluster lab --user alice --namespace team-a
    muster config use-context team-a

The file is ``$MUSTER_HOME/config`` (or ``$MUSTER_CONFIG``), mode 0600; ``view`` hides tokens
unless ``--raw``. A context's namespace is the default of every ``-n``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from muster.cli.app import app, console
from muster.cli.common import fail
from muster.cli.output import Output, print_rows, print_value
from muster.home import config_path, home_dir
from muster.sdk.contexts import ClientConfig, ConfigError, load_config, save_config

__all__ = ["config_app"]

config_app = typer.Typer(
    name="config", help="Servers, credentials and contexts (like kubeconfig).", no_args_is_help=True
)
app.add_typer(config_app)

NameArg = Annotated[str, typer.Argument(help="The name.")]


@config_app.command("view")
def view(
    raw: Annotated[bool, typer.Option("--raw", help="Show tokens too.")] = False,
    output: Annotated[Output, typer.Option("--output", "-o", help="yaml or json.")] = Output.yaml,
) -> None:
    """Print the config file (tokens REDACTED unless --raw)."""
    print_value(_load().to_dict(redact=not raw), Output.json if output == Output.json else Output.yaml)


@config_app.command("get-contexts")
def get_contexts() -> None:
    """List the contexts; * marks the current one."""
    cfg = _load()
    rows = [
        [
            "*" if name == cfg.current_context else "",
            name,
            str(ctx.get("cluster") or ""),
            str(ctx.get("user") or ""),
            str(ctx.get("namespace") or ""),
        ]
        for name, ctx in sorted(cfg.contexts.items())
    ]
    print_rows(["CURRENT", "NAME", "CLUSTER", "AUTHINFO", "NAMESPACE"], rows)


@config_app.command("current-context")
def current_context() -> None:
    """Print the current context."""
    cfg = _load()
    if not cfg.current_context:
        fail("current-context is not set (muster config use-context NAME)")
    console.print(cfg.current_context, markup=False)


@config_app.command("use-context")
def use_context(name: NameArg) -> None:
    """Make NAME the current context."""

    def change(cfg: ClientConfig) -> None:
        if name not in cfg.contexts:
            fail(f"no context {name!r} (known: {', '.join(sorted(cfg.contexts)) or 'none'})")
        cfg.current_context = name

    _edit(change, f'Switched to context "{name}".')


@config_app.command("set-cluster")
def set_cluster(
    name: NameArg,
    server: Annotated[str, typer.Option("--server", help="The server's URL, e.g. http://gpu-box:7070.")],
) -> None:
    """Add or change a server."""
    if not server.startswith(("http://", "https://")):
        fail(f"--server {server!r}: give a URL such as http://{server}", 2)

    def change(cfg: ClientConfig) -> None:
        cfg.clusters[name] = {**cfg.clusters.get(name, {}), "server": server.rstrip("/")}

    _edit(change, f'Cluster "{name}" set.')


@config_app.command("set-credentials")
def set_credentials(
    name: NameArg,
    token: Annotated[str, typer.Option("--token", help="The bearer token (muster token create).")],
) -> None:
    """Add or change a user's token."""

    def change(cfg: ClientConfig) -> None:
        cfg.users[name] = {**cfg.users.get(name, {}), "token": token.strip()}

    _edit(change, f'User "{name}" set.')


@config_app.command("set-context")
def set_context(
    name: NameArg,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="A cluster of the file.", show_default=False)
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="A user of the file.", show_default=False)
    ] = None,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="The default namespace.", show_default=False)
    ] = None,
) -> None:
    """Add or change a context (what is not given is kept)."""

    def change(cfg: ClientConfig) -> None:
        ctx = dict(cfg.contexts.get(name, {}))
        for key, value, known in (("cluster", cluster, cfg.clusters), ("user", user, cfg.users)):
            if value is not None:
                if value not in known:
                    fail(
                        f"--{key} {value!r} is not in the config: "
                        f"add it with muster config set-{_setter(key)}"
                    )
                ctx[key] = value
        if namespace is not None:
            ctx["namespace"] = namespace
        cfg.contexts[name] = ctx

    _edit(change, f'Context "{name}" set.')


@config_app.command("delete-context")
def delete_context(name: NameArg) -> None:
    """Remove a context."""

    def change(cfg: ClientConfig) -> None:
        if cfg.contexts.pop(name, None) is None:
            fail(f"no context {name!r}")
        if cfg.current_context == name:
            cfg.current_context = None

    _edit(change, f'Deleted context "{name}".')


def _setter(key: str) -> str:
    return "cluster" if key == "cluster" else "credentials"


def _load() -> ClientConfig:
    try:
        return load_config(config_path(home_dir()))
    except ConfigError as exc:
        fail(str(exc))


def _edit(change: Callable[[ClientConfig], None], done: str) -> None:
    """Read the file, ``change`` it (which may fail), write it back (0600), say ``done``."""
    cfg = _load()
    change(cfg)
    save_config(config_path(home_dir()), cfg)
    console.print(done, markup=False)
