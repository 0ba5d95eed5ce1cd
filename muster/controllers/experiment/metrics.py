"""Reading metrics out of a trial's output, and its time series in memory.

Lines are parsed as Katib's collectors parse them (reference/experiments.md §1.7): by default
every ``name=value`` pair of a line (``epoch 3: loss=0.31 accuracy=0.9``) with Katib's regular
expression, or the experiment's own ``metricsFormat`` expressions (two groups: name, value); a
``TEXT`` file line may start with an RFC 3339 time; a ``JSON`` file has one object per line
(``{"loss": 0.31, "timestamp": "..."}``). Only the objective and additional metrics are kept.

A metric's n-th value is its step n. :class:`Series` keeps every point up to
:data:`~muster.api.trial.THIN_AFTER` reports, then every 2nd, 4th, ... (each doubling of the
reports halves the density), and counts every report for the summary (min, max, latest).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from muster.api.conditions import epoch
from muster.api.trial import THIN_AFTER

__all__ = ["KATIB_FORMAT", "LineParser", "Point", "Series", "objective_of"]

KATIB_FORMAT = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
_LEADING_TIME = re.compile(r"^\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+")


@dataclass(frozen=True)
class Point:
    step: int
    value: float
    time: float


class LineParser:
    """Parses lines into (metric, value, time or None) for the metrics ``names``."""

    def __init__(self, names: Iterable[str], formats: Sequence[str] = (), json_lines: bool = False) -> None:
        self.names = frozenset(names)
        self.patterns = [re.compile(f) for f in (formats or [KATIB_FORMAT])]
        self.json_lines = json_lines

    def parse(self, line: str) -> list[tuple[str, float, float | None]]:
        if self.json_lines:
            return self._json(line)
        when = None
        m = _LEADING_TIME.match(line)
        if m is not None:
            when = epoch(m.group(1))
            line = line[m.end() :]
        out = []
        for pattern in self.patterns:
            for found in pattern.finditer(line):
                name, text = found.group(1), found.group(2)
                value = _number(text)
                if name in self.names and value is not None:
                    out.append((name, value, when))
        return out

    def _json(self, line: str) -> list[tuple[str, float, float | None]]:
        try:
            record = json.loads(line)
        except ValueError:
            return []
        if not isinstance(record, dict):
            return []
        when = record.get("timestamp")
        stamp = (
            epoch(when) if isinstance(when, str) else (float(when) if isinstance(when, int | float) else None)
        )
        out = []
        for name in sorted(self.names & record.keys()):
            value = _number(record[name])
            if value is not None:
                out.append((name, value, stamp))
        return out


@dataclass
class Series:
    """One trial's points per metric (thinned past THIN_AFTER reports) and report counts."""

    points: dict[str, list[Point]] = field(default_factory=dict)
    reports: dict[str, int] = field(default_factory=dict)
    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)
    latest: dict[str, float] = field(default_factory=dict)

    def add(self, name: str, value: float, time: float) -> Point:
        """Count a report; returns its point (kept in the series unless thinned out)."""
        step = self.reports.get(name, 0) + 1
        self.reports[name] = step
        self.low[name] = min(self.low.get(name, value), value)
        self.high[name] = max(self.high.get(name, value), value)
        self.latest[name] = value
        point = Point(step, value, time)
        if step % _stride(step) == 0:
            self.points.setdefault(name, []).append(point)
        return point

    def load(self, name: str, steps: Sequence[int], values: Sequence[float], times: Sequence[float]) -> None:
        """Take stored points back (their summary is rebuilt from the kept points)."""
        kept = self.points.setdefault(name, [])
        for s, v, t in zip(steps, values, times, strict=False):
            kept.append(Point(int(s), float(v), float(t)))
            self.low[name] = min(self.low.get(name, v), v)
            self.high[name] = max(self.high.get(name, v), v)
            self.latest[name] = float(v)

    def curve(self, name: str) -> dict[int, float]:
        """step -> value of the kept points of ``name``."""
        return {p.step: p.value for p in self.points.get(name, [])}

    def summary(self) -> list[dict[str, Any]]:
        """Katib's observation: per metric min, max, latest (and how many reports)."""
        return [
            {
                "name": name,
                "min": self.low[name],
                "max": self.high[name],
                "latest": self.latest[name],
                "reports": self.reports.get(name, 0),
            }
            for name in sorted(self.latest)
        ]


def objective_of(summary: Mapping[str, float | None], strategy: str) -> float | None:
    """The trial's objective value by strategy (``min``, ``max``, ``latest``) from its summary."""
    return summary.get(strategy)


def _stride(step: int) -> int:
    if step <= THIN_AFTER:
        return 1
    return 1 << max(0, math.ceil(math.log2(step / THIN_AFTER)))


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
