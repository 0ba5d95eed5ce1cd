"""The KPA-like autoscaler, pure: stable and panic windows, rate bounds, the scale-down delay,
scale to zero after the idle delay, a held request at zero, and a restart that never scales down
on an empty history."""

from __future__ import annotations

import itertools

from muster.controllers.serving.autoscaler import Observation, ScalerSettings, ScalerState, decide

S = ScalerSettings(target=7.0, min_replicas=1, max_replicas=10, stable_window=60, panic_window=6)


def run(
    state: ScalerState,
    s: ScalerSettings,
    values: list[float],
    ready: int,
    start: float = 0.0,
    step: float = 2.0,
    follow: bool = False,
):
    """Decide once per value, ``step`` seconds apart; with ``follow`` the ready replicas are
    whatever the previous decision asked for (replicas start at once)."""
    decisions = []
    current = state.desired or ready
    for i, v in enumerate(values):
        d = decide(state, s, start + i * step, Observation(v), current if follow else ready, current)
        decisions.append(d)
        current = d.desired
    return decisions


def test_steady_demand_gives_ceil_demand_over_target():
    state = ScalerState()
    last = run(state, S, [21.0] * 40, ready=3)[-1]
    assert last.desired == 3 and not last.panicking  # 21 / 7


def test_a_burst_panics_and_scales_at_once_and_never_down_while_panicking():
    state = ScalerState()
    run(state, S, [7.0] * 30, ready=1)
    burst = decide(state, S, 61, Observation(70.0), ready=1, current=1)
    assert burst.panicking and burst.desired == 4  # the 6 s window's average (28) over 7
    more = run(state, S, [70.0] * 3, ready=4, start=63, follow=True)
    assert more[-1].desired == 10  # 70 / 7: up by more than 2x in one tick (the bound is 1000x)
    calm = run(state, S, [0.0] * 20, ready=10, start=69)
    assert all(d.desired == 10 for d in calm)  # panic lasts a stable window after the burst
    assert calm[-1].panicking


def test_scale_down_is_at_most_half_per_tick_and_waits_for_the_delay():
    s = ScalerSettings(
        target=1.0, min_replicas=1, max_replicas=20, stable_window=10, panic_window=2, scale_down_delay=6
    )
    state = ScalerState()
    run(state, s, [8.0] * 10, ready=8)
    assert state.desired == 8
    decisions = run(state, s, [0.0] * 12, ready=8, start=20, follow=True)
    counts = [d.desired for d in decisions]
    assert counts[0] == 8  # held by the delay
    drops = [a - b for a, b in itertools.pairwise(counts) if b < a]
    assert drops and all(b >= a // 2 for a, b in itertools.pairwise(counts))
    assert counts[-1] == 1  # minReplicas


def test_scale_to_zero_only_after_the_idle_delay_and_a_held_request_brings_one_back():
    s = ScalerSettings(
        target=1.0,
        min_replicas=0,
        max_replicas=3,
        stable_window=6,
        panic_window=2,
        scale_down_delay=0,
        scale_to_zero_delay=20,
    )
    state = ScalerState()
    decide(state, s, 0, Observation(1.0, last_request=0), ready=1, current=1)
    early = [decide(state, s, t, Observation(0.0, last_request=0), 1, 1).desired for t in range(2, 20, 2)]
    assert all(d == 1 for d in early)
    assert decide(state, s, 21, Observation(0.0, last_request=0), 1, 1).desired == 0
    woken = decide(state, s, 40, Observation(0.0, held=1), ready=0, current=0)
    assert woken.desired == 1 and "wait at the gateway" in woken.reason


def test_a_restarted_autoscaler_with_ready_replicas_starts_in_panic_and_holds_them():
    state = ScalerState()
    first = decide(state, S, 0, Observation(0.0), ready=4, current=4)
    assert first.panicking and first.desired == 4


def test_bounds_apply_last():
    s = ScalerSettings(target=1.0, min_replicas=2, max_replicas=3)
    state = ScalerState()
    assert run(state, s, [100.0] * 3, ready=3)[-1].desired == 3
    state = ScalerState()
    assert run(state, s, [0.0] * 3, ready=2)[-1].desired == 2
