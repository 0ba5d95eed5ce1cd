"""GPU sampling: utilisation, memory, temperature and power of every GPU, with a bounded history.

The manager calls :meth:`GpuMonitor.sample` from its own thread every ``interval`` seconds
(the runtime is that thread's); metrics, ``muster doctor`` ("allocated but idle for 10
minutes") and the dashboard's sparklines read the history from any thread. Readings are
kept per GPU UUID (unique across nodes; the views join them to nodes through the Node
objects' ``status.gpus[].uuid``) for ``history_seconds``, so memory stays bounded: one
reading per interval per GPU.

Tests do not wait for minutes of samples: :meth:`GpuMonitor.record` adds readings at any
time, and the clock is the manager's (injectable).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from muster.runtime.base import GpuSample, Runtime, SupportsGpuMetrics

__all__ = ["DEFAULT_HISTORY_SECONDS", "DEFAULT_SAMPLE_SECONDS", "GpuMonitor", "GpuReading", "History"]

DEFAULT_SAMPLE_SECONDS = 5.0
DEFAULT_HISTORY_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One sample of one GPU. ``utilization`` is a ratio in [0, 1]; None where the device
    cannot report a value."""

    time: float
    index: int
    utilization: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int
    temperature_c: float | None
    power_w: float | None

    @classmethod
    def of(cls, sample: GpuSample, now: float) -> GpuReading:
        util = sample.utilization_pct
        return cls(
            time=now,
            index=sample.index,
            utilization=None if util is None else min(1.0, max(0.0, util / 100.0)),
            memory_used_bytes=sample.memory_used_bytes,
            memory_total_bytes=sample.memory_total_bytes,
            temperature_c=sample.temperature_c,
            power_w=sample.power_w,
        )

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "time": self.time,
            "utilization": self.utilization,
            "memoryUsedBytes": self.memory_used_bytes,
            "memoryTotalBytes": self.memory_total_bytes,
            "temperatureCelsius": self.temperature_c,
            "powerWatts": self.power_w,
        }


# GPU UUID -> its readings, oldest first
History = Mapping[str, Sequence[GpuReading]]


class GpuMonitor:
    """Samples a runtime's GPUs (when it has :class:`SupportsGpuMetrics`) and keeps history."""

    def __init__(
        self,
        runtime: Runtime | None,
        clock: Callable[[], float],
        interval: float = DEFAULT_SAMPLE_SECONDS,
        history_seconds: float = DEFAULT_HISTORY_SECONDS,
    ) -> None:
        if interval <= 0 or history_seconds <= 0:
            raise ValueError("the GPU sample interval and history must be positive")
        self.source = runtime if isinstance(runtime, SupportsGpuMetrics) else None
        self.clock = clock
        self.interval = interval
        self.history_seconds = history_seconds
        self._capacity = math.ceil(history_seconds / interval) + 1
        self._history: dict[str, deque[GpuReading]] = {}
        self._lock = threading.Lock()
        self._next = float("-inf")
        self.errors = 0  # samples that failed (the runtime raised); logged by the caller

    @property
    def enabled(self) -> bool:
        return self.source is not None

    def next_time(self) -> float | None:
        """When the next sample is due (None: nothing to sample)."""
        return self._next if self.enabled else None

    def due(self, now: float) -> bool:
        return self.enabled and now >= self._next

    def sample(self, now: float | None = None) -> list[GpuSample]:
        """Read every GPU once (on the runtime's thread) and keep the readings."""
        if self.source is None:
            return []
        now = self.clock() if now is None else now
        self._next = now + self.interval
        samples = self.source.gpu_samples()
        self.record((s.uuid, GpuReading.of(s, now)) for s in samples if s.uuid)
        return samples

    def record(self, readings: Iterable[tuple[str, GpuReading]]) -> None:
        """Add readings (uuid, reading); older ones than ``history_seconds`` fall out."""
        with self._lock:
            for uuid, reading in readings:
                series = self._history.get(uuid)
                if series is None:
                    series = self._history[uuid] = deque(maxlen=self._capacity)
                series.append(reading)
                horizon = reading.time - self.history_seconds
                while series and series[0].time < horizon:
                    series.popleft()

    def history(self, since: float | None = None) -> dict[str, list[GpuReading]]:
        """A copy of every GPU's readings (those at or after ``since`` when given)."""
        with self._lock:
            if since is None:
                return {uuid: list(series) for uuid, series in self._history.items()}
            return {uuid: [r for r in series if r.time >= since] for uuid, series in self._history.items()}

    def latest(self) -> dict[str, GpuReading]:
        """The newest reading of every GPU."""
        with self._lock:
            return {uuid: series[-1] for uuid, series in self._history.items() if series}
