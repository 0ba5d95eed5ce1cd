"""Where a live search's time goes: ``MUSTER_BENCH_TRACE=DIR`` makes benchmarks/experiment_live.py
save each run (the trial processes' records, and through Muster its Trials, Workloads and
Events) to DIR, and print this breakdown of the GPU-seconds held.

    GPU-s held = work (steps x step time) + in-process (interpreter start, the step a stop cut)
                 + before the first trial ran + between trials on a GPU + after the last one

Between two trials on a GPU, through Muster: the first one's process ended -> its pod's end
was seen (Pod Suspended/Completed event) -> the next trial's Workload was admitted -> its
process was launched -> its interpreter ran the script. Apart: a stopped trial's metric
latency (the rung step printed -> the stop decided) and its stop (decided -> process ended).

    python benchmarks/experiment_trace.py DIR/*.json     # the breakdown of saved runs
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from muster.api.conditions import epoch

Obj = dict[str, Any]


def save(system: str, start: float, wall: float, times: Path, objects: dict[str, list[Obj]]) -> None:
    """Save one run to ``$MUSTER_BENCH_TRACE`` and print its breakdown."""
    records = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
    run = {"system": system, "start": start, "wall": wall, "records": records, "objects": objects}
    out = Path(os.environ["MUSTER_BENCH_TRACE"])
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{system.replace(' ', '-')}-{time.time():.0f}.json").write_text(json.dumps(run))
    report(run)


@dataclass
class _Run:
    """A trial process on a GPU (through Muster: one incarnation of a trial's pod)."""

    trial: str
    launched: float
    start: float
    end: float
    first: int
    reported: list[float]
    gpu: int | None = None
    stopping: list[float] = field(default_factory=list)  # TrialStopping decisions
    final_seen: float | None = None  # its pod's end seen
    admitted: float | None = None  # its Workload admitted (for this run)


def report(run: Obj) -> None:
    system, start, wall = run["system"], run["start"], run["wall"]
    runs = [
        _Run(
            r.get("trial") or "",
            r.get("launched") or r["start"],
            r["start"],
            r["end"],
            r.get("first", 0),
            r.get("reported") or [],
        )
        for r in run["records"]
    ]
    objects = run.get("objects") or {}
    if objects:
        _join_muster(runs, objects)
    else:
        _assign_slots(runs)
    gpus = max(1, len({r.gpu for r in runs}))
    parts: dict[str, list[float]] = {}

    def add(name: str, value: float | None) -> None:
        if value is not None:
            parts.setdefault(name, []).append(value)

    for r in runs:
        add("interpreter start (launched -> script)", r.start - r.launched)
        add("cut short (last report -> process end)", r.end - (r.reported[-1] if r.reported else r.start))
        for decided in r.stopping:
            printed = [t for t in r.reported if t <= decided]
            if printed:
                add("  metric latency (rung printed -> stop decided)", decided - printed[-1])
                add("  stop (decided -> process ended)", r.end - decided)
    by_gpu: dict[int | None, list[_Run]] = {}
    for r in sorted(runs, key=lambda r: r.start):
        by_gpu.setdefault(r.gpu, []).append(r)
    for seq in by_gpu.values():
        add("before the first trial (apply -> launched)", seq[0].launched - start)
        add("after the last trial (process end -> done)", start + wall - seq[-1].end)
        for prev, nxt in itertools.pairwise(seq):
            add("between trials (process end -> next launched)", nxt.launched - prev.end)
            if prev.final_seen is not None and nxt.admitted is not None:
                add("  process end -> its pod's end seen", prev.final_seen - prev.end)
                add("  pod's end seen -> next admitted", nxt.admitted - prev.final_seen)
                add("  admitted -> next launched", nxt.launched - nxt.admitted)
    work = sum(r.reported[-1] - r.start if r.reported else 0.0 for r in runs)
    print(
        f"  {system}: {gpus} GPUs x {wall:.1f} s = {gpus * wall:.1f} GPU-s held; "
        f"{len(runs)} processes, {work:.1f} s in steps"
    )
    for name, values in parts.items():
        print(
            f"    {name:<48} n={len(values):>3} median {statistics.median(values) * 1000:6.0f} ms "
            f"max {max(values) * 1000:6.0f} ms  total {sum(values):6.1f} s"
        )


def _join_muster(runs: list[_Run], objects: dict[str, list[Obj]]) -> None:
    """Each process record joined to its pod's events (GPU, end seen), its Workload's admission
    and its trial's stop decisions."""
    events: dict[tuple[str, str], list[Obj]] = {}
    for e in objects.get("Event") or []:
        obj = e["involvedObject"]
        events.setdefault((obj["kind"], obj["name"]), []).append(e)
    by_trial: dict[str, list[_Run]] = {}
    for r in sorted(runs, key=lambda r: r.start):
        by_trial.setdefault(r.trial, []).append(r)
    for trial, seq in by_trial.items():
        pods: dict[str, Obj] = {}
        for e in events.get(("Pod", f"{trial}-worker-0"), []):
            pod = pods.setdefault(e["involvedObject"].get("uid") or "", {})
            pod[e["reason"]] = e
        incarnations = sorted(
            (p for p in pods.values() if "Started" in p), key=lambda p: p["Started"]["firstTimestamp"]
        )
        admitted = _times(events.get(("Workload", trial), []), "Admitted")
        stops = _times(events.get(("Trial", trial), []), "TrialStopping")
        for r, pod in zip(seq, incarnations, strict=False):
            r.gpu = int(pod["Started"]["message"].rsplit(" ", 1)[-1])
            ends = [
                p for reason, p in pod.items() if reason in ("Suspended", "Completed", "Failed", "Evicted")
            ]
            r.final_seen = epoch(ends[0]["firstTimestamp"]) if ends else None
            r.admitted = max((t for t in admitted if t <= r.launched + 0.01), default=None)
            r.stopping = [t for t in stops if r.start <= t <= r.end + 0.01]


def _times(events: list[Obj], reason: str) -> list[float]:
    """The times of an Event (a repeated one keeps only its first and last time)."""
    out: set[float] = set()
    for e in events:
        if e["reason"] == reason:
            out |= {t for t in (epoch(e["firstTimestamp"]), epoch(e["lastTimestamp"])) if t is not None}
    return sorted(out)


def _assign_slots(runs: list[_Run]) -> None:
    """Without a scheduler's record: a process takes the slot that freed first (n_jobs workers)."""
    free: list[tuple[float, int]] = []
    slots = 0
    for r in sorted(runs, key=lambda r: r.launched):
        ready = [f for f in free if f[0] <= r.launched]
        if ready:
            pick = min(ready)
            free.remove(pick)
            r.gpu = pick[1]
        else:
            r.gpu, slots = slots, slots + 1
        free.append((r.end, r.gpu))


def main(paths: list[str]) -> int:
    for path in paths:
        report(json.loads(Path(path).read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
