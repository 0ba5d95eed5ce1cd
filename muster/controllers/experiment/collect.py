"""Collecting a trial's metrics: reading what its output and metrics file gained, and keeping
its time series in TrialMetrics segments.

No sidecar (Katib's collector is its users' most common trouble, reference/experiments.md §4):
the manager owns the processes and their output. On a runtime that keeps logs as files on
this machine (the local runtime) each source is read from a byte offset, following the file
to ``<container>.log.1`` when the next incarnation of the pod rotated it; elsewhere the
runtime's ``logs()`` stream is read and the lines already counted are skipped.

How far each source was read (its *cursor*) is stored in the same write as the points read up
to there, so a restarted server reads on from the cursor: no point is lost or counted twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.api.base import API_VERSION
from muster.api.labels import EXPERIMENT_LABEL, TRIAL_LABEL
from muster.api.trial import SEGMENT_POINTS
from muster.controllers.experiment.metrics import LineParser, Point, Series
from muster.runtime.base import PodNotFound, PodRef, SupportsLogs
from muster.runtime.local.logs import container_log
from muster.store.base import AlreadyExists, Conflict, NotFound, Store, Writer
from muster.store.selector import parse_selector

__all__ = ["Collected", "TrialRecord", "grew", "metrics_dir", "read_file", "read_stream"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Cursor = dict[str, int]


def metrics_dir(home: Path, namespace: str, experiment: str, trial: str) -> Path:
    """Where a trial's metrics file lives (``$MUSTER_METRICS_FILE`` is ``metrics.log`` in it)."""
    return home / "experiments" / namespace / experiment / trial


def read_file(path: Path, cursor: Cursor | None, final: bool) -> tuple[list[str], Cursor]:
    """The complete lines ``path`` gained since ``cursor`` (and, when ``final``, a last line
    without a newline), and the new cursor. A file replaced since (a new incarnation's log)
    is read from its start, after the rest of the old one, now ``<name>.1``."""
    cursor = dict(cursor or {})
    inode, offset = cursor.get("inode"), int(cursor.get("offset") or 0)
    rotated = path.with_name(path.name + ".1")
    lines: list[str] = []
    try:
        stat = path.stat()
    except FileNotFoundError:
        if inode is not None and _inode(rotated) == inode:
            lines, offset = _read(rotated, offset, True)
        return lines, {**cursor, "offset": offset} if inode is not None else cursor
    if inode is not None and stat.st_ino != inode:
        if _inode(rotated) == inode:
            lines, _ = _read(rotated, offset, True)
        offset = 0
    elif stat.st_size < offset:  # truncated: start over
        offset = 0
    more, offset = _read(path, offset, final)
    return lines + more, {"inode": stat.st_ino, "offset": offset}


def grew(path: Path, cursor: Cursor | None) -> bool:
    """Whether ``path`` holds bytes past ``cursor``, or is another file now (one stat)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    cursor = cursor or {}
    return stat.st_ino != cursor.get("inode") or stat.st_size > int(cursor.get("offset") or 0)


def read_stream(
    source: SupportsLogs, ref: PodRef, container: str, cursor: Cursor | None
) -> tuple[list[str], Cursor]:
    """The lines of a runtime's log stream past the ``cursor["lines"]`` already read (the
    count restarts with a new incarnation of the pod, ``cursor["uid"]`` its uid's hash)."""
    cursor = dict(cursor or {})
    uid = hash(ref.uid) & 0x7FFFFFFF
    skip = int(cursor.get("lines") or 0) if cursor.get("uid") == uid else 0
    try:
        stream = list(source.logs(ref, container))
    except PodNotFound:
        return [], cursor
    return stream[skip:], {"uid": uid, "lines": len(stream)}


@dataclass
class Collected:
    """What one collection found: the points per metric (in report order)."""

    points: dict[str, list[Point]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.points.values())


@dataclass
class TrialRecord:
    """A trial's series in memory and its stored segments (loaded once, then appended to)."""

    namespace: str
    trial: str
    experiment: str
    series: Series = field(default_factory=Series)
    cursors: dict[str, Cursor] = field(default_factory=dict)
    segment: int = 0
    segment_doc: Obj | None = None  # the open segment as stored (its resourceVersion)
    unsaved: dict[str, list[Point]] = field(default_factory=dict)
    saved_at: float = 0.0
    loaded: bool = False
    news: bool = False  # points taken that the trial's status does not show yet

    def load(self, store: Store) -> None:
        """Read the stored segments back (once)."""
        if self.loaded:
            return
        selector = parse_selector(f"{TRIAL_LABEL}={self.trial}")
        segments = sorted(
            store.list("TrialMetrics", self.namespace, selector).items, key=lambda s: s["spec"]["segment"]
        )
        for seg in segments:
            for name, points in (seg["spec"].get("series") or {}).items():
                self.series.load(
                    name, points.get("steps") or [], points.get("values") or [], points.get("times") or []
                )
        if segments:
            last = segments[-1]
            self.segment, self.segment_doc = last["spec"]["segment"], last
            self.cursors = {k: dict(v) for k, v in (last["spec"].get("cursors") or {}).items()}
            self.series.reports.update(last["spec"].get("reports") or {})
        self.loaded = True

    def take(self, lines: list[str], parser: LineParser, now: float) -> Collected:
        """Count the metrics in ``lines``; the points kept wait for :meth:`save`."""
        found = Collected()
        for line in lines:
            for name, value, when in parser.parse(line):
                point = self.series.add(name, value, when if when is not None else now)
                found.points.setdefault(name, []).append(point)
                kept = self.series.points.get(name) or []
                if kept and kept[-1] is point:
                    self.unsaved.setdefault(name, []).append(point)
        self.news = self.news or bool(found)
        return found

    def save(self, store: Writer, owner: Obj, now: float) -> None:
        """Append the unsaved points (and the cursors) to the open segment, opening the next one
        when it is full. One write per segment touched."""
        pending = [(name, p) for name, points in self.unsaved.items() for p in points]
        while True:
            doc = self._open_segment(owner)
            room = SEGMENT_POINTS - sum(len(s["steps"]) for s in doc["spec"]["series"].values())
            batch, pending = pending[:room], pending[room:]
            for name, p in batch:
                series = doc["spec"]["series"].setdefault(name, {"steps": [], "values": [], "times": []})
                series["steps"].append(p.step)
                series["values"].append(p.value)
                series["times"].append(round(p.time, 3))
            doc["spec"]["cursors"] = {k: dict(v) for k, v in self.cursors.items()}
            doc["spec"]["reports"] = dict(self.series.reports)
            self.segment_doc = self._write(store, doc)
            if not pending:
                break
            self.segment += 1
            self.segment_doc = None
        self.unsaved = {}
        self.saved_at = now

    def _open_segment(self, owner: Obj) -> Obj:
        if self.segment_doc is not None:
            doc = {**self.segment_doc, "spec": dict(self.segment_doc["spec"])}
            doc["spec"]["series"] = {
                k: {kk: list(vv) for kk, vv in v.items()}
                for k, v in (doc["spec"].get("series") or {}).items()
            }
            return doc
        return {
            "apiVersion": API_VERSION,
            "kind": "TrialMetrics",
            "metadata": {
                "name": f"{self.trial}-{self.segment}",
                "namespace": self.namespace,
                "labels": {EXPERIMENT_LABEL: self.experiment, TRIAL_LABEL: self.trial},
                "ownerReferences": [owner],
            },
            "spec": {
                "trial": self.trial,
                "segment": self.segment,
                "series": {},
                "cursors": {},
                "reports": {},
            },
        }

    def _write(self, store: Writer, doc: Obj) -> Obj:
        if doc["metadata"].get("resourceVersion"):
            try:
                return store.update(doc)
            except (Conflict, NotFound):
                doc["metadata"].pop("resourceVersion", None)  # someone else wrote it: ours is the truth
                return _write_anyway(store, doc)
        return _write_anyway(store, doc)


def _write_anyway(store: Writer, doc: Obj) -> Obj:
    try:
        return store.create(doc)
    except AlreadyExists:
        return store.update(doc)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _read(path: Path, offset: int, final: bool) -> tuple[list[str], int]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = len(data) if final else data.rfind(b"\n") + 1
    text = data[:end].decode("utf-8", errors="replace")
    return text.splitlines(), offset + end


def log_path(home: Path) -> Callable[[str, str, str], Path]:
    """(namespace, pod, container) -> the local runtime's log file of that container."""
    return lambda ns, pod, container: container_log(home, ns, pod, container)
