"""A stand-in trainer for elastic and preemption tests and benchmarks: the checkpoint handshake
of docs/trainingjob.md without torch, so it starts in a blink.

Every rank counts steps; on SIGTERM rank 0 saves the step (written aside, then renamed) into
``$MUSTER_CHECKPOINT_DIR/step.json`` and every rank exits 143; on start it resumes from the
saved step. Rank 0 appends JSON lines to ``TRAIN_LOG`` (outside the checkpoint directory, so
the newest file there is the checkpoint): ``start`` (world size, nodes, step), ``checkpoint``,
``done`` (the other ranks end after rank 0 did).

Settings (environment): ``TRAIN_STEPS`` (default 10); ``TRAIN_HOLD_AT`` with
``TRAIN_RELEASE_FILE``: from that step on every rank waits until the file exists (still obeying
SIGTERM). Run as ``python -m muster.testing.checkpoint_trainer``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    ckdir, rank = Path(os.environ["MUSTER_CHECKPOINT_DIR"]), int(os.environ.get("RANK", "0"))
    log = Path(os.environ["TRAIN_LOG"]) if os.environ.get("TRAIN_LOG") else None
    release = os.environ.get("TRAIN_RELEASE_FILE")
    steps, hold = int(os.environ.get("TRAIN_STEPS", "10")), int(os.environ.get("TRAIN_HOLD_AT", "-1"))
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # only a flag: act at a step boundary
    saved = ckdir / "step.json"
    step = json.loads(saved.read_text())["step"] if saved.exists() else 0

    def note(**entry: object) -> None:
        if rank == 0 and log is not None:
            with open(log, "a") as f:
                f.write(json.dumps({**entry, "time": time.time()}) + "\n")

    note(event="start", world=os.environ.get("WORLD_SIZE"), nnodes=os.environ.get("PET_NNODES"), step=step)
    while step < steps:
        if stop:
            if rank == 0:
                aside = ckdir / "step.tmp"
                aside.write_text(json.dumps({"step": step}))
                aside.replace(saved)
                note(event="checkpoint", step=step)
            return 143  # 128 + SIGTERM: "stopped, resume me"
        if 0 <= hold <= step and release is not None and not Path(release).exists():
            time.sleep(0.02)
            continue
        step += 1
    # Without collectives a fast rank could finish before rank 0 even started (and the job
    # succeeds with its first Worker): the others finish only after rank 0.
    done = ckdir / ".done"
    if rank == 0:
        note(event="done", step=step)
        done.touch()
        return 0
    while not done.exists():
        if stop:
            return 143
        time.sleep(0.02)
    return 0


if __name__ == "__main__":
    sys.exit(main())
