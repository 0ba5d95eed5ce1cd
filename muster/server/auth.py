"""Bearer-token authentication and the admin credentials of the embedded server.

On first start ``muster up`` generates an admin token into ``$MUSTER_HOME/credentials``
(JSON, mode 0600, created with O_EXCL so two starting servers cannot both write it). Every
request but ``GET /healthz`` must carry ``Authorization: Bearer <token>``; anything else gets
401 in the API's error shape. Roles and bindings (DESIGN §10) will map tokens to
identities here; until then a valid token is the admin.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from muster.config import read_credentials
from muster.server.errors import error_response

__all__ = ["BearerAuth", "Credentials", "load_credentials", "load_or_create_credentials"]

PUBLIC_PATHS = frozenset({"/healthz"})


@dataclass(frozen=True)
class Credentials:
    """The contents of ``$MUSTER_HOME/credentials``."""

    user: str
    token: str


def load_credentials(path: Path) -> Credentials | None:
    """The credentials at ``path``, or None when the file is missing or unreadable."""
    data = read_credentials(path)
    return Credentials(user=data["user"], token=data["token"]) if data else None


def load_or_create_credentials(path: Path) -> Credentials:
    """Read the admin credentials, generating them (mode 0600) when the file does not exist."""
    existing = load_credentials(path)
    if existing is not None:
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    creds = Credentials(user="admin", token=secrets.token_urlsafe(32))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process created it between our read and our create: use theirs.
        found = load_credentials(path)
        if found is None:
            raise RuntimeError(
                f"{path} exists but is not valid credentials JSON; remove it to regenerate"
            ) from None
        return found
    with os.fdopen(fd, "w") as f:
        json.dump({"user": creds.user, "token": creds.token}, f)
        f.write("\n")
    return creds


class BearerAuth:
    """ASGI middleware: 401 unless the request carries one of ``tokens`` (or is public)."""

    def __init__(
        self, app: ASGIApp, tokens: Collection[str], public_paths: Collection[str] = PUBLIC_PATHS
    ) -> None:
        if not tokens:
            raise ValueError("the server needs at least one token")
        self.app = app
        self.tokens = [t.encode() for t in tokens]
        self.public_paths = frozenset(public_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public_paths:
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        if presented is None:
            message = (
                "authentication required: send 'Authorization: Bearer <token>' (see $MUSTER_HOME/credentials)"
            )
            await error_response(401, message, "Unauthorized")(scope, receive, send)
            return
        # compare_digest against every token: the time taken does not reveal which one matched.
        if not any([secrets.compare_digest(presented, t) for t in self.tokens]):
            await error_response(401, "invalid token", "Unauthorized")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return token.strip()
    return None
