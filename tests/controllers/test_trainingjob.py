"""The TrainingJob controller through the manager, on a puppet runtime and a moved clock."""

from __future__ import annotations

from muster.runtime.base import PodReason
from muster.store.events import events_for
from muster.testing.cluster import cluster_queue
from muster.testing.factories import local_queue
from tests.controllers.conftest import Harness, job


def run_gang(h: Harness, name: str) -> None:
    h.settle(lambda: h.rt.running() or h.rt.pods_by_uid)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", name, "Running"))


def test_gang_runs_and_succeeds(harness: Harness):
    h = harness
    h.apply(job("train", workers=2, master=True))
    run_gang(h, "train")
    assert sorted(h.rt.started) == [
        "default/train-master-0",
        "default/train-worker-0",
        "default/train-worker-1",
    ]
    h.rt.exit("default/train-worker-0", 0)
    h.rt.exit("default/train-worker-1", 0)
    h.settle()
    assert not h.has("TrainingJob", "train", "Succeeded")  # the Master decides
    h.rt.exit("default/train-master-0", 0)
    h.settle(lambda: h.has("TrainingJob", "train", "Succeeded"))
    j = h.job("train")
    assert j["status"]["replicaStatuses"] == {
        "Master": {"active": 0, "succeeded": 1, "failed": 0},
        "Worker": {"active": 0, "succeeded": 2, "failed": 0},
    }
    assert h.has("Workload", "train", "Finished", "Succeeded")
    assert [r for r, _ in h.events(j)] == ["Created", "Queued", "Running", "Succeeded"]
    # cleanPodPolicy Running (the default) keeps finished pods.
    assert set(h.pods()) == {"train-master-0", "train-worker-0", "train-worker-1"}


def test_pods_are_bound_to_the_admission(harness: Harness):
    h = harness
    h.apply(job("train", workers=2, gpus=2))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    wl = h.get("Workload", "train")
    placements = wl["status"]["admission"]["podSetAssignments"][0]["pods"]
    for i, placement in enumerate(placements):
        pod = h.pods()[f"train-worker-{i}"]
        assert pod["spec"]["nodeName"] == placement["node"] == "node-0"
        assert pod["spec"]["gpus"] == placement["gpus"]
        assert h.rt.find(f"default/train-worker-{i}").devices.gpus == tuple(placement["gpus"])
        assert pod["metadata"]["labels"]["muster.dev/workload"] == "train"
        assert pod["status"]["handle"] == {"runtime": "local", "node": "node-0"}
    assert sorted(g for p in placements for g in p["gpus"]) == [0, 1, 2, 3]


def test_on_failure_restarts_the_whole_gang_then_backoff_limit_fails(harness: Harness):
    h = harness
    h.apply(job("train", workers=2, run_policy={"backoffLimit": 1}))
    run_gang(h, "train")
    h.rt.exit("default/train-worker-1", 1)
    h.settle(lambda: h.job("train")["status"].get("restartCount") == 1 and len(h.rt.started) == 4)
    # The surviving replica was stopped for the restart, and both came back as a new run.
    assert h.rt.started.count("default/train-worker-0") == 2
    assert h.has("TrainingJob", "train", "Restarting")
    restarted = h.rt.find("default/train-worker-0")
    assert restarted.env["MUSTER_RESTART_COUNT"] == "1"
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    h.rt.exit("default/train-worker-0", 137, reason=PodReason.OOM_KILLED, message="memory limit 1Gi exceeded")
    h.settle(lambda: h.has("TrainingJob", "train", "Failed"))
    failed = h.condition("TrainingJob", "train", "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    assert "train-worker-0 failed: OOMKilled (exit code 137)" in failed["message"]
    assert "backoffLimit is 1" in failed["message"]
    # The rest of the gang is stopped (cleanPodPolicy Running) and the quota released.
    h.settle(lambda: not h.rt.running())
    assert h.has("Workload", "train", "Finished", "Failed")


def test_never_fails_on_the_first_failure(harness: Harness):
    h = harness
    h.apply(job("train", restart_policy="Never"))
    run_gang(h, "train")
    h.rt.exit("default/train-worker-0", 2)
    h.settle(lambda: h.has("TrainingJob", "train", "Failed", "ReplicaFailed"))
    assert "restartPolicy Never" in h.condition("TrainingJob", "train", "Failed")["message"]
    assert h.job("train")["status"].get("restartCount", 0) == 0


def test_exit_code_policy(harness: Harness):
    h = harness
    h.apply(
        job("sig", workers=1, restart_policy="ExitCode"), job("perm", workers=1, restart_policy="ExitCode")
    )
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "sig", "Running") and h.has("TrainingJob", "perm", "Running"))
    h.rt.exit("default/sig-worker-0", 143)  # SIGTERM: retryable
    h.rt.exit("default/perm-worker-0", 127)  # permanent
    h.settle(lambda: h.has("TrainingJob", "perm", "Failed") and h.has("TrainingJob", "sig", "Restarting"))
    assert "exit codes 1-127 are permanent" in h.condition("TrainingJob", "perm", "Failed")["message"]
    assert "(exit code 143)" in h.condition("TrainingJob", "sig", "Restarting")["message"]
    # The failed replica is deleted as the restart decides; that deletion is what brings the job
    # back to start its next run (incremental passes: at once, not at the next full resync).
    h.settle(lambda: h.rt.started.count("default/sig-worker-0") == 2, passes=6)


def test_active_deadline_fails_the_job_and_stops_its_pods(harness: Harness):
    h = harness
    h.apply(job("slow", workers=1, run_policy={"activeDeadlineSeconds": 60, "cleanPodPolicy": "None"}))
    run_gang(h, "slow")
    h.clock.advance(59)
    h.settle()
    assert h.has("TrainingJob", "slow", "Running")
    h.clock.advance(2)
    h.settle(lambda: h.has("TrainingJob", "slow", "Failed", "DeadlineExceeded"))
    h.settle(lambda: not h.rt.pods_by_uid and not h.pods())
    # A deadline stops the pods whatever the cleanPodPolicy.
    assert h.rt.stops == [("default/slow-worker-0", "DeadlineExceeded")]


def test_suspend_stops_pods_and_resume_requeues(harness: Harness):
    h = harness
    h.apply(job("train", workers=2, run_policy={"activeDeadlineSeconds": 100}))
    run_gang(h, "train")
    h.clock.advance(80)
    suspended = job("train", workers=2, run_policy={"activeDeadlineSeconds": 100, "suspend": True})
    h.apply(suspended)
    h.settle(lambda: h.has("TrainingJob", "train", "Suspended") and not h.pods())
    wl = h.get("Workload", "train")
    assert wl["spec"]["active"] is False and "admission" not in wl["status"]
    assert h.condition("Workload", "train", "Evicted")["reason"] == "Deactivated"
    h.clock.advance(80)
    h.apply(job("train", workers=2, run_policy={"activeDeadlineSeconds": 100}))
    h.settle(lambda: len(h.pods()) == 2)
    assert h.has("TrainingJob", "train", "Queued") and not h.has("TrainingJob", "train", "Suspended")
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "train", "Running"))
    # The deadline counts from the resume: 160 s after the first start it still runs.
    assert not h.has("TrainingJob", "train", "Failed")
    counts = {e["reason"]: e["count"] for e in events_for(h.store, h.job("train"))}
    assert counts == {"Created": 1, "Queued": 1, "Running": 2, "Suspended": 1, "Resumed": 1}


def test_preemption_requeues_without_counting_against_backoff(harness: Harness):
    h = harness
    h.apply(
        {"apiVersion": "muster.dev/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
        job("low", workers=2, gpus=2, run_policy={"backoffLimit": 0}),
    )
    run_gang(h, "low")
    h.apply(job("high", workers=1, gpus=4, priorityClassName="high"))
    h.settle(lambda: "default/high-worker-0" in h.rt.started and h.has("TrainingJob", "low", "Queued"))
    low = h.job("low")
    assert h.has("TrainingJob", "low", "Queued")  # preempted, then requeued behind the preemptor
    assert low["status"].get("restartCount", 0) == 0
    assert low["status"]["preemptions"][0]["preemptor"] == "default/high"
    assert low["status"]["preemptions"][0]["reason"] == "InClusterQueue"
    wl = h.get("Workload", "low")
    assert wl["status"]["requeueState"]["count"] == 1
    reasons = [r for r, _ in h.events(low)]
    assert reasons[-2:] == ["Preempted", "Requeued"]
    assert h.get("Workload", "low")["status"]["pending"]["reason"] in (
        "QuotaExhausted",
        "InsufficientResources",
    )
    # The preemptor finishes; the victim resumes, with the same checkpoint directory.
    h.rt.run_all()
    h.rt.exit("default/high-worker-0", 0)
    h.settle(
        lambda: h.has("TrainingJob", "high", "Succeeded") and len(h.rt.running()) == 0 and len(h.pods()) == 3
    )
    env = h.rt.find("default/low-worker-0").env
    assert env["MUSTER_CHECKPOINT_DIR"].endswith("checkpoints/default/low")
    assert env["MUSTER_RESTART_COUNT"] == "0"
    h.rt.run_all()
    h.settle(lambda: h.has("TrainingJob", "low", "Running"))
    assert not h.has("TrainingJob", "low", "Failed")


def test_gang_larger_than_the_node_starts_nothing_and_says_why(harness: Harness):
    h = harness
    big = cluster_queue("big", {"default": {"cpu": "100", "memory": "1Ti", "nvidia.com/gpu": "64"}})
    lq = local_queue("big", "big")
    h.apply(big, lq, job("huge", workers=3, gpus=2, queueName="big"))
    h.settle(lambda: h.has("TrainingJob", "huge", "Queued", "InsufficientResources"))
    pending = h.get("Workload", "huge")["status"]["pending"]
    assert pending["reason"] == "InsufficientResources"
    assert "GPU" in pending["message"]
    assert not h.pods() and not h.rt.started
    assert h.condition("TrainingJob", "huge", "Queued")["message"] == pending["message"]


def test_quota_exhausted_waits_then_starts_when_another_finishes(harness: Harness):
    h = harness
    h.apply(job("first", workers=2, gpus=2), job("second", workers=1, gpus=2))
    h.settle(lambda: len(h.rt.pods_by_uid) == 2)
    pending = h.get("Workload", "second")["status"]["pending"]
    assert pending["reason"] == "QuotaExhausted"
    h.rt.run_all()
    h.rt.exit("default/first-worker-0", 0)
    h.rt.exit("default/first-worker-1", 0)
    h.settle(lambda: "default/second-worker-0" in h.rt.started)
    assert h.has("TrainingJob", "first", "Succeeded")


def test_ttl_deletes_the_finished_job_and_what_it_owns(harness: Harness):
    h = harness
    h.apply(job("short", workers=1, run_policy={"ttlSecondsAfterFinished": 30}))
    run_gang(h, "short")
    h.rt.exit("default/short-worker-0", 0)
    h.settle(lambda: h.has("TrainingJob", "short", "Succeeded"))
    h.clock.advance(29)
    h.settle()
    assert h.get("TrainingJob", "short") is not None
    h.clock.advance(2)
    h.settle(
        lambda: h.get("TrainingJob", "short") is None and not h.pods() and h.get("Workload", "short") is None
    )


def test_deleting_a_job_stops_and_removes_its_pods(harness: Harness):
    h = harness
    h.apply(job("doomed", workers=2))
    run_gang(h, "doomed")
    h.store.delete("TrainingJob", "doomed", "default")
    h.settle(lambda: not h.pods() and h.get("Workload", "doomed") is None and not h.rt.pods_by_uid)


def test_clean_pod_policy_all_removes_finished_pods(harness: Harness):
    h = harness
    h.apply(job("tidy", workers=2, run_policy={"cleanPodPolicy": "All"}))
    run_gang(h, "tidy")
    h.rt.exit("default/tidy-worker-0", 0)
    h.rt.exit("default/tidy-worker-1", 0)
    h.settle(lambda: h.has("TrainingJob", "tidy", "Succeeded") and not h.pods())


def test_elastic_job_runs_with_what_was_admitted(harness: Harness):
    h = harness
    h.apply(job("blocker", workers=1, gpus=1))
    h.settle(lambda: len(h.rt.pods_by_uid) == 1)
    h.apply(job("elastic", workers=4, gpus=1, elasticPolicy={"minReplicas": 2, "maxReplicas": 4}))
    h.settle(lambda: len(h.rt.pods_by_uid) == 4)
    envs = [h.rt.find(f"default/elastic-worker-{i}").env for i in range(3)]
    assert {e["WORLD_SIZE"] for e in envs} == {"3"} and {e["PET_NNODES"] for e in envs} == {"3"}
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert envs[0]["PET_RDZV_BACKEND"] == "c10d"


def test_missing_priority_class_holds_the_job_with_a_reason(harness: Harness):
    h = harness
    h.apply(job("vip", priorityClassName="gold"))
    h.settle()
    assert h.get("Workload", "vip") is None
    created = h.condition("TrainingJob", "vip", "Created")
    assert created["reason"] == "PriorityClassNotFound" and "gold" in created["message"]
    h.apply(
        {"apiVersion": "muster.dev/v1", "kind": "PriorityClass", "metadata": {"name": "gold"}, "value": 7}
    )
    h.settle(lambda: h.get("Workload", "vip") is not None)
    assert h.get("Workload", "vip")["spec"]["priority"] == 7


def test_global_default_priority_and_default_queue(harness: Harness):
    h = harness
    h.apply(
        {
            "apiVersion": "muster.dev/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "base"},
            "value": 3,
            "globalDefault": True,
        },
        job("plain"),
    )
    h.settle(lambda: h.get("Workload", "plain") is not None)
    spec = h.get("Workload", "plain")["spec"]
    assert (spec["priority"], spec["priorityClassName"], spec["queueName"]) == (3, "base", "default")


def test_no_queue_in_a_namespace_without_default_says_so(harness: Harness):
    h = harness
    doc = job("lost")
    doc["metadata"]["namespace"] = "elsewhere"
    h.apply(doc)
    h.settle(lambda: (h.get("Workload", "lost", "elsewhere") or {}).get("status", {}).get("pending"))
    pending = h.get("Workload", "lost", "elsewhere")["status"]["pending"]
    assert pending["reason"] == "Inadmissible"
    assert "no LocalQueue named default" in pending["message"]


def test_queue_and_priority_from_kueue_labels(harness: Harness):
    h = harness
    doc = job("labelled")
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team", "kueue.x-k8s.io/priority-class": "p5"}
    h.apply(
        {"apiVersion": "muster.dev/v1", "kind": "PriorityClass", "metadata": {"name": "p5"}, "value": 5},
        local_queue("team", "default"),
        doc,
    )
    h.settle(lambda: h.has("TrainingJob", "labelled", "Running") or len(h.rt.pods_by_uid) == 2)
    spec = h.get("Workload", "labelled")["spec"]
    assert (spec["queueName"], spec["priority"], spec["priorityClassName"]) == ("team", 5, "p5")


def test_pods_run_for_their_job_and_their_events_name_it(harness: Harness):
    """What outlives a pod (its log, its events) names the job it ran for, by uid: a job
    applied again under the same name reuses the pod names, never this history."""
    h = harness
    h.apply(job("owned", workers=1, master=True))
    run_gang(h, "owned")
    uid = h.job("owned")["metadata"]["uid"]
    owner = {"kind": "TrainingJob", "name": "owned", "uid": uid}
    assert [p.launch.log_owner() for p in h.rt.pods_by_uid.values()] == [owner, owner]
    h.rt.exit("default/owned-worker-0", 1)
    h.settle(lambda: h.has("TrainingJob", "owned", "Restarting") or h.has("TrainingJob", "owned", "Failed"))
    pod_events = [e for e in h.store.list("Event", "default").items if e["involvedObject"]["kind"] == "Pod"]
    assert pod_events, "the failed pod's events"
    assert all(e["related"] | owner == e["related"] for e in pod_events)
