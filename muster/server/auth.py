"""Token authentication and the admin credentials of the embedded server.

On first start ``muster up`` generates an admin token into ``$MUSTER_HOME/credentials``
(JSON, mode 0600, created with O_EXCL so two starting servers cannot both write it). Every
request but ``GET /healthz`` (and the dashboard's sign-in page and static files, which hold
no data) must carry a token; anything else gets 401 in the API's error shape. The bootstrap
token is the user ``admin`` in the group ``system:masters`` (allowed everything); the
tokens of users and ServiceAccounts (``muster token create``) are checked against their stored
hashes by :class:`muster.server.access.policy.AccessControl`, which also gives each token its
identity (docs/access-control.md).

A token arrives in one of two ways:

* ``Authorization: Bearer <token>`` (the CLI, the SDK, scripts);
* the ``muster_session`` cookie, which ``POST /login`` sets (HttpOnly, SameSite=Strict) once
  it has checked the token, so the dashboard's page and its own requests carry it without
  script access to the token. A cookie is sent by the browser on its own, so a request
  authenticated by it that changes anything must also carry the header ``X-Muster-CSRF``:
  another site can make a browser send the cookie (SameSite aside), but it cannot add a
  custom header without a CORS preflight, which this server never grants.

A browser that asks for the dashboard page (``GET /``) without a valid token is sent to the
sign-in page instead of getting a JSON 401.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from pathlib import Path

from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from muster.config import read_credentials
from muster.server.access.policy import AccessControl
from muster.server.errors import error_response

__all__ = [
    "CSRF_HEADER",
    "LOGIN_PATH",
    "SESSION_COOKIE",
    "BearerAuth",
    "Credentials",
    "load_credentials",
    "load_or_create_credentials",
]

SESSION_COOKIE = "muster_session"
CSRF_HEADER = "X-Muster-CSRF"
LOGIN_PATH = "/login"
PUBLIC_PATHS = frozenset({"/healthz", LOGIN_PATH, "/logout"})
PUBLIC_PREFIXES = ("/ui/static/",)  # the dashboard's scripts and styles: code, no data
PAGE_PATHS = frozenset({"/"})  # pages a browser navigates to: no token sends it to LOGIN_PATH
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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
    """ASGI middleware: who the request comes from (``scope["state"]["user"]``, a
    :class:`UserInfo`), or 401 unless the path is public. What the identity may do is decided
    after routing, by :mod:`muster.server.access.guard`."""

    def __init__(
        self,
        app: ASGIApp,
        access: AccessControl,
        public_paths: Collection[str] = PUBLIC_PATHS,
        public_prefixes: tuple[str, ...] = PUBLIC_PREFIXES,
        page_paths: Collection[str] = PAGE_PATHS,
    ) -> None:
        self.app = app
        self.access = access
        self.public_paths = frozenset(public_paths)
        self.public_prefixes = public_prefixes
        self.page_paths = frozenset(page_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in self.public_paths or path.startswith(self.public_prefixes):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        presented, by_cookie = _bearer(headers), False
        if presented is None:
            presented, by_cookie = _cookie(headers, SESSION_COOKIE), True
        user, why = self.access.authenticate(presented) if presented is not None else (None, "")
        if user is None:
            if path in self.page_paths and scope.get("method") in _SAFE_METHODS:
                await RedirectResponse(LOGIN_PATH, status_code=303)(scope, receive, send)
            elif presented is None:
                message = (
                    "authentication required: send 'Authorization: Bearer <token>' "
                    "(see $MUSTER_HOME/credentials)"
                )
                await error_response(401, message, "Unauthorized")(scope, receive, send)
            else:
                await error_response(401, why or "invalid token", "Unauthorized")(scope, receive, send)
            return
        scope.setdefault("state", {})["user"] = user
        if by_cookie and scope.get("method") not in _SAFE_METHODS and CSRF_HEADER.lower() not in headers:
            message = f"a request signed in by the session cookie must send the {CSRF_HEADER} header to write"
            await error_response(403, message, "Forbidden")(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1"): value.decode("latin-1") for key, value in scope.get("headers", ())}


def _bearer(headers: dict[str, str]) -> str | None:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def _cookie(headers: dict[str, str], name: str) -> str | None:
    cookies = SimpleCookie()
    try:
        cookies.load(headers.get("cookie", ""))
    except CookieError:
        return None
    morsel = cookies.get(name)
    return morsel.value if morsel is not None and morsel.value else None
