"""The dashboard's Cost page in a browser: totals, the chart, the groups, the idle cost per pool
and the pools with the nodes coming up, without a console error; the window and grouping
selectors change the view."""

from __future__ import annotations

import time
from typing import Any

import pytest

from muster.api import registry
from muster.api.conditions import iso
from muster.store import Store
from muster.testing.server import serve
from tests.e2e.test_dashboard import Page, browser  # noqa: F401 - the module's browser fixture

pytestmark = pytest.mark.slow


def _records(now: float) -> list[dict[str, Any]]:
    base = {"apiVersion": "muster.dev/v1", "kind": "UsageRecord"}
    node = {
        "type": "Node",
        "name": "spot-a",
        "node": "spot-a",
        "nodePool": "spot",
        "nodeGpus": 4,
        "gpus": 4,
        "pricePerHour": 8.0,
        "start": iso(now - 7200),
    }
    pod = {
        "type": "Pod",
        "namespace": "vision",
        "name": "train-worker-0",
        "node": "spot-a",
        "nodePool": "spot",
        "job": "train",
        "gpus": 2,
        "nodeGpus": 4,
        "pricePerHour": 8.0,
        "start": iso(now - 3600),
        "labels": {"team": "vision"},
    }
    return [
        {**base, "metadata": {"name": "node-1"}, "spec": node},
        {**base, "metadata": {"name": "pod-1"}, "spec": pod},
    ]


def test_the_cost_page(browser: Any, home_store: Store):  # noqa: F811
    now = time.time()
    for doc in _records(now):
        home_store.create(registry.validate(doc).obj)
    pool = {
        "apiVersion": "muster.dev/v1",
        "kind": "NodePool",
        "metadata": {"name": "spot"},
        "spec": {
            "provider": "local",
            "template": {"gpus": 4, "gpuModel": "A100"},
            "capacityType": "spot",
            "pricePerHour": 8.0,
            "maxNodes": 3,
        },
    }
    home_store.create(registry.validate(pool).obj)
    with serve(home_store) as server:
        tab = Page(browser, server.url, server.token)
        try:
            tab.open("/cost", ".cost-totals")
            text = tab.page.inner_text("main")
            assert "Allocated to pods" in text and "vision" in text and "spot" in text
            assert tab.page.query_selector("svg.cost-chart rect") is not None
            tab.page.select_option("select[aria-label='Group by']", "label:team")
            tab.page.wait_for_url("**/#/cost?window=7d&by=label%3Ateam")
            tab.page.wait_for_selector("text=by label:team")
            assert "vision" in tab.page.inner_text("main")
            assert tab.errors == []
        finally:
            tab.close()
