"""``$MUSTER_HOME`` and the files a client reads there, with the standard library only: the CLI
finds its server and token on every call, and must not pay for the settings machinery
(:mod:`muster.config`, which builds on these) to do so."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = [
    "CREDENTIALS",
    "DEFAULT_HOME",
    "SERVER_FILE",
    "home_dir",
    "read_credentials",
    "read_server_file",
]

DEFAULT_HOME = "~/.muster"
CREDENTIALS = "credentials"  # {"user", "token"}, 0600, written by `muster up`
SERVER_FILE = "server.json"  # {"url"}, written by `muster up` so the CLI finds it


def home_dir(home: str | Path | None = None) -> Path:
    """``home`` when given, else ``$MUSTER_HOME``, else ``~/.muster``."""
    chosen = home if home is not None else os.environ.get("MUSTER_HOME") or DEFAULT_HOME
    return Path(os.path.expanduser(str(chosen)))


def read_server_file(home: Path) -> dict[str, str] | None:
    """The ``server.json`` a running ``muster up`` wrote in ``home``, or None."""
    try:
        return json.loads((home / SERVER_FILE).read_text())
    except (OSError, ValueError):
        return None


def read_credentials(path: Path) -> dict[str, str] | None:
    """The ``credentials`` file (``{"user": ..., "token": ...}``) ``muster up`` wrote, or None
    when it is missing or malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str):
        return None
    return {"user": str(data.get("user", "")), "token": data["token"]}
