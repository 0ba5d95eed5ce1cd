"""The Experiment controller on the fake runtime: trials through the queues, metrics from the
pods' output, early stopping with the checkpoint handshake, ASHA promotion, the end."""

from __future__ import annotations

from muster.runtime.base import PodReason
from tests.controllers.conftest import Harness
from tests.controllers.experiments import experiment, phase, say, trials


def test_random_search_runs_trials_through_the_queue_and_reports_the_best(harness: Harness):
    h = harness
    h.apply(experiment(max_trials=3, parallel=2))
    h.settle(
        lambda: (
            len(h.rt.running()) == 0 and "search-0-worker-0" in h.pods() and "search-1-worker-0" in h.pods()
        )
    )
    assert sorted(trials(h)) == ["search-0", "search-1"]
    job = h.job("search-0")
    assert job["metadata"]["labels"]["muster.dev/experiment"] == "search"
    lr = trials(h)["search-0"]["spec"]["parameterAssignments"][0]["value"]
    pod = h.pods()["search-0-worker-0"]
    cmd = pod["spec"]["containers"][0]["command"]
    assert cmd[-1] == f"--lr={lr}"
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["MUSTER_TRIAL_NAME"] == "search-0" and "MUSTER_CHECKPOINT_DIR" in env

    for n, losses in ((0, [0.9, 0.5, 0.4]), (1, [0.8, 0.3, 0.35])):
        h.rt.run(f"default/search-{n}-worker-0")
        say(h, f"search-{n}-worker-0", *(f"epoch {i}: loss={v}" for i, v in enumerate(losses)))
    h.settle(lambda: phase(h, "search-0") == "Running" and phase(h, "search-1") == "Running")
    for n in (0, 1):
        h.rt.exit(f"default/search-{n}-worker-0", 0)
    h.settle(lambda: phase(h, "search-1") == "Succeeded" and "search-2" in trials(h))
    t1 = h.get("Trial", "search-1")
    assert t1["status"]["objectiveValue"] == 0.3  # min of the reports (minimize)
    metrics = h.store.list("TrialMetrics", "default").items
    seg = next(m for m in metrics if m["spec"]["trial"] == "search-1")
    assert seg["spec"]["series"]["loss"]["values"] == [0.8, 0.3, 0.35]
    assert seg["spec"]["series"]["loss"]["steps"] == [1, 2, 3]

    h.settle(lambda: "search-2-worker-0" in h.pods())
    h.rt.run("default/search-2-worker-0")
    h.rt.exit("default/search-2-worker-0", 0)  # says nothing: metrics unavailable
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    exp = h.get("Experiment", "search")
    assert h.condition("Experiment", "search", "Succeeded")["reason"] == "MaxTrialsReached"
    status = exp["status"]
    assert status["currentOptimalTrial"]["bestTrialName"] == "search-1"
    assert status["trials"] == 3 and status["trialsSucceeded"] == 2 and status["trialMetricsUnavailable"] == 1
    assert phase(h, "search-2") == "MetricsUnavailable"


def test_a_failed_trial_counts_against_max_failed(harness: Harness):
    h = harness
    h.apply(experiment(max_trials=4, parallel=1, maxFailedTrialCount=0))
    h.settle(lambda: "search-0-worker-0" in h.pods())
    h.rt.run("default/search-0-worker-0")
    h.rt.exit("default/search-0-worker-0", 1, reason=PodReason.ERROR)
    h.settle(lambda: h.has("Experiment", "search", "Failed"))
    assert phase(h, "search-0") == "Failed"
    assert h.condition("Experiment", "search", "Failed")["reason"] == "MaxFailedTrialsReached"


def test_asha_pauses_at_a_rung_gives_the_gpu_back_and_promotes_from_the_checkpoint(harness: Harness):
    h = harness
    h.apply(experiment("asha", algorithm="asha", settings={"max_resource": 9}, parallel=1, max_trials=4))

    def report(n: int, *values: float) -> None:
        pod = f"asha-{n}-worker-0"
        h.settle(lambda: pod in h.pods())
        h.rt.run(f"default/{pod}")
        say(h, pod, *(f"loss={v}" for v in values))

    report(0, 0.3)  # rung 0 (step 1) alone: the top 1/3 of one trial is nobody -> paused
    h.settle(lambda: phase(h, "asha-0") == "EarlyStopped")
    t0 = h.get("Trial", "asha-0")
    assert t0["status"]["reason"] == "PausedAtRung"
    assert t0["status"]["rungs"] == [
        {**t0["status"]["rungs"][0], "rung": 0, "step": 1, "value": 0.3, "decision": "Paused"}
    ]
    job = h.job("asha-0")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert "asha-0-worker-0" not in h.pods()  # stopped (SIGTERM: the checkpoint handshake), GPU back
    stopped = [e for e in h.events(job) if e[0] == "Suspended"]
    assert stopped
    checkpoints = h.home / "checkpoints" / "default" / "asha-0"
    checkpoints.mkdir(parents=True, exist_ok=True)
    (checkpoints / "step-1.pt").write_text("weights")

    report(1, 0.5)
    h.settle(lambda: phase(h, "asha-1") == "EarlyStopped")
    report(2, 0.6)  # three at rung 0: asha-0 (0.3) is the top 1/3 -> promoted into the free slot
    h.settle(lambda: phase(h, "asha-2") == "EarlyStopped" and phase(h, "asha-0") in ("Pending", "Running"))
    t0 = h.get("Trial", "asha-0")
    assert t0["status"]["rungs"][0]["decision"] == "Promoted"
    assert t0["status"]["rungs"][0]["checkpoint"] == "step-1.pt"
    promoted = [m for r, m in h.events(t0) if r == "TrialPromoted"]
    assert promoted and "resumes from checkpoint step-1.pt" in promoted[0], h.events(t0)
    assert "asha-3" not in trials(h, "asha")  # the promotion took the slot, not a new trial
    h.settle(lambda: "asha-0-worker-0" in h.pods())
    assert h.job("asha-0")["spec"]["runPolicy"]["suspend"] is False
    pod = h.pods()["asha-0-worker-0"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["MUSTER_CHECKPOINT_DIR"] == str(checkpoints)
    h.rt.run("default/asha-0-worker-0")
    say(h, "asha-0-worker-0", "loss=0.25", "loss=0.2")  # steps 2 and 3: rung 1, alone -> paused
    h.settle(lambda: len(h.get("Trial", "asha-0")["status"].get("rungs") or []) == 2)
    assert h.get("Trial", "asha-0")["status"]["rungs"][1]["step"] == 3


def test_median_stopping_stops_a_poor_trial(harness: Harness):
    h = harness
    stopping = {
        "algorithmName": "medianstop",
        "algorithmSettings": [
            {"name": "min_trials_required", "value": "2"},
            {"name": "start_step", "value": "2"},
        ],
    }
    h.apply(experiment(early_stopping=stopping, parallel=2, max_trials=3))
    h.settle(lambda: "search-1-worker-0" in h.pods())
    for n, values in ((0, (0.5, 0.4, 0.3)), (1, (0.6, 0.5, 0.4))):
        h.rt.run(f"default/search-{n}-worker-0")
        say(h, f"search-{n}-worker-0", *(f"loss={v}" for v in values))
    h.settle(lambda: phase(h, "search-0") == "Running" and phase(h, "search-1") == "Running")
    for n in (0, 1):
        h.rt.exit(f"default/search-{n}-worker-0", 0)
    h.settle(lambda: "search-2-worker-0" in h.pods())
    h.rt.run("default/search-2-worker-0")
    say(h, "search-2-worker-0", "loss=0.9")
    h.settle(lambda: phase(h, "search-2") == "Running")
    assert phase(h, "search-2") == "Running"  # one report: before start_step
    say(h, "search-2-worker-0", "loss=0.8")  # best 0.8 > median of running averages (0.45, 0.55)
    h.settle(lambda: phase(h, "search-2") == "EarlyStopped")
    t2 = h.get("Trial", "search-2")
    assert t2["status"]["reason"] == "MedianStopped"
    assert "median 0.5" in t2["status"]["message"]
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    assert h.get("Experiment", "search")["status"]["trialsEarlyStopped"] == 1


def _finish(h: Harness, trial: str, *values: float) -> None:
    pod = f"{trial}-worker-0"
    h.settle(lambda: pod in h.pods())
    h.rt.run(f"default/{pod}")
    say(h, pod, *(f"loss={v}" for v in values))
    h.settle(lambda: phase(h, trial) == "Running")
    h.rt.exit(f"default/{pod}", 0)
    h.settle(lambda: phase(h, trial) == "Succeeded")


def test_grid_runs_every_point_once_then_ends(harness: Harness):
    h = harness
    doc = experiment(algorithm="grid", parallel=2, max_trials=None)
    doc["spec"].pop("maxTrialCount")
    doc["spec"]["parameters"] = [
        {
            "name": "lr",
            "parameterType": "double",
            "feasibleSpace": {"min": "0.1", "max": "0.3", "step": "0.1"},
        },
        {"name": "opt", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam"]}},
    ]
    h.apply(doc)
    for n in range(6):
        _finish(h, f"search-{n}", 0.5 - n / 100)
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    assert h.condition("Experiment", "search", "Succeeded")["reason"] == "SuggestionEndReached"
    points = {tuple(a["value"] for a in t["spec"]["parameterAssignments"]) for t in trials(h).values()}
    assert points == {(lr, o) for lr in ("0.1", "0.2", "0.3") for o in ("sgd", "adam")}


def test_tpe_proposes_from_the_stored_trials(harness: Harness):
    h = harness
    h.apply(
        experiment(
            algorithm="tpe", settings={"n_startup_trials": 2, "random_state": 7}, parallel=1, max_trials=3
        )
    )
    _finish(h, "search-0", 0.4)
    _finish(h, "search-1", 0.2)
    h.settle(lambda: "search-2" in trials(h))
    values = [a["value"] for a in trials(h)["search-2"]["spec"]["parameterAssignments"]]
    assert 0.001 <= float(values[0]) <= 0.1 and 1 <= int(values[1]) <= 27


def test_reaching_the_goal_kills_the_running_trials_and_frees_their_gpus(harness: Harness):
    h = harness
    h.apply(experiment(goal=0.1, parallel=2, max_trials=10))
    h.settle(lambda: "search-1-worker-0" in h.pods())
    h.rt.run("default/search-1-worker-0")
    _finish(h, "search-0", 0.5, 0.05)
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    assert h.condition("Experiment", "search", "Succeeded")["reason"] == "GoalReached"
    assert phase(h, "search-1") == "Killed"
    h.settle(lambda: "search-1-worker-0" not in h.pods())
    assert h.job("search-1")["spec"]["runPolicy"]["suspend"] is True
    assert len(trials(h)) == 2


def test_a_preempted_trial_waits_and_runs_again(harness: Harness):
    h = harness
    h.apply(experiment(parallel=1, max_trials=2))
    h.settle(lambda: "search-0-worker-0" in h.pods())
    h.rt.run("default/search-0-worker-0")
    h.settle(lambda: phase(h, "search-0") == "Running")
    wl = h.get("Workload", "search-0")
    first = h.pods()["search-0-worker-0"]["metadata"]["uid"]
    from muster.api.lifecycle import evict_workload

    evict_workload(wl, "Preempted", "preempted by a test", h.clock.now, "InClusterQueue", "default/other")
    h.store.update_status(wl)
    h.settle(lambda: phase(h, "search-0") == "Pending")
    assert h.get("Trial", "search-0")["status"]["reason"] == "Preempted"
    h.settle(
        lambda: h.pods().get("search-0-worker-0", {}).get("metadata", {}).get("uid") not in (None, first)
    )
    h.rt.run("default/search-0-worker-0")
    h.settle(lambda: phase(h, "search-0") == "Running")


def test_a_restarted_manager_loses_and_repeats_nothing(harness: Harness):
    from muster.controllers.manager import Manager, ManagerConfig

    h = harness
    h.apply(experiment(parallel=2, max_trials=4))
    h.settle(lambda: "search-1-worker-0" in h.pods())
    h.rt.run("default/search-0-worker-0")
    say(h, "search-0-worker-0", "loss=0.9", "loss=0.8")
    h.settle(lambda: phase(h, "search-0") == "Running")
    h.clock.advance(5)
    h.settle(lambda: h.store.list("TrialMetrics", "default").items)  # the first two points are stored
    say(h, "search-0-worker-0", "loss=0.7")  # read, maybe, but never stored by this manager
    h.manager.run_once(h.rt.poll())
    h.manager.stop()

    h.manager = Manager(h.store, ManagerConfig(home=h.home, clock=h.clock, resync_seconds=0), runtime=h.rt)
    h.manager.open()
    h.rt.exit("default/search-0-worker-0", 0)
    h.settle(lambda: phase(h, "search-0") == "Succeeded")
    seg = h.store.list("TrialMetrics", "default").items[0]
    assert seg["spec"]["series"]["loss"]["values"] == [0.9, 0.8, 0.7]
    assert h.get("Trial", "search-0")["status"]["observation"][0]["reports"] == 3
    for n in (1, 2, 3):
        _finish(h, f"search-{n}", 0.5)
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    assert sorted(trials(h)) == ["search-0", "search-1", "search-2", "search-3"]
    assert len(h.store.list("TrainingJob", "default").items) == 4


def test_the_file_collector_reads_the_metrics_file(harness: Harness):
    h = harness
    doc = experiment(parallel=1, max_trials=1)
    doc["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "File"}}
    h.apply(doc)
    h.settle(lambda: "search-0-worker-0" in h.pods())
    pod = h.pods()["search-0-worker-0"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    path = env["MUSTER_METRICS_FILE"]
    h.rt.run("default/search-0-worker-0")
    with open(path, "a") as f:
        f.write("2024-05-01T10:00:00Z loss=0.5\nloss=0.25\n")
    h.rt.exit("default/search-0-worker-0", 0)
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    t = h.get("Trial", "search-0")
    assert t["status"]["objectiveValue"] == 0.25
    seg = h.store.list("TrialMetrics", "default").items[0]
    assert seg["spec"]["series"]["loss"]["times"][0] == 1714557600.0


def test_deleting_the_experiment_removes_its_trials_jobs_and_metrics(harness: Harness):
    h = harness
    h.apply(experiment(parallel=1, max_trials=1))
    _finish(h, "search-0", 0.5)
    h.settle(lambda: h.has("Experiment", "search", "Succeeded"))
    assert h.store.list("TrialMetrics", "default").items
    h.store.delete("Experiment", "search", "default")
    h.settle(
        lambda: (
            not h.store.list("Trial", "default").items
            and not h.store.list("TrainingJob", "default").items
            and not h.store.list("TrialMetrics", "default").items
        )
    )


def test_why_says_how_many_trials_run_wait_and_why_or_were_stopped(harness: Harness):
    from muster.controllers.insight.explain.experiment import explain_experiment

    h = harness
    h.apply(
        experiment("asha", algorithm="asha", settings={"max_resource": 9}, parallel=2, max_trials=6, gpus=3)
    )
    h.settle(lambda: "asha-0-worker-0" in h.pods() and "asha-1" in trials(h, "asha"))
    h.rt.run("default/asha-0-worker-0")
    say(h, "asha-0-worker-0", "loss=0.5")  # alone at rung 0: paused; its GPUs go to asha-1
    h.settle(lambda: phase(h, "asha-0") == "EarlyStopped" and "asha-1-worker-0" in h.pods())
    h.rt.run("default/asha-1-worker-0")
    h.settle(lambda: phase(h, "asha-1") == "Running" and "asha-2" in trials(h, "asha"))
    h.settle(lambda: (h.get("Trial", "asha-2")["status"].get("reason") or "") == "QuotaExhausted")
    exp = h.get("Experiment", "asha")
    listed = h.store.list("Trial", "default").items
    ex = explain_experiment(
        exp, listed, h.store.list("Pod", "default").items, h.store.list("Event", "default").items
    )
    out = ex.to_dict()
    assert out["summary"].startswith(
        "experiment/asha is running: 3 of 6 trials, 1 running, 1 waiting (1 QuotaExhausted), "
        "1 stopped early (1 paused at an ASHA rung"
    )
    assert out["running"][0]["trial"] == "asha-1" and "GPU" in out["running"][0]["where"]
    assert out["waiting"][0]["trials"] == ["asha-2"]
    assert out["stopped"][0]["reason"] == "PausedAtRung"
    assert "muster why job/asha-2" in out["unblock"][0]
    assert out["best"]["trial"] == "asha-0" and out["best"]["parameters"]["lr"]


def _quiet_harness(sqlite_store, tmp_path) -> Harness:
    """Passes look only at what changed (no full resync); the clock moves only when told."""
    return Harness(sqlite_store, tmp_path / "home", resync_seconds=3600)


def _count_reconciles(h: Harness) -> list[str]:
    reconciled: list[str] = []
    real = h.manager.experiments.reconcile
    h.manager.experiments.reconcile = lambda exp: (reconciled.append(exp["metadata"]["name"]), real(exp))
    return reconciled


def test_the_experiment_s_own_writes_do_not_make_it_look_again(sqlite_store, tmp_path):
    h = _quiet_harness(sqlite_store, tmp_path)
    try:
        h.apply(experiment(parallel=1, max_trials=2))
        h.settle(lambda: "search-0-worker-0" in h.pods())
        h.rt.run("default/search-0-worker-0")
        h.settle(lambda: phase(h, "search-0") == "Running")
        h.settle()
        reconciled = _count_reconciles(h)
        say(h, "search-0-worker-0", "loss=0.5")  # no stopping rule: read on its timer
        h.clock.advance(1.0)
        h.manager.run_once(h.rt.poll())
        assert reconciled == ["search"]
        assert h.get("Trial", "search-0")["status"]["objectiveValue"] == 0.5  # written: a change
        h.manager.run_once(h.rt.poll())
        assert reconciled == ["search"]  # the trial's status and its own are its writes: no news
    finally:
        h.close()


def test_a_rung_report_is_decided_on_the_next_pass_without_a_resync_or_timer(sqlite_store, tmp_path):
    # The clock stands still (no timer is due) and nothing else changes: the trial's log growing
    # is what makes the controller decide, through its watch of the running trials' files.
    h = _quiet_harness(sqlite_store, tmp_path)
    try:
        h.apply(experiment("asha", algorithm="asha", settings={"max_resource": 9}, parallel=1, max_trials=2))
        h.settle(lambda: "asha-0-worker-0" in h.pods())
        h.rt.run("default/asha-0-worker-0")
        h.settle(lambda: phase(h, "asha-0") == "Running")
        h.settle()
        reconciled = _count_reconciles(h)
        say(h, "asha-0-worker-0", "epoch 0 started")  # no report: nothing to decide
        h.manager.run_once(h.rt.poll())
        assert reconciled == []
        say(h, "asha-0-worker-0", "loss=0.3")  # step 1: rung 0, alone there -> paused
        h.manager.run_once(h.rt.poll())
        assert reconciled == ["asha"]
        assert phase(h, "asha-0") == "Stopping"
        assert h.job("asha-0")["spec"]["runPolicy"]["suspend"] is True
    finally:
        h.close()
