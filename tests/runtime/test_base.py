"""The runtime contract's types: reasons, phases, timestamps."""

from __future__ import annotations

from muster.runtime.base import (
    STOP_REASONS,
    LaunchError,
    PodPhase,
    PodReason,
    PodRef,
    PodStatusChange,
    StopReason,
    iso_from_epoch,
)


def test_every_stop_reason_is_a_pod_reason():
    assert {r.value for r in StopReason} <= {r.value for r in PodReason}
    assert {r.value for r in STOP_REASONS} == {r.value for r in StopReason}


def test_final_phases():
    ref = PodRef("ns", "p", "u")
    assert PodStatusChange(ref, PodPhase.FAILED, PodReason.ERROR).final
    assert PodStatusChange(ref, PodPhase.SUCCEEDED, PodReason.COMPLETED).final
    assert not PodStatusChange(ref, PodPhase.RUNNING).final
    assert str(ref) == "ns/p"


def test_timestamps_are_rfc3339_utc():
    assert iso_from_epoch(0) == "1970-01-01T00:00:00.000000Z"


def test_launch_error_names_path_rule_and_hint():
    err = LaunchError("spec.containers[0].command", "must be set", "e.g. [python, train.py]")
    assert str(err) == "spec.containers[0].command: must be set (e.g. [python, train.py])"
