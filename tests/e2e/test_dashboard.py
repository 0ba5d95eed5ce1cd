"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright.

One ``muster up --fake-gpus 4`` serves the module (jobs really run, so their logs stream);
the workflow DAG is checked against an API-only server whose Workflow status the test writes,
so it does not depend on the Workflow controller. Every page must load without a console
error; a job submitted through the API must appear on the jobs page without a reload and its
log must stream into the job page; the overview's screenshot is saved under test-artifacts/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from muster.sdk.client import Client
from muster.store import Store
from muster.testing import cluster as c
from muster.testing import skip_or_fail, wait_for
from muster.testing.server import serve
from muster.testing.up import MusterUp
from tests.e2e.jobs import PYTHON, clean_up, cluster, job_doc, wait_condition

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TIMEOUT_MS = 20_000
# Prints a numbered line every 0.2 s for a minute: long enough to watch lines arrive.
TICKER = (
    "import time\n"
    "for i in range(300):\n"
    "    print(f'step {i} loss {1 / (i + 1):.4f}', flush=True)\n"
    "    time.sleep(0.2)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"{CHROMIUM} is missing: apt-get install chromium (the dashboard tests drive it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MusterUp]:
    home = tmp_path_factory.mktemp("dashboard") / "muster-home"
    with MusterUp(home, extra_args=["--fake-gpus", "4"]) as server:
        try:
            yield server
        finally:
            with Client(server.url, server.token) as client:
                clean_up(client)


@pytest.fixture
def client(up: MusterUp) -> Iterator[Client]:
    with Client(up.url, up.token) as api:
        yield api
        clean_up(api)


class Page:
    """A signed-in browser tab that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, url: str, token: str) -> None:
        self.url = url
        self.context = browser.new_context(viewport={"width": 1440, "height": 900})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.goto(f"{url}/")
        assert self.page.url == f"{url}/login", "an anonymous browser is sent to sign in"
        self.page.fill("#token", token)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{url}/")
        self.page.wait_for_selector(".live-on")  # the change stream is open

    def open(self, route: str, ready: str) -> Any:
        """Go to ``#route`` and wait for ``ready`` (a selector) to show."""
        self.page.goto(f"{self.url}/#{route}")
        return self.page.wait_for_selector(ready)

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def tab(browser: Any, up: MusterUp) -> Iterator[Page]:
    page = Page(browser, up.url, up.token)
    yield page
    page.close()


def test_every_page_loads_without_console_errors(tab: Page, client: Client):
    client.create(job_doc("resnet", [PYTHON, "-c", TICKER], workers=1, master=True))
    wait_condition(client, "TrainingJob", "resnet", "Running")
    client.create(_workflow("etl"))
    pages = {
        "/": ".gpu-tile.busy",
        "/jobs": "table.jobs a.job-link",
        "/jobs/default/resnet": ".why-summary",
        "/queues": ".quota-row",
        "/nodes": "table.gpus .spark",
        "/workflows": "a[href='#/workflows/default/etl']",
        "/workflows/default/etl": "svg.dag .dag-node",
        "/serving": "text=No InferenceService yet",
        "/no/such/page": "text=No page at",
    }
    for route, ready in pages.items():
        tab.open(route, ready)
    assert tab.errors == []


def test_a_job_submitted_through_the_api_appears_and_its_log_streams(tab: Page, client: Client):
    tab.open("/jobs", ".card")
    assert tab.page.query_selector("a.job-link") is None
    client.create(job_doc("mnist", [PYTHON, "-c", TICKER], workers=2))

    # The row appears without a reload, and follows the job to Running. (Locators, not element
    # handles: the table is redrawn at every change.)
    row = tab.page.locator(
        "table.jobs tr", has=tab.page.locator("a.job-link", has_text=re.compile("^mnist$"))
    )
    row.wait_for()
    wait_for(lambda: "Running" in row.inner_text(), timeout=30, what="the row to say Running")

    row.locator("a.job-link").click()
    tab.page.wait_for_url(re.compile(r"#/jobs/default/mnist$"))
    log = tab.page.locator("pre.log")
    wait_for(lambda: "step 2 " in log.inner_text(), timeout=30, what="the first lines of the log")
    seen = _steps(log.inner_text())
    # More lines arrive on the open response: the page is not reloaded, nor the log refetched.
    wait_for(lambda: _steps(log.inner_text()) > seen + 5, timeout=30, what="new log lines to stream in")
    assert "following mnist-" in tab.page.inner_text(".log-state")
    # Another replica's log, picked by its tab.
    tab.page.click("button.tab:text-is('worker-1')")
    wait_for(
        lambda: "following mnist-worker-1" in tab.page.inner_text(".log-state"), timeout=10, what="worker-1"
    )
    wait_for(lambda: "step 1 " in log.inner_text(), timeout=30, what="worker-1's lines")

    # The replicas table places each pod; the why card says where they run.
    replicas = tab.page.inner_text("table.compact")
    assert "worker-0" in replicas and "worker-1" in replicas
    assert "is running" in tab.page.inner_text(".why-summary")

    # The overview colours the job's two GPUs alike, and lists it in the legend.
    tab.open("/", ".gpu-tile.busy")
    fills = tab.page.locator("a.gpu-tile.busy[href='#/jobs/default/mnist'] .gpu-fill")
    colours = fills.evaluate_all("els => els.map(e => getComputedStyle(e).backgroundColor)")
    assert len(colours) == 2 and len(set(colours)) == 1, colours
    assert "mnist" in tab.page.inner_text(".legend")
    ARTIFACTS.mkdir(exist_ok=True)
    tab.page.screenshot(path=str(ARTIFACTS / "dashboard-overview.png"), full_page=True)
    assert tab.errors == []


def test_gpu_faults_and_readings_reach_the_pages_live(browser: Any, muster_home: Path):
    with cluster(muster_home, gpus=2) as (up, client):
        tab = Page(browser, up.url, up.token)
        try:
            node = client.list("Node")["items"][0]["metadata"]["name"]
            tile = tab.page.locator(f".gpu-tile[data-gpu='{node}/1']")
            tab.open("/", f".gpu-tile[data-gpu='{node}/1']:not(.unhealthy)")
            client.inject_fault(node, {"gpu": 1, "xid": 79})
            # The Node's status changes; the overview redraws the tile hatched red, and says why.
            tab.page.wait_for_selector(f".gpu-tile.unhealthy[data-gpu='{node}/1']")
            assert "XID 79" in (tile.get_attribute("title") or "")

            client.inject_fault(node, {"gpu": 0, "utilization": 0.8})
            tab.open("/nodes", "table.gpus")
            row = tab.page.locator("table.gpus tbody tr").first
            wait_for(lambda: "80%" in row.inner_text(), timeout=30, what="GPU 0's reading of 80%")
            assert (
                tab.page.locator("table.gpus tbody tr").nth(1).locator(".badge").inner_text() == "Unhealthy"
            )
            # A job asking for both GPUs waits; its why card names the failed GPU first, and its repair.
            client.create(job_doc("both", [PYTHON, "-c", "print('never')"], workers=1, gpus=2))
            wait_condition(client, "TrainingJob", "both", "Queued", reason="ExceedsMaxQuota")
            tab.open("/jobs/default/both", ".why-cause")
            assert tab.page.inner_text(".why-cause").startswith(f"GPU 1 of node {node} is unhealthy since ")
            assert (
                tab.page.locator("ul.hints li")
                .first.inner_text()
                .startswith(f"repair or replace GPU 1 of node {node}")
            )
            assert tab.errors == []
        finally:
            tab.close()


def test_sign_in_refuses_a_wrong_token_and_returns_to_the_page_asked_for(browser: Any, up: MusterUp):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{up.url}/#/queues")
        assert page.url == f"{up.url}/login#/queues"  # the redirect keeps the page asked for
        page.fill("#token", "not-the-token")
        page.click("button[type=submit]")
        page.wait_for_selector("#error:not([hidden])")
        assert "not valid" in page.inner_text("#error")
        page.fill("#token", up.token)
        page.click("button[type=submit]")
        page.wait_for_selector(".quota-row")
        assert page.url == f"{up.url}/#/queues"
        page.click("#logout")
        page.wait_for_url(f"{up.url}/login")
        page.goto(f"{up.url}/")
        assert page.url == f"{up.url}/login"  # signed out: the cookie is gone
    finally:
        context.close()


def test_the_workflow_dag_is_layered_and_a_task_opens_its_status(browser: Any, home_store: Store):
    home_store.create(c.gpu_node("node-a", gpus=2))
    wf = home_store.create(_workflow("pipeline"))
    wf["status"] = {
        "phase": "Running",
        "progress": "2/5",
        "startedAt": c.TS,
        "nodes": {
            "prep": {
                "phase": "Succeeded",
                "attempts": 1,
                "startedAt": c.TS,
                "finishedAt": "2025-01-01T00:00:05Z",
            },
            "train": {"phase": "Running", "attempts": 2, "startedAt": c.TS, "reason": "Retrying"},
            "stats": {"phase": "Cached", "cacheHit": True, "cacheKey": "ab" * 32},
            "report": {"phase": "Pending"},
            "notify": {"phase": "Pending"},
        },
    }
    home_store.update_status(wf)
    with serve(home_store) as server:
        tab = Page(browser, server.url, server.token)
        try:
            tab.open("/workflows/default/pipeline", "svg.dag")
            x = {name: _node_x(tab, name) for name in ("prep", "train", "stats", "report", "notify")}
            # Longest-path layers: prep | train, stats | report | notify (onExit, last).
            assert x["prep"] < x["train"] == x["stats"] < x["report"] < x["notify"]
            classes = tab.page.get_attribute("g.dag-node[data-task='stats']", "class")
            assert "phase-cached" in classes
            assert "phase-running" in tab.page.get_attribute("g.dag-node[data-task='train']", "class")
            assert len(tab.page.query_selector_all("path.dag-edge")) == 4
            tab.page.click("g.dag-node[data-task='train']")
            panel = tab.page.locator(".card", has=tab.page.locator("h2", has_text="Task train"))
            panel.wait_for()
            assert "Retrying" in panel.inner_text() and "Attempts" in panel.inner_text()
            assert "task=train" in tab.page.url
            assert tab.errors == []
        finally:
            tab.close()


def test_an_experiment_page_plots_the_objective_per_trial_and_each_trial_s_curve(tab: Page, client: Client):
    from tests.e2e.test_experiments import TRAINER, finished, trainer_experiment

    doc = trainer_experiment(
        "sweep",
        {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "2"}]},
        3,
        3,
        ["--quality", "${trialParameters.quality}", "--steps", "4", "--step-time", "0.05"],
    )
    assert TRAINER in doc["spec"]["trialTemplate"]["template"]["spec"]["containers"][0]["command"]
    client.create(doc)
    try:
        finished(client, "sweep", timeout=120)
        tab.open("/experiments", "a.experiment-link")
        assert "sweep" in tab.page.inner_text("table.experiments")
        tab.page.click("a.experiment-link:text-is('sweep')")
        tab.page.wait_for_selector("svg.plot-objective circle.trial-dot")
        assert tab.page.locator("svg.plot-objective circle.trial-dot").count() == 3
        assert tab.page.locator("svg.plot-objective path.best-line").count() == 1
        assert tab.page.locator("svg.plot-curves path.curve").count() == 3
        assert tab.page.locator("svg.plot-curves path.curve.best").count() == 1
        assert "succeeded (MaxTrialsReached): 3 of 3 trials" in tab.page.inner_text(".why-summary")
        assert tab.page.locator("table.trials tr.row-best").count() == 1
        ARTIFACTS.mkdir(exist_ok=True)
        tab.page.screenshot(path=str(ARTIFACTS / "dashboard-experiment.png"), full_page=True)
        assert tab.errors == []
    finally:
        client.delete("Experiment", "sweep", "default")


def _workflow(name: str) -> dict[str, Any]:
    def task(task_name: str, deps: list[str]) -> dict[str, Any]:
        template = {
            "spec": {"containers": [{"name": "main", "command": [PYTHON, "-c", f"print('{task_name}')"]}]}
        }
        return {"name": task_name, "dependencies": deps, "template": template}

    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "onExit": "notify",
            "tasks": [
                task("prep", []),
                task("train", ["prep"]),
                task("stats", ["prep"]),
                task("report", ["train", "stats"]),
                task("notify", []),
            ],
        },
    }


def _node_x(tab: Page, task: str) -> float:
    transform = tab.page.get_attribute(f"g.dag-node[data-task='{task}']", "transform")
    match = re.match(r"translate\(([\d.]+),", transform or "")
    assert match, transform
    return float(match.group(1))


def _steps(text: str) -> int:
    found = re.findall(r"step (\d+) ", text)
    return int(found[-1]) if found else -1


def test_the_jobs_page_shows_a_page_at_a_time_filtered_by_the_server(browser: Any, home_store: Store):
    home_store.apply([c.ddp_job(f"job-{i:03d}", conditions=[c.condition("Running")]) for i in range(130)])
    with serve(home_store) as server:
        tab = Page(browser, server.url, server.token)
        try:
            tab.open("/jobs", "table.jobs a.job-link")
            page, count = tab.page, tab.page.locator(".filters .count")
            links = page.locator("table.jobs a.job-link")
            wait_for(lambda: count.inner_text() == "1–100 of 130", timeout=30, what="the first page")
            assert links.count() == 100 and links.first.inner_text() == "job-129"  # newest first
            assert page.locator("button[aria-label='Previous page']").is_disabled()
            page.click("button[aria-label='Next page']")
            wait_for(lambda: count.inner_text() == "101–130 of 130", timeout=30, what="the second page")
            assert links.count() == 30 and links.last.inner_text() == "job-000"
            assert page.locator("button[aria-label='Next page']").is_disabled()
            page.fill("input[type=search]", "job-12")  # job-120 to job-129, from the first page
            wait_for(
                lambda: count.inner_text() == "1–10 of 10 (of 130)", timeout=30, what="the filtered rows"
            )
            assert links.count() == 10
            assert "q=job-12" in page.url
            assert tab.errors == []
        finally:
            tab.close()


def test_the_jobs_table_fits_a_1440_pixel_screen(browser: Any, home_store: Store):
    """Long reasons are cut (the whole message is the cell's title), not pushed past the card."""
    home_store.create(c.gpu_node("node-a", gpus=2))
    message = (
        "cluster queue research has too little quota: 16 nvidia.com/gpu in flavor a100-80gb needed, "
        "2 available (nominal 8, 6 in use by the queue); no running workload may be preempted for it "
        "(withinClusterQueue LowerPriority, reclaimWithinCohort Any, borrowWithinCohort Never)"
    )
    for i in range(3):
        job = c.ddp_job(
            f"a-rather-long-training-job-name-{i}-for-the-table",
            workers=7,
            conditions=[c.condition("Queued", reason="QuotaExhausted", message=message)],
        )
        home_store.apply([job])
    with serve(home_store) as server:
        tab = Page(browser, server.url, server.token)
        try:
            tab.open("/jobs", "table.jobs a.job-link")
            sizes = tab.page.evaluate(
                "() => { const b = document.querySelector('table.jobs').closest('.card-body');"
                " const d = document.documentElement;"
                " return [b.scrollWidth, b.clientWidth, d.scrollWidth, window.innerWidth]; }"
            )
            body_scroll, body_width, page_scroll, page_width = sizes
            assert body_scroll <= body_width, f"the jobs table overflows its card: {sizes}"
            assert page_scroll <= page_width, f"the page scrolls sideways: {sizes}"
            reason = tab.page.locator("table.jobs .reason").first
            assert reason.get_attribute("title") == message
            assert tab.errors == []
        finally:
            tab.close()


def test_a_workflow_page_retries_resubmits_and_shows_parameters_results_and_a_timeline(
    browser: Any, home_store: Store
):
    wf = _workflow("pipe")
    wf["spec"]["arguments"] = {"parameters": [{"name": "epochs", "value": "3"}]}
    wf = home_store.create(wf)
    wf["status"] = {
        "phase": "Failed",
        "progress": "2/5",
        "taskPhases": {"Succeeded": 2, "Failed": 1, "Omitted": 2},
        "startedAt": "2025-01-01T00:00:00Z",
        "finishedAt": "2025-01-01T00:01:40Z",
        "message": "task train failed: exit code 1",
        "nodes": {
            "prep": {
                "phase": "Succeeded",
                "attempts": 1,
                "startedAt": "2025-01-01T00:00:00Z",
                "finishedAt": "2025-01-01T00:00:20Z",
                "outputs": {"parameters": {"rows": "1200"}, "artifacts": {"data": "sha256:" + "ab" * 32}},
            },
            "train": {
                "phase": "Failed",
                "reason": "Error",
                "message": "exit code 1",
                "attempts": 1,
                "startedAt": "2025-01-01T00:00:20Z",
                "finishedAt": "2025-01-01T00:01:20Z",
            },
            "stats": {"phase": "Omitted", "reason": "FailFast"},
            "report": {"phase": "Omitted", "reason": "UpstreamFailed"},
            "notify": {
                "phase": "Succeeded",
                "attempts": 1,
                "startedAt": "2025-01-01T00:01:20Z",
                "finishedAt": "2025-01-01T00:01:40Z",
            },
        },
    }
    home_store.update_status(wf)
    with serve(home_store) as server:
        tab = Page(browser, server.url, server.token)
        try:
            page = tab.page
            tab.open("/workflows/default/pipe", "svg.dag")
            head = page.inner_text(".page-head")
            assert "2/5 tasks ended well" in head and "1 failed" in head and "2 omitted" in head
            params = page.locator(".card", has=page.locator("h2", has_text="Parameters"))
            assert "epochs" in params.inner_text() and "3" in params.inner_text()
            results = page.locator(".card", has=page.locator("h2", has_text="Results"))
            assert "rows" in results.inner_text() and "1200" in results.inner_text()
            assert "sha256:abab" in results.inner_text()
            bars = {
                b.get_attribute("data-task"): b.evaluate("e => e.getBoundingClientRect().width")
                for b in page.query_selector_all(".timeline .timeline-bar")
            }
            assert set(bars) == {"prep", "train", "notify"} and bars["train"] > bars["prep"] > 0
            timeline = page.inner_text(".timeline")
            assert "not started" in timeline and "1m" in timeline
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-workflow.png"), full_page=True)

            page.click("button:text-is('Retry')")
            page.wait_for_selector(".notice:has-text('run again')")
            stored = home_store.get("Workflow", "pipe", "default")
            assert stored["metadata"]["annotations"]["muster.dev/retry"] == "1"

            page.click("button:text-is('Resubmit')")
            page.wait_for_url(re.compile(r"#/workflows/default/pipe-[a-z0-9]{5}$"))
            new_name = page.url.rsplit("/", 1)[1]
            copy = home_store.get("Workflow", new_name, "default")
            assert copy["spec"] == stored["spec"]
            assert copy["metadata"]["annotations"]["muster.dev/resubmitted-from"] == "pipe"
            page.wait_for_selector("svg.dag .dag-node")
            assert tab.errors == []
        finally:
            tab.close()
