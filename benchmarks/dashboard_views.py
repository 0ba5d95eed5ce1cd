"""How fast the dashboard's views answer on a busy cluster, and how soon a change reaches a page.

Serves a store in this process (a real uvicorn on a free port), fills it with N 8-GPU nodes,
W Workloads (half admitted, two pods each), a TrainingJob per admitted Workload and an Event
per pod, then measures over HTTP, as a browser tab does:

* each view a page fetches when something it shows changes (``/ui/api/overview``,
  ``/ui/api/jobs``, one job, ``/ui/api/queues``, ``/api/v1/gpus``): median of 5;
* the notice delay: from a write through the API to its line on ``/ui/api/changes``
  (what starts a page's refetch), median of 20.

    .venv/bin/python benchmarks/dashboard_views.py [--workloads 2000] [--nodes 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from muster.store import Store, open_store
from muster.testing import wait_for
from muster.testing.cluster import condition, ddp_job, event
from muster.testing.server import RunningServer, serve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from job_views import _fill  # the busy cluster job_views.py measures `why` and `top` on


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=2_000, help="Workloads in the cluster")
    parser.add_argument("--nodes", type=int, default=200, help="8-GPU nodes in the cluster")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ["MUSTER_HOME"] = str(home)
        store = open_store(f"sqlite:///{home / 'muster.db'}?synchronous=normal")
        try:
            with serve(store) as server:
                _fill(store, args.nodes, args.workloads)
                _jobs_and_events(store, args.workloads // 2)
                _views(server)
                _notice_delay(server)
        finally:
            store.close()
    return 0


def _jobs_and_events(store: Store, admitted: int) -> None:
    objs = []
    for i in range(admitted):
        job = ddp_job(f"run-{i}", conditions=[condition("Created"), condition("Running", reason="Running")])
        objs.append(job)
        objs.append(event(job, "Running", "all 2 pod(s) of the gang are running"))
    for start in range(0, len(objs), 2000):
        store.apply(objs[start : start + 2000])
    print(f"plus {admitted:,} TrainingJobs and {admitted:,} Events")


def _views(server: RunningServer) -> None:
    headers = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as http:
        for path in (
            "/ui/api/overview",
            "/ui/api/jobs",
            "/ui/api/jobs/default/ddp",
            "/ui/api/queues",
            "/api/v1/gpus?historySeconds=600",
        ):
            times, size = [], 0
            for _ in range(5):
                t = time.perf_counter()
                resp = http.get(path)
                times.append(time.perf_counter() - t)
                resp.raise_for_status()
                size = len(resp.content)
            print(f"{path}: {1000 * statistics.median(times):.0f} ms median of 5 ({size / 1024:.0f} KiB)")


def _notice_delay(server: RunningServer) -> None:
    seen: dict[str, float] = {}
    stop = threading.Event()
    headers = {"Authorization": f"Bearer {server.token}"}

    def follow() -> None:
        try:
            url = f"{server.url}/ui/api/changes?kinds=TrainingJob"
            with httpx.stream("GET", url, headers=headers, timeout=60) as resp:
                for line in resp.iter_lines():
                    notice = json.loads(line)
                    if notice.get("name"):
                        seen.setdefault(notice["name"], time.perf_counter())
                    if stop.is_set():
                        return
        except httpx.HTTPError:
            if not stop.is_set():
                raise

    threading.Thread(target=follow, daemon=True).start()
    delays = []
    with server.client() as client:
        time.sleep(0.5)  # the stream is open
        for i in range(20):
            name = f"notice-{i}"
            t = time.perf_counter()
            client.create(ddp_job(name))
            wait_for(lambda n=name: n in seen, timeout=10, what=f"the notice of {name}")
            delays.append(seen[name] - t)
        stop.set()
        client.create(ddp_job("last"))  # one more line, so the reader sees `stop` and closes the stream
    print(f"change notice: {1000 * statistics.median(delays):.1f} ms median of 20 from the write's request")


if __name__ == "__main__":
    sys.exit(main())
