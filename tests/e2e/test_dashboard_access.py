"""The dashboard in a real browser for identities other than the admin: a team member sees its
own namespace's jobs and may suspend them; a viewer sees every job and gets no button."""

from __future__ import annotations

from typing import Any

import pytest

from muster.store import Store
from muster.testing.server import serve
from muster.testing.tenancy import sample, set_up_teams
from tests.e2e.test_dashboard import Page, browser  # noqa: F401  (the module's Chromium)

pytestmark = pytest.mark.slow


def test_each_identity_sees_its_jobs_and_only_the_buttons_that_work(browser: Any, home_store: Store):  # noqa: F811
    with serve(home_store) as server, server.client() as admin:
        tokens = set_up_teams(admin)
        for ns in ("team-a", "team-b"):
            job = sample("TrainingJob", f"job-{ns}", ns)
            job["spec"]["runPolicy"]["suspend"] = False
            admin.create(job)
        alice = Page(browser, server.url, tokens["alice"])
        try:
            alice.page.wait_for_selector("#whoami:has-text('alice')")
            alice.open("/jobs", "table.jobs a.job-link")
            links = alice.page.locator("table.jobs a.job-link").all_inner_texts()
            assert links == ["job-team-a"]
            alice.open("/jobs/team-a/job-team-a", ".why-summary")
            button = alice.page.locator("button.button", has_text="Suspend")
            button.wait_for()
            button.click()
            alice.page.locator("button.button", has_text="Resume").wait_for()
            assert admin.get("TrainingJob", "job-team-a", "team-a")["spec"]["runPolicy"]["suspend"] is True
            assert alice.errors == []
        finally:
            alice.close()
        val = Page(browser, server.url, tokens["val"])
        try:
            val.open("/jobs", "table.jobs a.job-link")
            assert sorted(val.page.locator("table.jobs a.job-link").all_inner_texts()) == [
                "job-team-a",
                "job-team-b",
            ]
            val.open("/jobs/team-b/job-team-b", ".why-summary")
            assert val.page.locator("button.button", has_text="Suspend").count() == 0
            assert val.errors == []
        finally:
            val.close()
