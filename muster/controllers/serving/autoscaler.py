"""The replica autoscaler of a revision: Knative's KPA, on demand measured at the gateway.

Every tick (2 s, and at once when a request waits at zero replicas) it reads the revision's
demand, the average number of requests in flight (on replicas plus held at the gateway) since
the last tick, or requests per second, and decides (reference/serving.md §1, docs/serving.md):

.. code-block:: text

    target   = scaleTarget x targetUtilizationPercentage / 100        (per replica)
    stable   = average demand over the stable window (60 s)
    panic    = average demand over the panic window (10% of it: 6 s)
    ready    = max(1, ready replicas)
    up, down = ceil(1000 x ready), floor(ready / 2)                    (rate bounds per tick)
    want_s   = clamp(ceil(stable / target), down, up)
    want_p   = clamp(ceil(panic / target), down, up)
    panic mode starts when ceil(panic / target) / ready >= panicThresholdPercentage / 100 and
    ends a stable window after that stops being true; in it the count never goes down:
        desired = max(want_s, want_p, the highest desired of the panic)
    else desired = want_s
    desired = the highest desired of the last scaleDownDelaySeconds
    desired = clamp(desired, minReplicas, maxReplicas); and to 0 only after
    scaleToZeroDelaySeconds without a request (with minReplicas 0)

A request held at zero replicas lifts the count to at least one at once (Knative's poke), and
a new revision starts with one replica until it is ready (its initial scale). A revision's
scaler that starts with more than one replica ready (after a server restart) starts in panic
mode, so it never scales down on an empty history.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field

__all__ = ["Decision", "Observation", "ScalerSettings", "ScalerState", "decide"]

MAX_SCALE_UP_RATE = 1000.0
MAX_SCALE_DOWN_RATE = 2.0
TICK_SECONDS = 2.0


@dataclass(frozen=True)
class ScalerSettings:
    """A revision's autoscaling settings (from the InferenceService's spec)."""

    target: float  # per replica, utilisation applied
    min_replicas: int
    max_replicas: int
    stable_window: float = 60.0
    panic_window: float = 6.0
    panic_threshold: float = 2.0
    scale_down_delay: float = 30.0
    scale_to_zero_delay: float = 60.0


@dataclass(frozen=True)
class Observation:
    """What the gateway measured since the last tick: average demand (concurrency, or rps),
    requests held now, and the time of the last request (the same clock as ``now``)."""

    value: float
    held: int = 0
    last_request: float | None = None


@dataclass
class ScalerState:
    samples: collections.deque[tuple[float, float]] = field(default_factory=collections.deque)
    history: collections.deque[tuple[float, int]] = field(default_factory=collections.deque)
    panic_since: float | None = None
    panic_until: float = 0.0
    max_panic: int = 0
    desired: int | None = None
    idle_since: float | None = None
    started: float | None = None


@dataclass(frozen=True)
class Decision:
    desired: int
    stable: float
    panic: float
    panicking: bool
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {
            "desired": self.desired,
            "stable": round(self.stable, 3),
            "panic": round(self.panic, 3),
            "panicking": self.panicking,
            "reason": self.reason,
        }


def decide(
    state: ScalerState, s: ScalerSettings, now: float, seen: Observation, ready: int, current: int
) -> Decision:
    """The replica count for the revision now, given ``seen`` and ``ready`` replicas (``current``
    exist or are being created). Updates ``state``."""
    if state.started is None:
        state.started = now
        state.desired = current
        if ready > 1:  # a restarted autoscaler has no history: never scale down on it
            state.panic_since, state.panic_until, state.max_panic = now, now + s.stable_window, current
    state.samples.append((now, seen.value))
    while state.samples and state.samples[0][0] <= now - s.stable_window:
        state.samples.popleft()
    stable = _average(state.samples, now - s.stable_window)
    panic = _average(state.samples, now - s.panic_window)
    base = max(1, ready)
    up = math.ceil(MAX_SCALE_UP_RATE * base)
    down = math.floor(base / MAX_SCALE_DOWN_RATE)
    want_stable = _clamp(math.ceil(stable / s.target - 1e-9), down, up)
    want_panic = _clamp(math.ceil(panic / s.target - 1e-9), down, up)
    over = math.ceil(panic / s.target - 1e-9) / base >= s.panic_threshold
    if over:
        if state.panic_since is None:
            state.panic_since = now
        state.panic_until = now + s.stable_window
    elif state.panic_since is not None and now >= state.panic_until:
        state.panic_since, state.max_panic = None, 0
    panicking = state.panic_since is not None
    if panicking:
        desired = max(want_stable, want_panic, state.max_panic)
        state.max_panic = desired
        reason = f"panic: {panic:.2f} in flight over {s.panic_window:g}s, {s.target:g} per replica"
    else:
        desired = want_stable
        reason = f"stable: {stable:.2f} in flight over {s.stable_window:g}s, {s.target:g} per replica"
    if seen.held and desired < 1:
        desired, reason = 1, f"{seen.held} request(s) wait at the gateway"
    # a lower count must hold for the scale-down delay
    state.history.append((now, desired))
    while state.history and state.history[0][0] < now - s.scale_down_delay:
        state.history.popleft()
    held_high = max(d for _, d in state.history)
    if held_high > desired:
        reason += f"; held at {held_high} for scaleDownDelaySeconds ({s.scale_down_delay:g}s)"
        desired = held_high
    desired = _clamp(desired, s.min_replicas, s.max_replicas)
    desired = _to_zero(state, s, now, seen, desired, current)
    if desired == 0 and current > 0:
        reason = f"no request for scaleToZeroDelaySeconds ({s.scale_to_zero_delay:g}s)"
    elif desired == s.max_replicas and want_stable > s.max_replicas:
        reason += f"; capped at maxReplicas ({s.max_replicas})"
    state.desired = desired
    return Decision(desired, stable, panic, panicking, reason)


def initial(min_replicas: int, max_replicas: int, warming: bool) -> int:
    """Replicas a revision starts with: minReplicas, and one for a new revision until it is ready."""
    return min(max_replicas, max(min_replicas, 1 if warming else 0))


def _to_zero(
    state: ScalerState, s: ScalerSettings, now: float, seen: Observation, desired: int, current: int
) -> int:
    """Keep the last replica until the revision has been idle for scaleToZeroDelaySeconds."""
    idle = seen.value <= 0 and not seen.held
    if not idle:
        state.idle_since = None
    elif state.idle_since is None:
        state.idle_since = seen.last_request if seen.last_request is not None else now
    if desired > 0 or current == 0:
        return desired
    if state.idle_since is not None and now - state.idle_since >= s.scale_to_zero_delay:
        return 0
    return 1


def _average(samples: collections.deque[tuple[float, float]], since: float) -> float:
    values = [v for t, v in samples if t > since]
    return sum(values) / len(values) if values else 0.0


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))
