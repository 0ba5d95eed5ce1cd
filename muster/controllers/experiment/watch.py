"""Looking at running trials' metrics between reconciles, cheaply enough to do it often.

A trial's reports decide about it only at some of them: an ASHA rung's step, or (median rule)
every report once enough trials completed. Reconciling the whole experiment for every line a
trial prints would cost a pass per line; waiting for the next periodic look (``poll_seconds``)
lets a trial run on past its rung while it holds its GPU. So each reconcile leaves here, for
every running trial whose metrics are a file on this machine (the local runtime's log of its
primary container, or its metrics file), the file and the report count at which a rule decides
next. Between passes :meth:`MetricsWatch.due` stats those files; a file that grew is read into
the trial's record (in memory: its points and its cursor are stored together by the next
reconcile, as ever, so a crash in between reads the lines again), and the experiments with a
trial that reached a decision are reconciled at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.controllers.experiment.collect import TrialRecord, grew, read_file
from muster.controllers.experiment.metrics import LineParser

__all__ = ["MetricsWatch", "Source", "watch_key"]

Key = tuple[str, str]  # (namespace, experiment name), as the manager names what to reconcile


def watch_key(exp: Mapping[str, Any]) -> Key:
    return exp["metadata"].get("namespace") or "", exp["metadata"]["name"]


@dataclass
class Source:
    """A running trial's metrics file and when its reports decide about it."""

    path: Path
    cursor: str  # the record's cursor for this file ("stdout" or "file")
    record: TrialRecord
    parser: LineParser
    objective: str
    due_at: int  # from this count of the objective's reports on, a new report is decided on


@dataclass
class MetricsWatch:
    sources: dict[Key, list[Source]] = field(default_factory=dict)

    def set(self, key: Key, sources: list[Source]) -> None:
        if sources:
            self.sources[key] = sources
        else:
            self.sources.pop(key, None)

    def keep(self, keys: set[Key]) -> None:
        """Forget the experiments not in ``keys`` (deleted ones)."""
        for key in [k for k in self.sources if k not in keys]:
            del self.sources[key]

    def __bool__(self) -> bool:
        return bool(self.sources)

    def due(self, now: float) -> set[Key]:
        """Read what the watched files gained; the experiments where a decision is due."""
        out: set[Key] = set()
        for key, sources in self.sources.items():
            for s in sources:
                if not grew(s.path, s.record.cursors.get(s.cursor)):
                    continue
                lines, s.record.cursors[s.cursor] = read_file(s.path, s.record.cursors.get(s.cursor), False)
                if not lines:
                    continue  # a line still being written
                before = s.record.series.reports.get(s.objective, 0)
                s.record.take(lines, s.parser, now)
                after = s.record.series.reports.get(s.objective, 0)
                if after > before and after >= s.due_at:
                    out.add(key)
        return out
