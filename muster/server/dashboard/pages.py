"""The dashboard's pages and sign-in: ``GET /`` (the app, token required: without one the
browser is sent to ``/login``), ``GET /login`` (the sign-in page), ``POST /login`` (checks a
token and sets the session cookie), ``POST /logout`` and the static files under
``/ui/static/`` (scripts, styles, icons: code, no data; they need no token).

Every page answer carries a Content-Security-Policy that allows scripts, styles, images and
connections from this server only: nothing is loaded from elsewhere at run time, and an
injected inline script would not run. Framing is refused (no clickjacking).
"""

from __future__ import annotations

import json
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.staticfiles import StaticFiles
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.types import Scope

from muster.server.access.guard import AUTHENTICATED, PUBLIC, requires
from muster.server.auth import LOGIN_PATH, SESSION_COOKIE
from muster.server.errors import ApiError

__all__ = ["STATIC_DIR", "STATIC_PREFIX", "SecureStaticFiles", "router"]

STATIC_DIR = Path(__file__).parent / "static"
STATIC_PREFIX = "/ui/static"

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
@requires(AUTHENTICATED)
def index() -> Response:
    """The dashboard (the auth middleware has checked the token or sent the browser to sign in)."""
    return _page("index.html")


@router.get(LOGIN_PATH, response_class=HTMLResponse)
@requires(PUBLIC)
def login_page() -> Response:
    return _page("login.html")


@router.post(LOGIN_PATH)
@requires(PUBLIC)
async def login(request: Request) -> Response:
    """``{"token": "..."}`` as JSON: any valid token (the admin's, a user's or a
    ServiceAccount's) sets the HttpOnly session cookie (204); the dashboard then shows what that
    identity may see.

    JSON only: a cross-site HTML form cannot send it, so another site cannot sign a browser
    in with a token of its choosing."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise ApiError(415, 'send the token as JSON: {"token": "..."}', "UnsupportedMediaType")
    try:
        body = json.loads(await request.body())
    except (ValueError, RecursionError):  # RecursionError: a body nested too deep to parse
        raise ApiError(400, 'the body is not JSON: send {"token": "..."}') from None
    token = body.get("token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ApiError(400, "token: required, the token in $MUSTER_HOME/credentials")
    user, why = request.app.state.access.authenticate(token.strip())
    if user is None:
        raise ApiError(401, why or "invalid token", "Unauthorized")
    request.state.user = user  # the audit log records who signed in
    response = Response(status_code=204)
    response.set_cookie(
        SESSION_COOKIE,
        token.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
@requires(PUBLIC)
def logout() -> Response:
    """Forget the session cookie."""
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


class SecureStaticFiles(StaticFiles):
    """Static files with the pages' security headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def _page(name: str) -> Response:
    # no-store: the page a signed-out browser goes back to must be asked for again (and sent to sign in)
    return FileResponse(
        STATIC_DIR / name, media_type="text/html", headers={**SECURITY_HEADERS, "Cache-Control": "no-store"}
    )
