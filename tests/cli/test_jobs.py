"""`muster logs | why | top | suspend | resume` against a real server in a thread.

Objects are written to the store in the shapes the controllers write (muster.testing.cluster);
logs are written where the local runtime keeps them, or by a real LocalRuntime to follow.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from muster.api.base import controller_ref
from muster.cli.app import app
from muster.cli.suspend import set_suspend
from muster.runtime.base import Container, DeviceBinding
from muster.runtime.local.logs import container_log
from muster.runtime.local.runtime import LocalRuntime
from muster.store import Store
from muster.testing import wait_for
from muster.testing.cluster import (
    admitted,
    cluster_queue,
    condition,
    ddp_job,
    gpu_node,
    pod,
    quota_shortfall,
    workload,
)
from muster.testing.factories import local_queue
from tests.runtime.local.conftest import Watcher, launch, py, shutdown

runner = CliRunner()
GPU = "nvidia.com/gpu"


def muster(*args: str):
    return runner.invoke(app, list(args))


def put(store: Store, *objs: dict[str, Any]) -> None:
    """Store the objects, status included (the server's defaults are replaced)."""
    store.apply(list(objs))


def write_log(home: Path, pod_name: str, text: str, previous: bool = False) -> None:
    path = container_log(home, "default", pod_name, "main", previous=previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def job_pods(job: str, phase: str = "Running", **kw: Any) -> list[dict[str, Any]]:
    return [
        pod(f"{job}-master-0", job=job, replica=("Master", 0), gpus=[0], phase=phase, **kw),
        pod(f"{job}-worker-0", job=job, replica=("Worker", 0), gpus=[1], phase=phase, **kw),
    ]


class TestLogs:
    def test_a_pod_a_job_and_every_replica(self, server, home_store, muster_home: Path):
        put(home_store, ddp_job("ddp", conditions=[condition("Succeeded")]), *job_pods("ddp", "Succeeded"))
        write_log(muster_home, "ddp-master-0", "rank 0 step 1\nrank 0 done\n")
        write_log(muster_home, "ddp-worker-0", "rank 1 step 1\nrank 1 done\n")
        assert muster("logs", "ddp-worker-0").stdout == "rank 1 step 1\nrank 1 done\n"
        assert muster("logs", "pod/ddp-worker-0", "--tail", "1").stdout == "rank 1 done\n"
        assert muster("logs", "job/ddp").stdout == "rank 0 step 1\nrank 0 done\n"  # the master
        result = muster("logs", "job/ddp", "--all-replicas")
        assert result.stdout.splitlines() == [
            "[master-0] rank 0 step 1",
            "[master-0] rank 0 done",
            "[worker-0] rank 1 step 1",
            "[worker-0] rank 1 done",
        ]
        # Following a finished job reads everything once and returns.
        followed = muster("logs", "job/ddp", "--all-replicas", "-f").stdout.splitlines()
        assert sorted(followed) == sorted(result.stdout.splitlines())

    def test_previous_and_errors(self, server, home_store, muster_home: Path):
        write_log(muster_home, "p", "second attempt\n")
        write_log(muster_home, "p", "first attempt\n", previous=True)
        assert muster("logs", "p", "--previous").stdout == "first attempt\n"
        missing = muster("logs", "nope")
        assert missing.exit_code == 1 and "no logs for pod default/nope" in missing.stderr
        assert muster("logs", "job/nope").exit_code == 1
        bad = muster("logs", "p", "-f", "--previous")
        assert bad.exit_code == 2 and "cannot be combined" in bad.stderr
        assert muster("logs", "pod/p", "--all-replicas").exit_code == 2
        assert muster("logs", "queue/p").exit_code == 2

    def test_a_pod_that_has_not_started(self, server, home_store, muster_home: Path, monkeypatch):
        import muster.cli.logs as logs_cli

        put(home_store, pod("late", phase="Pending"))
        now = muster("logs", "late")
        assert now.exit_code == 1 and "pod default/late is Pending" in now.stderr

        def start() -> None:  # the runtime starts it: a log appears, the pod runs (and ends)
            write_log(muster_home, "late", "finally\n")
            started = home_store.get("Pod", "late", "default")
            started["status"]["phase"] = "Running"
            home_store.update_status(started)

        waiting = logs_cli._when_started

        def start_once_waiting(*args: Any) -> Any:  # the pod starts after -f found it Pending
            threading.Timer(0.3, start).start()
            return waiting(*args)

        monkeypatch.setattr(logs_cli, "_when_started", start_once_waiting)
        followed = muster("logs", "late", "-f")
        assert followed.exit_code == 0 and followed.stdout == "finally\n"
        assert "has not started yet; waiting for it" in followed.stderr

    def test_follow_every_replica_of_a_running_job(self, server, home_store, muster_home: Path):
        """Real processes write the logs while the CLI follows both replicas; a stand-in for the
        controllers marks the job Succeeded once they end, and the command returns."""
        job = home_store.create(ddp_job("live", conditions=[condition("Running")]))
        put(home_store, *job_pods("live"))
        runtime = LocalRuntime(home=muster_home)
        code = "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.2)"
        refs = []
        for name in ("live-master-0", "live-worker-0"):
            p = launch(name, Container("main", py(code)), uid=f"uid-{name}", owner=controller_ref(job))
            runtime.start(p, DeviceBinding())
            refs.append(p.ref)

        def controller() -> None:
            watcher = Watcher(runtime)
            for ref in refs:
                watcher.wait_final(ref)
            job["status"]["conditions"].append(condition("Succeeded", at="2030-01-01T00:00:00Z"))
            home_store.update_status({**job, "metadata": {**job["metadata"], "resourceVersion": None}})

        thread = threading.Thread(target=controller)
        thread.start()
        try:
            result = muster("logs", "job/live", "--all-replicas", "-f")
        finally:
            thread.join(timeout=60)
            shutdown(runtime)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        for replica in ("master-0", "worker-0"):
            assert [line for line in lines if line.startswith(f"[{replica}]")] == [
                f"[{replica}] step {i}" for i in range(3)
            ]
        assert len(lines) == 6


def _pending_world(store: Store) -> None:
    """A 4-GPU queue held by two admitted jobs; job `ddp` waits behind `urgent`."""
    shortfall = quota_shortfall(requested=2000, available=0, nominal=4000, used=4000, maximum=4000)
    message = "cluster queue default has too little quota: 2 nvidia.com/gpu needed, 0 available"
    put(
        store,
        cluster_queue("default", {"default": {GPU: "4", "cpu": "32"}}),
        local_queue("default"),
        gpu_node("node-a", gpus=4),
        admitted(workload("a", priority=10), "default", "node-a", [[0], [1]]),
        admitted(workload("b", priority=20), "default", "node-a", [[2], [3]]),
        *job_pods("a"),
        workload("urgent", priority=1000),
        ddp_job("ddp", conditions=[condition("Created"), condition("Queued")]),
        workload(
            "ddp",
            pending=("QuotaExhausted", message, {"clusterQueue": "default", "shortfalls": [shortfall]}),
            owner="ddp",
        ),
    )


class TestWhy:
    def test_a_pending_job(self, server, home_store):
        _pending_world(home_store)
        result = muster("why", "job/ddp")
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert "trainingjob/ddp is waiting in ClusterQueue default (position 2 of 2): QuotaExhausted" in out
        assert "Reason:   QuotaExhausted" in out
        assert "position 2 of 2 pending; ahead: default/urgent" in out
        assert "Quota of ClusterQueue default:" in out
        assert "default   nvidia.com/gpu   4      4         0" in out
        assert "2 more nvidia.com/gpu of flavor default must be free" in out
        assert "held now by default/a (2, priority 10), default/b (2, priority 20)" in out
        data = json.loads(muster("why", "trainingjob/ddp", "-o", "json").stdout)
        assert data["reason"] == "QuotaExhausted" and data["queue"]["position"] == 2
        assert muster("why", "workload/ddp").exit_code == 0

    def test_a_failed_job_shows_the_failing_replica_and_its_log(self, server, home_store, muster_home):
        failed = condition("Failed", reason="BackoffLimitExceeded", message="the gang failed 3 times")
        pods = job_pods("bad", "Failed", reason="Error", exit_code=2, message="exit code 2")
        pods[0]["status"]["reason"] = "Stopped"  # the master was stopped when the worker failed
        put(home_store, ddp_job("bad", conditions=[condition("Running"), failed], backoff_limit=3), *pods)
        write_log(
            muster_home, "bad-worker-0", "".join(f"line {i}\n" for i in range(30)) + "ValueError: boom\n"
        )
        out = muster("why", "job/bad", "--tail", "3").stdout
        assert "trainingjob/bad failed: BackoffLimitExceeded (worker-0: Error, exit code 2)" in out
        assert "Log tail of worker-0 (muster logs bad-worker-0):" in out
        assert "  | line 28\n  | line 29\n  | ValueError: boom\n" in out
        assert "line 27" not in out

    def test_a_running_job_says_where_and_bad_targets_exit_2(self, server, home_store):
        put(home_store, ddp_job("run", conditions=[condition("Running")]), *job_pods("run"))
        out = muster("why", "job/run").stdout
        assert "trainingjob/run is running: master-0 on node-a GPU 0; worker-0 on node-a GPU 1" in out
        assert muster("why", "run").exit_code == 2  # needs KIND/NAME
        assert muster("why", "node/x").exit_code == 2
        assert muster("why", "job/ghost").exit_code == 1


class TestTop:
    def test_nodes_gpus_queues(self, server, home_store):
        _pending_world(home_store)
        nodes = muster("top", "nodes").stdout.splitlines()
        assert nodes[0].split() == ["NAME", "READY", "PODS", "CPU", "MEMORY", "GPU"]
        assert nodes[1].split() == ["node-a", "True", "2", "0/32", "(0%)", "0/128Gi", "(0%)", "2/4", "(50%)"]
        gpus = muster("top", "gpus").stdout.splitlines()
        assert gpus[1].split()[:6] == ["node-a", "0", "A100", "80Gi", "Healthy", "1"]
        assert gpus[1].endswith("default/a-master-0") and gpus[3].rstrip().endswith("-")
        queues = muster("top", "queues").stdout.splitlines()
        gpu_row = next(line for line in queues if GPU in line).split()
        assert gpu_row == ["default", "-", "default", GPU, "4/4", "(100%)", "0", "-", "2", "2"]
        data = json.loads(muster("top", "queues", "-o", "json").stdout)
        assert data[0]["pending"] == 2 and data[0]["admitted"] == 2
        assert muster("top", "pods").exit_code == 2


class TestSuspendResume:
    def test_sets_the_flag_and_says_what_changed(self, server, home_store):
        put(home_store, ddp_job("j", conditions=[condition("Running")]))
        first = muster("suspend", "job/j")
        assert first.stdout == "trainingjob/j suspended (spec.runPolicy.suspend: true; was Running)\n"
        assert home_store.get("TrainingJob", "j", "default")["spec"]["runPolicy"]["suspend"] is True
        assert (
            muster("suspend", "trainingjob/j").stdout == "trainingjob/j already suspended (state: Running)\n"
        )
        assert "resumed" in muster("resume", "job/j").stdout
        assert home_store.get("TrainingJob", "j", "default")["spec"]["runPolicy"]["suspend"] is False
        assert muster("suspend", "pod/j").exit_code == 2

    def test_a_finished_job_is_refused_with_exit_2(self, server, home_store):
        put(
            home_store,
            ddp_job(
                "done", conditions=[condition("Running"), condition("Succeeded", at="2030-01-01T00:00:00Z")]
            ),
        )
        before = home_store.get("TrainingJob", "done", "default")["metadata"]["resourceVersion"]
        for args in (("suspend", "job/done"), ("resume", "job/done"), ("suspend", "job/done", "--wait")):
            result = muster(*args)
            assert result.exit_code == 2, result.output
            assert result.stdout == ""
            assert "trainingjob/done has Succeeded" in result.stderr
            assert "finished" in result.stderr
        assert home_store.get("TrainingJob", "done", "default")["metadata"]["resourceVersion"] == before

    def test_wait_for_the_controller(self, server, home_store):
        put(home_store, ddp_job("w", conditions=[condition("Running")]))
        timed_out = muster("suspend", "job/w", "--wait", "--timeout", "0.3")
        assert timed_out.exit_code == 1 and "is still Running after 0s" in timed_out.stderr

        put(home_store, ddp_job("w2", conditions=[condition("Running")]))

        def controller() -> None:  # a stand-in that reports the suspension once it is asked for
            def suspended() -> dict[str, Any] | None:
                job = home_store.get("TrainingJob", "w2", "default")
                return job if job["spec"]["runPolicy"]["suspend"] else None

            job = wait_for(suspended, 30, what="the suspend request")
            job["status"]["conditions"].append(condition("Suspended", at="2030-01-01T00:00:00Z"))
            home_store.update_status(job)

        thread = threading.Thread(target=controller)
        thread.start()
        result = muster("suspend", "job/w2", "--wait", "--timeout", "30")
        thread.join(timeout=30)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines()[-1] == "trainingjob/w2 is Suspended"

    def test_a_concurrent_change_is_read_again_not_overwritten(self, server, home_store):
        put(home_store, ddp_job("c", conditions=[condition("Running")]))
        with server.client() as client:
            real_update = client.update
            calls = []

            def racing_update(obj: dict[str, Any]) -> dict[str, Any]:
                if not calls:  # someone else writes between our read and our write
                    other = home_store.get("TrainingJob", "c", "default")
                    other["metadata"].setdefault("labels", {})["team"] = "a"
                    home_store.update(other)
                calls.append(obj)
                return real_update(obj)

            client.update = racing_update  # type: ignore[method-assign]
            job, changed = set_suspend(client, "c", "default", True)
        assert changed and len(calls) == 2
        stored = home_store.get("TrainingJob", "c", "default")
        assert stored["spec"]["runPolicy"]["suspend"] is True and stored["metadata"]["labels"] == {
            "team": "a"
        }
        assert job["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
