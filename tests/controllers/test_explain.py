"""`why` explanations built from constructed objects, one per state of a job."""

from __future__ import annotations

import json

from muster.api.labels import replica_name
from muster.api.registry import validate
from muster.controllers.insight.explain import WhyContext, explain, failing_pod
from muster.controllers.insight.explain.pending import queue_time
from muster.testing.cluster import (
    admitted,
    cluster_queue,
    condition,
    ddp_job,
    event,
    pod,
    quota_shortfall,
    workload,
)
from muster.testing.factories import local_queue

GPU = "nvidia.com/gpu"
QUOTA_MESSAGE = (
    "cluster queue default has too little quota: 2 nvidia.com/gpu in flavor default needed, 0 available "
    "(nominal 4, 4 in use by the queue); it waits until 2 more nvidia.com/gpu of flavor default is free"
)
SHORTFALL = quota_shortfall(requested=2000, available=0, nominal=4000, used=4000, maximum=8000)


def _queues(within: str = "LowerPriority"):
    return [cluster_queue("default", {"default": {GPU: "4", "cpu": "64"}}, within=within)], [
        local_queue("default")
    ]


def _busy_cluster(priority: int = 100, within: str = "LowerPriority"):
    """Two admitted workloads hold the 4 GPUs; three wait, ``job`` among them."""
    cqs, lqs = _queues(within)
    running = [
        admitted(workload("low", priority=0, pods=2), "default", "node-a", [[0], [1]]),
        admitted(workload("high", priority=500, pods=2), "default", "node-a", [[2], [3]]),
    ]
    me = workload(
        "job",
        priority=priority,
        created="2025-01-01T00:05:00Z",
        pending=("QuotaExhausted", QUOTA_MESSAGE, {"clusterQueue": "default", "shortfalls": [SHORTFALL]}),
        owner="job",
    )
    others = [
        workload("urgent", priority=1000, created="2025-01-01T00:09:00Z"),  # higher priority: ahead
        workload("older", priority=priority, created="2025-01-01T00:01:00Z"),  # same priority, older: ahead
        workload("newer", priority=priority, created="2025-01-01T00:07:00Z"),  # behind
        workload("elsewhere", namespace="other", queue="missing"),  # another queue: not counted
    ]
    for obj in [*cqs, *lqs, *running, me, *others]:
        validate(obj, keep_status=True)
    return WhyContext(
        workload=me, cluster_queues=cqs, local_queues=lqs, workloads=[*running, me, *others]
    ), me


class TestPending:
    def test_queue_position_quota_and_what_would_unblock(self):
        ctx, _ = _busy_cluster()
        job = ddp_job(
            "job", conditions=[condition("Created"), condition("Queued", at="2025-01-01T00:05:01Z")]
        )
        ctx.job = job
        ex = explain(job, ctx)
        assert (ex.state, ex.reason) == ("Queued", "QuotaExhausted")
        assert ex.message == QUOTA_MESSAGE
        assert (
            ex.summary
            == "trainingjob/job is waiting in ClusterQueue default (position 3 of 4): QuotaExhausted: "
            "needs 2 more nvidia.com/gpu of quota in ClusterQueue default"
        )
        assert ex.queue is not None
        assert ex.queue.ahead == ["default/urgent", "default/older"]
        assert ex.requests == {GPU: "2"}
        [row] = ex.quota
        assert (row.resource, row.used, row.nominal) == (GPU, 4, 4)
        assert ex.unblock[0] == (
            "2 more nvidia.com/gpu of flavor default must be free in ClusterQueue default or its cohort; "
            "held now by default/low (2, priority 0), default/high (2, priority 500)"
        )
        assert ex.unblock[1] == (
            "or raise nominalQuota of nvidia.com/gpu in flavor default of ClusterQueue default "
            "from 4 to at least 6"
        )

    def test_lower_priority_holders_in_a_queue_that_never_preempts(self):
        ctx, wl = _busy_cluster(priority=100, within="Never")
        ex = explain(wl, ctx)
        assert ex.state == "Pending"
        assert any("withinClusterQueue: LowerPriority" in hint for hint in ex.unblock)

    def test_only_higher_priority_holders_suggest_a_priority(self):
        ctx, wl = _busy_cluster(priority=-5)
        ex = explain(wl, ctx)
        assert ex.unblock[-1] == "a priorityClassName with a value above 500 would let it preempt them"

    def test_quota_held_elsewhere_in_the_cohort_is_named_with_its_queue(self):
        cqs = [
            cluster_queue("team-a", {"pool": {GPU: ("1", "1")}}, cohort="research"),
            cluster_queue("team-b", {"pool": {GPU: ("1", "1")}}, cohort="research"),
            cluster_queue("other", {"pool": {GPU: "8"}}),
        ]
        lqs = [local_queue("a", "team-a"), local_queue("b", "team-b"), local_queue("o", "other")]
        urgent = admitted(workload("urgent", queue="b", priority=1000, pods=1), "team-b", "n", [[0]], "pool")
        elsewhere = admitted(workload("big", queue="o", pods=1), "other", "n", [[1]], "pool")
        short = quota_shortfall(requested=2000, available=1000, nominal=1000, used=0, maximum=2000)
        short["flavor"] = "pool"
        wl = workload(
            "ddp",
            queue="a",
            pending=("QuotaExhausted", "...", {"clusterQueue": "team-a", "shortfalls": [short]}),
        )
        ctx = WhyContext(cluster_queues=cqs, local_queues=lqs, workloads=[urgent, elsewhere, wl])
        ex = explain(wl, ctx)
        assert ex.unblock[0].endswith("held now by default/urgent (1, priority 1000, ClusterQueue team-b)")
        assert len(ex.unblock) == 2  # no priority would help: the holder is in another queue

    def test_a_requeued_workload_queues_from_its_eviction(self):
        wl = workload(
            "requeued",
            created="2024-12-31T00:00:00Z",
            conditions=[condition("Evicted", "False", at="2025-01-01T01:00:00Z"), condition("Requeued")],
        )
        assert queue_time(wl) == "2025-01-01T01:00:00Z"
        cqs, lqs = _queues()
        later = workload("later", created="2025-01-01T00:30:00Z")
        ex = explain(wl, WhyContext(cluster_queues=cqs, local_queues=lqs, workloads=[wl, later]))
        assert ex.queue is not None and (ex.queue.position, ex.queue.ahead) == (2, ["default/later"])
        assert ex.reason == "NotYetScheduled"

    def test_a_missing_local_queue_says_how_to_fix_it(self):
        cqs, lqs = _queues()
        wl = workload(
            "lost",
            queue="nope",
            pending=("Inadmissible", "LocalQueue nope does not exist in namespace default", {}),
        )
        ex = explain(wl, WhyContext(cluster_queues=cqs, local_queues=lqs, workloads=[wl]))
        assert ex.reason == "Inadmissible"
        assert ex.unblock == [
            "no LocalQueue nope in namespace default: create it, or set the job's queueName"
        ]

    def test_waiting_for_preemption_names_the_victims(self):
        cqs, lqs = _queues()
        details = {"clusterQueue": "default", "victims": [{"name": "low", "reason": "InClusterQueue"}]}
        wl = workload("p", pending=("WaitingForPreemption", "waiting for 1 preempted workload", details))
        ex = explain(wl, WhyContext(cluster_queues=cqs, local_queues=lqs, workloads=[wl]))
        assert ex.unblock == [
            "nothing to do: it is admitted once low have stopped (within their grace period)"
        ]

    def test_a_job_without_its_workload_yet(self):
        ex = explain(ddp_job("new", conditions=[condition("Created")]), WhyContext())
        assert (ex.state, ex.reason) == ("Created", "NoWorkload")

    def test_suspended(self):
        job = ddp_job("s", suspend=True, conditions=[condition("Suspended")])
        ex = explain(job, WhyContext())
        assert ex.state == "Suspended" and ex.unblock == ["resume it: muster resume trainingjob/s"]


class TestFailed:
    def test_backoff_limit_with_the_first_failing_replica_and_its_log(self):
        job = ddp_job(
            "bad",
            backoff_limit=2,
            conditions=[
                condition("Running", at="2025-01-01T00:01:00Z"),
                condition(
                    "Failed",
                    reason="BackoffLimitExceeded",
                    message="restarted 2 times; limit 2",
                    at="2025-01-01T00:09:00Z",
                ),
            ],
            status={"restartCount": 2},
        )
        pods = [
            pod(
                "bad-master-0",
                job="bad",
                replica=("Master", 0),
                phase="Failed",
                reason="Stopped",
                finished="2025-01-01T00:08:02Z",
            ),
            pod(
                "bad-worker-0",
                job="bad",
                phase="Failed",
                reason="OOMKilled",
                exit_code=137,
                message="memory limit 1Gi exceeded",
                finished="2025-01-01T00:08:00Z",
            ),
        ]
        assert failing_pod(pods) is pods[1]
        ctx = WhyContext(job=job, pods=pods, log_tails={"bad-worker-0": ["step 10\n", "allocating\n"]})
        ex = explain(job, ctx)
        assert (ex.state, ex.reason) == ("Failed", "BackoffLimitExceeded")
        assert (
            ex.summary == "trainingjob/bad failed: BackoffLimitExceeded (worker-0: OOMKilled, exit code 137)"
        )
        assert ex.failure is not None and ex.failure.log_tail == ["step 10\n", "allocating\n"]
        assert ex.unblock[0].startswith("worker-0 ran out of memory")
        assert "restarted 2 times" in ex.unblock[1]
        assert [p.replica for p in ex.pods] == ["master-0", "worker-0"]

    def test_a_failed_pod_by_itself(self):
        p = pod("solo", phase="Failed", reason="Error", exit_code=3, message="exit code 3")
        ex = explain(p, WhyContext(log_tails={"solo": ["Traceback\n"]}))
        assert ex.summary == "pod/solo failed: Error, exit code 3"
        assert ex.failure is not None and ex.failure.log_tail == ["Traceback\n"]


class TestPreemptedAndRunning:
    def test_preempted_by_whom_and_when(self):
        ctx, wl = _busy_cluster()
        wl["status"]["conditions"] = [
            condition("Preempted", reason="InClusterQueue", at="2025-01-01T00:04:00Z"),
            condition("Requeued", at="2025-01-01T00:04:30Z"),
        ]
        record = {"time": "2025-01-01T00:04:00Z", "preemptor": "default/urgent", "reason": "InClusterQueue"}
        job = ddp_job(
            "job",
            conditions=[condition("Running"), condition("Preempted", at="2025-01-01T00:04:00Z")],
            status={"preemptions": [record]},
        )
        ctx.job = job
        ctx.events = [event(wl, "Preempted", "preempted by default/urgent", at="2025-01-01T00:04:00Z")]
        ex = explain(job, ctx)
        assert ex.state == "Preempted"
        assert [(p.preemptor, p.time) for p in ex.preemptions] == [("default/urgent", "2025-01-01T00:04:00Z")]
        assert ex.summary.endswith("(requeued after an eviction)")
        assert ex.events[0]["reason"] == "Preempted"

    def test_running_says_where(self):
        job = ddp_job("run", conditions=[condition("Running")])
        pods = [
            pod("run-worker-0", job="run", node="node-a", gpus=[1]),
            pod("run-master-0", job="run", replica=("Master", 0), node="node-a", gpus=[0]),
        ]
        ex = explain(job, WhyContext(job=job, pods=pods))
        assert ex.summary == "trainingjob/run is running: master-0 on node-a GPU 0; worker-0 on node-a GPU 1"
        assert replica_name(pods[0]) == "worker-0"

    def test_an_admitted_workload_whose_pods_do_not_exist_yet(self):
        wl = admitted(workload("w", pods=2), "default", "node-a", [[0], [1]])
        ex = explain(wl, WhyContext(workloads=[wl]))
        assert ex.state == "Admitted"
        assert ex.summary == "workload/w is admitted: worker-0 on node-a GPU 0; worker-1 on node-a GPU 1"


def test_the_json_form_is_camel_case_and_serializable():
    ctx, wl = _busy_cluster()
    out = explain(wl, ctx).to_dict()
    json.dumps(out)
    assert out["queue"]["clusterQueue"] == "default" and out["requests"] == {GPU: "2"}
    assert out["quota"][0]["nominal"] == "4" and "unblock" in out
