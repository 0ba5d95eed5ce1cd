"""A torch-free stand-in for examples/ddp_train.py, for `muster demo` where torch is absent.

It keeps the checkpoint protocol the real trainer has (docs/trainingjob.md), so the control plane's
side of a preemption is shown exactly: rank 0 writes ``ckpt-NNNNNNNN.json`` into
``MUSTER_CHECKPOINT_DIR`` every ``--checkpoint-every`` steps (whole, by rename); SIGTERM
makes every rank stop at the next step boundary, rank 0 saves, all exit 143; a new run
resumes from the newest checkpoint and says ``resumed from step N``. The "training" is a
sleep per step: there is no model and no collective between the ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

PREEMPTED_EXIT = 143
_CKPT = re.compile(r"^ckpt-(\d{8})\.json$")
_stop = False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--checkpoint-every", type=int, default=10)
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--log-every", type=int, default=5)
    args = p.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    ckpt_dir = Path(os.environ.get("MUSTER_CHECKPOINT_DIR", "checkpoints"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_term)
    start = _newest(ckpt_dir)
    print(f"resumed from step {start}" if start else "no checkpoint: starting at step 0", flush=True)
    for step in range(start, args.steps):
        if _stop:
            if rank == 0:
                _save(ckpt_dir, step)
            print(f"SIGTERM: saved a checkpoint at step {step}; exiting {PREEMPTED_EXIT}", flush=True)
            return PREEMPTED_EXIT
        time.sleep(args.step_time)
        done = step + 1
        if rank == 0 and done % args.checkpoint_every == 0:
            _save(ckpt_dir, done)
        if done % args.log_every == 0 or done == args.steps:
            print(f"step {done}/{args.steps}", flush=True)
    print(f"rank {rank}: done", flush=True)
    return 0


def _on_term(_signum: int, _frame: object) -> None:
    global _stop
    _stop = True


def _save(ckpt_dir: Path, step: int) -> None:
    tmp = ckpt_dir / f".ckpt-{step:08d}.tmp"
    tmp.write_text(json.dumps({"step": step}))
    tmp.rename(ckpt_dir / f"ckpt-{step:08d}.json")


def _newest(ckpt_dir: Path) -> int:
    steps = [int(m.group(1)) for p in ckpt_dir.iterdir() if (m := _CKPT.match(p.name))]
    return max(steps, default=0)


if __name__ == "__main__":
    sys.exit(main())
