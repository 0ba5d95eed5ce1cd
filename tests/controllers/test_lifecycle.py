"""The transition tables: every allowed edge works, everything else is rejected in one place."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from muster.api.conditions import condition, epoch, iso, set_condition
from muster.api.lifecycle import (
    JOB_TRANSITIONS,
    POD_TRANSITIONS,
    WORKLOAD_TRANSITIONS,
    IllegalTransition,
    JobPhase,
    PodPhase,
    WorkloadState,
    admit_workload,
    check,
    evict_workload,
    finish_workload,
    job_phase,
    move_job,
    requeue_workload,
    workload_state,
)

NOW = 1_700_000_000.0


def workload() -> dict:
    return {"kind": "Workload", "metadata": {"name": "w", "namespace": "default"}, "spec": {"podSets": []}}


def admission() -> dict:
    return {"clusterQueue": "cq", "podSetAssignments": []}


def test_workload_round_trip_through_eviction():
    wl = workload()
    assert workload_state(wl) is WorkloadState.PENDING
    event = admit_workload(wl, admission(), NOW)
    assert event.reason == "Admitted" and workload_state(wl) is WorkloadState.ADMITTED
    evict_workload(
        wl, "Preempted", "make room", NOW + 1, preemption_reason="InClusterQueue", preempted_by="ns/x"
    )
    assert workload_state(wl) is WorkloadState.EVICTING
    assert wl["status"]["preemptedBy"] == "ns/x"
    assert condition(wl, "Preempted")["reason"] == "InClusterQueue"
    requeue_workload(wl, NOW + 2)
    assert workload_state(wl) is WorkloadState.PENDING
    assert "admission" not in wl["status"] and wl["status"]["requeueState"]["count"] == 1
    assert epoch(condition(wl, "Requeued")["lastTransitionTime"]) == NOW + 2
    admit_workload(wl, admission(), NOW + 3)
    assert condition(wl, "Evicted")["status"] == "False"
    assert "preemptedBy" not in wl["status"]
    evict_workload(wl, "Preempted", "again", NOW + 4, preemption_reason="InClusterQueue")
    requeue_workload(wl, NOW + 5)
    # A second requeue moves the queue-order timestamp again.
    assert epoch(condition(wl, "Requeued")["lastTransitionTime"]) == NOW + 5
    assert wl["status"]["requeueState"]["count"] == 2


@pytest.mark.parametrize("frm", list(WorkloadState))
@pytest.mark.parametrize("to", list(WorkloadState))
def test_workload_table_is_the_only_judge(frm: WorkloadState, to: WorkloadState):
    allowed = (frm, to) in WORKLOAD_TRANSITIONS
    try:
        check(WORKLOAD_TRANSITIONS, frm, to, "Workload w")
    except IllegalTransition as exc:
        assert not allowed
        assert f"illegal transition {frm} -> {to}" in str(exc)
    else:
        assert allowed


def test_finished_workloads_stay_finished():
    wl = workload()
    admit_workload(wl, admission(), NOW)
    finish_workload(wl, "Succeeded", "done", NOW)
    with pytest.raises(IllegalTransition, match="Finished -> Admitted"):
        admit_workload(wl, admission(), NOW)


def test_pod_table_never_leaves_a_final_phase():
    for (frm, _to), _ in POD_TRANSITIONS.items():
        assert frm not in (PodPhase.SUCCEEDED, PodPhase.FAILED)
    with pytest.raises(IllegalTransition):
        check(POD_TRANSITIONS, PodPhase.FAILED, PodPhase.RUNNING, "Pod p")


def job() -> dict:
    return {"kind": "TrainingJob", "metadata": {"name": "j", "namespace": "default"}}


def test_job_phases_follow_the_latest_condition():
    j = job()
    assert job_phase(j) is None
    move_job(j, JobPhase.CREATED, "Created", "", NOW)
    move_job(j, JobPhase.QUEUED, "Queued", "", NOW)  # same time: the later condition wins
    assert job_phase(j) is JobPhase.QUEUED
    move_job(j, JobPhase.RUNNING, "Running", "", NOW + 1)
    event = move_job(j, JobPhase.RESTARTING, "Restarting", "pod x failed", NOW + 2)
    assert event.type == "Warning"
    assert condition(j, "Running")["status"] == "False"
    move_job(j, JobPhase.RESTARTING, "Restarting", "again", NOW + 3)  # one more gang restart
    assert epoch(condition(j, "Restarting")["lastTransitionTime"]) == NOW + 3
    move_job(j, JobPhase.RUNNING, "Running", "", NOW + 4)
    move_job(j, JobPhase.SUCCEEDED, "Succeeded", "", NOW + 5)
    assert condition(j, "Created")["status"] == "True"  # as in the Training Operator
    assert job_phase(j) is JobPhase.SUCCEEDED
    with pytest.raises(IllegalTransition, match="Succeeded -> Running"):
        move_job(j, JobPhase.RUNNING, "Running", "", NOW + 6)


def _phase_by_definition(j: dict) -> JobPhase | None:
    """job_phase as its docstring defines it, plainly (the reference for the property below)."""
    for terminal in (JobPhase.SUCCEEDED, JobPhase.FAILED):
        c = condition(j, terminal.value)
        if c is not None and c.get("status") == "True":
            return terminal
    true = [
        ((c.get("lastTransitionTime") or "", i), JobPhase(c["type"]))
        for i, c in enumerate(j.get("status", {}).get("conditions", []))
        if c.get("status") == "True" and c.get("type") in {p.value for p in JobPhase}
    ]
    return max(true, key=lambda t: t[0])[1] if true else None


_times = st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", ""])
_conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from([*(p.value for p in JobPhase), "Other"]),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        optional={"lastTransitionTime": _times},
    ),
    max_size=8,
)


@given(_conditions)
def test_job_phase_in_one_walk_agrees_with_its_definition(conditions: list[dict]):
    j = {**job(), "status": {"conditions": conditions}}
    assert job_phase(j) is _phase_by_definition(j)


def test_every_active_phase_may_fail_and_terminal_phases_are_final():
    for phase in JobPhase:
        terminal = phase in (JobPhase.SUCCEEDED, JobPhase.FAILED)
        assert ((phase, JobPhase.FAILED) in JOB_TRANSITIONS) != terminal
        assert not terminal or not [1 for (a, _b) in JOB_TRANSITIONS if a is phase]


def test_preempted_job_requeues_and_suspend_resumes_to_queued():
    j = job()
    for to in (JobPhase.CREATED, JobPhase.QUEUED, JobPhase.RUNNING, JobPhase.PREEMPTED, JobPhase.QUEUED):
        move_job(j, to, to.value, "", NOW)
    move_job(j, JobPhase.SUSPENDED, "Suspended", "", NOW + 1)
    with pytest.raises(IllegalTransition):
        move_job(j, JobPhase.RUNNING, "Running", "", NOW + 2)
    move_job(j, JobPhase.QUEUED, "Resumed", "", NOW + 2)
    assert job_phase(j) is JobPhase.QUEUED


def test_conditions_keep_their_transition_time_when_only_reworded():
    obj: dict = {}
    assert set_condition(obj, "Queued", "True", "QuotaExhausted", "need 4", NOW)
    assert set_condition(obj, "Queued", "True", "QuotaExhausted", "need 2", NOW + 5)
    assert not set_condition(obj, "Queued", "True", "QuotaExhausted", "need 2", NOW + 6)
    assert condition(obj, "Queued")["lastTransitionTime"] == iso(NOW)
