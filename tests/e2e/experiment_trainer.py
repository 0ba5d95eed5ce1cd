"""A torch-free trial for the experiment tests: ``loss = quality + 1/step`` per step, where the
quality is ``--quality`` or, with ``--by-index``, 0.1 x (the trial's index + 1) from
MUSTER_TRIAL_NAME (so trial 0 is the best). It checkpoints each step to
``$MUSTER_CHECKPOINT_DIR/state.json`` before printing ``loss=...``, resumes from it (saying
``resumed at step N``) and exits 143 on SIGTERM, as a real trainer does."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--step-time", type=float, default=0.2)
    parser.add_argument("--quality", type=float, default=0.5)
    parser.add_argument("--by-index", action="store_true")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    quality = args.quality
    if args.by_index:
        quality = 0.1 * (int(os.environ["MUSTER_TRIAL_NAME"].rsplit("-", 1)[1]) + 1)
    state = Path(os.environ["MUSTER_CHECKPOINT_DIR"]) / "state.json"
    step = 0
    if state.exists():
        step = json.loads(state.read_text())["step"]
        print(f"resumed at step {step}", flush=True)
    while step < args.steps:
        time.sleep(args.step_time)
        step += 1
        state.parent.mkdir(parents=True, exist_ok=True)
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps({"step": step}))
        os.replace(tmp, state)
        print(f"step {step}: loss={quality + 1 / step:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
