"""Sign-in, the session cookie and its CSRF rule, and what answers without a token."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from muster.server import create_app
from muster.server.auth import CSRF_HEADER, SESSION_COOKIE
from muster.server.dashboard.pages import STATIC_DIR
from muster.store import Store
from muster.testing.factories import training_job
from tests.server.conftest import TOKEN

JOBS = "/apis/muster.dev/v1/namespaces/default/trainingjobs"


@pytest.fixture
def browser(sqlite_store: Store) -> Iterator[TestClient]:
    """The app as a browser sees it: no Authorization header, cookies kept."""
    with TestClient(create_app(sqlite_store, [TOKEN]), follow_redirects=False) as client:
        yield client


def sign_in(client: TestClient, token: str = TOKEN) -> None:
    resp = client.post("/login", json={"token": token})
    assert resp.status_code == 204, resp.text


def test_the_page_sends_a_browser_without_a_token_to_sign_in(browser: TestClient):
    resp = browser.get("/")
    assert resp.status_code == 303 and resp.headers["location"] == "/login"
    browser.cookies.set(SESSION_COOKIE, "not-the-token")
    assert browser.get("/").headers["location"] == "/login"


def test_the_sign_in_page_and_static_files_need_no_token_and_hold_no_data(browser: TestClient):
    page = browser.get("/login")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="token"' in page.text
    script = browser.get("/ui/static/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert browser.get("/ui/static/css/dashboard.css").headers["content-type"].startswith("text/css")
    assert browser.get("/ui/static/no-such.js").status_code == 404
    # A public prefix is no way out of static/: the middleware lets it through, StaticFiles refuses.
    assert browser.get("/ui/static/%2e%2e/pages.py").status_code == 404


@pytest.mark.parametrize(
    "path", ["/ui/api/overview", "/ui/api/jobs", "/ui/api/changes", "/api/v1/gpus", JOBS]
)
def test_data_needs_the_token(browser: TestClient, path: str):
    resp = browser.get(path)
    assert resp.status_code == 401 and resp.json()["error"]["reason"] == "Unauthorized"


def test_sign_in_checks_the_token_and_sets_an_http_only_strict_cookie(browser: TestClient):
    bad = browser.post("/login", json={"token": "wrong"})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers
    assert browser.post("/login", json={}).status_code == 400
    # A cross-site form cannot post JSON: a form body is refused.
    form = browser.post("/login", data={"token": TOKEN})
    assert form.status_code == 415 and "set-cookie" not in form.headers
    good = browser.post("/login", json={"token": TOKEN})
    assert good.status_code == 204
    cookie = good.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie


def test_the_cookie_reads_pages_views_and_the_api(browser: TestClient):
    sign_in(browser)
    page = browser.get("/")
    assert page.status_code == 200 and '<main id="main"' in page.text
    assert page.headers["cache-control"] == "no-store"
    assert browser.get("/ui/api/overview").status_code == 200
    assert browser.get(JOBS).json()["items"] == []


def test_a_cookie_signed_write_needs_the_csrf_header(browser: TestClient):
    sign_in(browser)
    refused = browser.post(JOBS, json=training_job("a"))
    assert refused.status_code == 403 and CSRF_HEADER in refused.json()["error"]["message"]
    assert browser.get(JOBS).json()["items"] == []  # nothing was written
    assert browser.post(JOBS, json=training_job("a"), headers={CSRF_HEADER: "1"}).status_code == 201


def test_a_bearer_write_needs_no_csrf_header(api: TestClient):
    assert api.post(JOBS, json=training_job("a")).status_code == 201


def test_sign_out_forgets_the_cookie(browser: TestClient):
    sign_in(browser)
    resp = browser.post("/logout")
    assert resp.status_code == 204 and f"{SESSION_COOKIE}=" in resp.headers["set-cookie"]
    assert browser.get("/").status_code == 303


def test_pages_allow_nothing_from_elsewhere(browser: TestClient):
    for path in ("/login", "/ui/static/js/app.js"):
        headers = browser.get(path).headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY"


def test_every_asset_the_pages_name_is_shipped():
    """Each script, style and icon the HTML names, and each module a script imports, exists
    under static/ (a missing one would only show as a broken page)."""
    names = set()
    for page in ("index.html", "login.html"):
        names |= set(re.findall(r'(?:src|href)="/ui/static/([^"]+)"', (STATIC_DIR / page).read_text()))
    assert {"js/app.js", "js/login.js", "css/dashboard.css", "favicon.svg"} <= names
    for name in names:
        assert (STATIC_DIR / name).is_file(), name
    for script in STATIC_DIR.rglob("*.js"):
        for target in re.findall(r'from "(\.{1,2}/[^"]+)"', script.read_text()):
            assert (script.parent / target).resolve().is_file(), f"{script.name} imports {target}"
    assert not re.search(
        r"https?://(?!www\.w3\.org/2000/svg)", "".join(p.read_text() for p in STATIC_DIR.rglob("*.*"))
    )
