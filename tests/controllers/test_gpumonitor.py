"""The GPU monitor: samples on its interval, keeps a bounded history, joins readings by UUID."""

from __future__ import annotations

import pytest

from muster.controllers.nodes.gpumonitor import GpuMonitor, GpuReading
from muster.testing.fake_runtime import FakeRuntime


def test_samples_keep_a_bounded_history():
    rt = FakeRuntime(nodes={"n1": 2})
    mon = GpuMonitor(rt, clock=lambda: 0.0, interval=5, history_seconds=20)
    assert mon.enabled and mon.due(0.0)
    for step in range(10):
        rt.gpu("n1", 0).utilization_pct = step * 10.0
        mon.sample(step * 5.0)
    assert not mon.due(46.0) and mon.due(50.0)
    history = mon.history()
    # 20 s of history at one reading per 5 s: the readings of t=25..45.
    assert [r.time for r in history["GPU-n1-0"]] == [25.0, 30.0, 35.0, 40.0, 45.0]
    assert [r.utilization for r in history["GPU-n1-0"]][-1] == 0.9
    assert [r.time for r in mon.history(since=40.0)["GPU-n1-1"]] == [40.0, 45.0]
    assert mon.latest()["GPU-n1-0"].utilization == 0.9


def test_readings_are_clamped_ratios_and_missing_values_stay_missing():
    rt = FakeRuntime(nodes={"n1": 1})
    rt.gpu("n1", 0).utilization_pct = 130.0
    mon = GpuMonitor(rt, clock=lambda: 0.0)
    mon.sample(1.0)
    assert mon.latest()["GPU-n1-0"].utilization == 1.0
    rt.gpu("n1", 0).lost = True
    mon.sample(10.0)
    reading = mon.latest()["GPU-n1-0"]
    assert (reading.utilization, reading.memory_used_bytes, reading.to_dict()["powerWatts"]) == (
        None,
        None,
        None,
    )


def test_a_runtime_without_gpu_metrics_samples_nothing():
    class Plain:
        name = "plain"

    mon = GpuMonitor(Plain(), clock=lambda: 0.0)  # type: ignore[arg-type]
    assert not mon.enabled and not mon.due(0.0) and mon.next_time() is None
    assert mon.sample() == [] and mon.history() == {}


def test_recorded_readings_fall_out_of_the_window():
    mon = GpuMonitor(None, clock=lambda: 0.0, interval=10, history_seconds=60)
    mon.record(("u", GpuReading(t, 0, 0.5, 0, 1, None, None)) for t in range(0, 200, 10))
    assert [r.time for r in mon.history()["u"]] == [130, 140, 150, 160, 170, 180, 190]
    with pytest.raises(ValueError):
        GpuMonitor(None, clock=lambda: 0.0, interval=0)
