"""The synthetic learning-curve family of benchmarks/experiments.py, and its trial process.

A configuration (lr, momentum, width) has an asymptote ``a`` and a speed ``k``; its loss after
``t`` steps is ``a + (1.5 - a) * exp(-k t)`` plus Gaussian noise (sd 0.01) seeded by the
configuration and the step, so every run of a configuration reports the same numbers. The
search space is finite (9 x 6 x 8 = 432 points) so the best final value is known exactly.

Run as a script it is a trial: it prints ``step N: loss=X`` every ``--step-time`` seconds,
checkpoints ``{"step": N}`` to ``$MUSTER_CHECKPOINT_DIR`` (or ``--checkpoint-dir``) before each
report, resumes from it, exits 143 on SIGTERM, and appends its start and end to ``--times``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import random
import signal
import sys
import time
from pathlib import Path

LRS = ["0.0001", "0.0003", "0.001", "0.003", "0.01", "0.03", "0.1", "0.3", "1.0"]
MOMENTA = ["0.0", "0.3", "0.6", "0.8", "0.9", "0.99"]
WIDTHS = (1, 8)
NOISE = 0.01


def parameters() -> list[dict]:
    """The space as Experiment parameters (the same for every method)."""
    return [
        {"name": "lr", "parameterType": "discrete", "feasibleSpace": {"list": LRS}},
        {"name": "momentum", "parameterType": "discrete", "feasibleSpace": {"list": MOMENTA}},
        {
            "name": "width",
            "parameterType": "int",
            "feasibleSpace": {"min": str(WIDTHS[0]), "max": str(WIDTHS[1])},
        },
    ]


def loss(lr: float, momentum: float, width: int, step: int, noise: bool = True) -> float:
    """The configuration's loss after ``step`` steps (noise-free with ``noise=False``)."""
    a = 0.2 + 0.05 * (math.log10(lr) + 2) ** 2 + 0.02 * (momentum - 0.85) ** 2 + 0.0015 * (width - 5) ** 2
    # Large learning rates learn a little faster, wide nets a little slower: early values rank
    # the configurations roughly, not exactly (curves cross, as real ones do).
    k = (0.4 + 0.1 * lr**0.3) * (1.0 - 0.01 * (width - 1))
    value = a + (1.5 - a) * math.exp(-k * step)
    if noise:
        seed = hashlib.sha256(f"{lr}:{momentum}:{width}:{step}".encode()).digest()
        value += random.Random(seed).gauss(0.0, NOISE)
    return value


def best(steps: int) -> float:
    """The best noise-free final value over the space."""
    return min(
        loss(float(lr), float(m), w, steps, noise=False)
        for lr, m, w in itertools.product(LRS, MOMENTA, range(WIDTHS[0], WIDTHS[1] + 1))
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--step-time", type=float, default=0.3)
    parser.add_argument("--checkpoint-dir", default=None)
    parser.add_argument("--times", default=None, help="Append {start, end, steps} as a JSON line here.")
    args = parser.parse_args()
    started = time.time()
    done = {"steps": 0, "first": 0}
    reported: list[float] = []  # when each step was printed (the benchmark's latency trace)

    def record() -> None:
        if args.times:
            line = {"start": started, "end": time.time(), "steps": done["steps"], "first": done["first"]}
            line.update(launched=_launched(), reported=reported)
            line["trial"] = os.environ.get("MUSTER_TRIAL_NAME") or args.checkpoint_dir
            with open(args.times, "a") as f:
                f.write(json.dumps(line) + "\n")

    def stop(*_: object) -> None:
        record()
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)
    directory = Path(args.checkpoint_dir or os.environ.get("MUSTER_CHECKPOINT_DIR") or ".")
    state = directory / "state.json"
    step = done["first"] = json.loads(state.read_text())["step"] if state.exists() else 0
    while step < args.steps:
        time.sleep(args.step_time)
        step += 1
        directory.mkdir(parents=True, exist_ok=True)
        tmp = state.with_suffix(".tmp")
        tmp.write_text(json.dumps({"step": step}))
        os.replace(tmp, state)
        done["steps"] += 1
        print(f"step {step}: loss={loss(args.lr, args.momentum, args.width, step):.6f}", flush=True)
        reported.append(time.time())
    record()
    return 0


def _launched() -> float | None:
    """When this process was created (Linux), before the interpreter started."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - since_boot + ticks / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
