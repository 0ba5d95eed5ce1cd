"""The root Typer application and what every command module shares.

Command modules register themselves on :data:`app` (or add a sub-app) when imported; the root
group (:class:`LazyGroup`) imports the module of the verb being run only, by :data:`COMMANDS`.
One module per verb group.
"""

# No `from __future__ import annotations` here: Typer would evaluate the string annotations of
# the commands again on every call (docs/cli.md, "Start-up").

import gc
import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["COMMANDS", "LazyGroup", "app", "console", "err_console", "load", "load_all", "start_collector"]

# verb -> module under muster.cli that registers it on `app` when imported; keep this sorted.
COMMANDS: dict[str, str] = {
    "api-resources": "resources",
    "apply": "apply",
    "audit": "audit",
    "auth": "auth",
    "config": "contexts",
    "cost": "cost",
    "delete": "delete",
    "demo": "demo",
    "describe": "describe",
    "doctor": "doctor",
    "get": "get",
    "logs": "logs",
    "node": "node",
    "patch": "patch",
    "resubmit": "retry",
    "resume": "suspend",
    "retry": "retry",
    "sched": "sched",
    "sim": "sim",
    "suspend": "suspend",
    "token": "token",
    "top": "top",
    "up": "up",
    "version": "version",
    "whoami": "auth",
    "why": "why",
}


def load(verb: str) -> None:
    """Import the module that registers ``verb`` (a no-op for an unknown one)."""
    module = COMMANDS.get(verb)
    if module is not None:
        importlib.import_module(f"muster.cli.{module}")


def load_all() -> None:
    for verb in COMMANDS:
        load(verb)


class LazyGroup(TyperGroup):
    """The root group: knows every verb by name and loads its module on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: Any, cmd_name: str) -> Any | None:
        found = super().get_command(ctx, cmd_name)
        if found is None:
            load(cmd_name)
            self._adopt()
            found = super().get_command(ctx, cmd_name)
        return found

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._load_all()  # the help lists every verb with its summary
        super().format_help(ctx, formatter)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any | None, list[str]]:
        if args and args[0] not in COMMANDS:
            self._load_all()  # an unknown verb: suggestions need every name
        return super().resolve_command(ctx, args)

    def _load_all(self) -> None:
        load_all()
        self._adopt()

    def _adopt(self) -> None:
        """Take the commands the modules imported so far registered on :data:`app`."""
        # Typer builds its commands on its own copy of click: duck-typed, not isinstance.
        built = typer.main.get_command(app)
        for name, command in getattr(built, "commands", {}).items():
            self.commands.setdefault(name, command)


app = typer.Typer(
    name="muster",
    cls=LazyGroup,
    help="Muster: quotas, gang scheduling and pipelines for shared GPUs.",
    no_args_is_help=True,
    # `muster --install-completion` (bash, zsh, fish, PowerShell), as kubectl completion.
    add_completion=True,
    pretty_exceptions_enable=False,
)


class _LazyConsole:
    """A rich Console made on first use. Plain text bound for a pipe or a file (what scripts
    read: no colours, no wrapping since the consoles soft-wrap) is written directly, so a
    CLI call whose output is not a terminal does not pay for importing rich."""

    def __init__(self, stderr: bool = False, **options: Any) -> None:
        self._stderr = stderr
        self._options = options
        self._console: Any = None

    def print(self, *objects: Any, markup: bool | None = None, end: str = "\n", **kwargs: Any) -> None:
        stream = sys.stderr if self._stderr else sys.stdout
        plain = all(isinstance(o, str) for o in objects) and (
            markup is False or not any("[" in o for o in objects)
        )
        if self._console is None and plain and not _terminal(stream):
            stream.write(" ".join(objects) + end)
            return
        self.rich().print(*objects, markup=markup, end=end, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rich(), name)

    def rich(self) -> Any:
        """The rich Console itself, for rich objects that take one (Live, Progress)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr, **self._options)
        return self._console


def _terminal(stream: Any) -> bool:
    # FORCE_COLOR makes rich style even a pipe; honour it by going through rich.
    return bool(os.environ.get("FORCE_COLOR")) or (hasattr(stream, "isatty") and stream.isatty())


console: Any = _LazyConsole(highlight=False, soft_wrap=True)
err_console: Any = _LazyConsole(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root(ctx: typer.Context) -> None:
    """Muster: quotas, gang scheduling and pipelines for shared GPUs."""
    start_collector()  # the verb's module is loaded: what runs now may make garbage
    # The namespace of the context in use (muster config) is every command's default -n.
    from muster.sdk.contexts import context_namespace

    namespace = context_namespace()
    if namespace:
        ctx.default_map = _namespace_defaults(ctx.command, namespace)


def start_collector() -> None:
    """Start the cycle collector that the console script (muster.cli.main) stopped for the
    imports, first freezing what they made: long-lived, never garbage, so never scanned."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _namespace_defaults(command: object, namespace: str) -> dict:
    """Click's default_map giving every command that has a ``namespace`` option ``namespace``."""
    out: dict = {}
    for name, sub in (getattr(command, "commands", None) or {}).items():
        if getattr(sub, "commands", None):
            out[name] = _namespace_defaults(sub, namespace)
        elif any(p.name == "namespace" for p in sub.params):
            out[name] = {"namespace": namespace}
    return out
