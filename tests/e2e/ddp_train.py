"""A tiny DDP training loop (gloo, CPU) that checkpoints on SIGTERM and resumes, for the e2e tests.

It follows the preemption pattern of docs/trainingjob.md: the SIGTERM handler only sets a
flag; at every step boundary the flag is all-reduced so every rank agrees, rank 0 saves a
checkpoint (written aside, then renamed) into ``$MUSTER_CHECKPOINT_DIR`` and all ranks exit;
on start the newest checkpoint is loaded. What happens is appended as JSON lines to
``$MUSTER_CHECKPOINT_DIR/progress.jsonl`` (each rank's environment; rank 0's steps,
checkpoints, resumes) for the tests to read.

Settings (environment): ``TRAIN_STEPS`` (default 20); ``TRAIN_HOLD_AT`` and
``TRAIN_RELEASE_FILE``: every rank waits at that step until the file exists (still obeying
SIGTERM), so a test can preempt the job at a known step.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

ENV_KEYS = (
    "RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "PET_NNODES",
    "PET_NODE_RANK",
    "MUSTER_REPLICA_TYPE",
    "MUSTER_REPLICA_INDEX",
    "MUSTER_RESTART_COUNT",
    "MUSTER_CHECKPOINT_DIR",
    "PYTHONUNBUFFERED",
    "MUSTER_RAY_NODE_ID",
)


def main() -> int:
    steps = int(os.environ.get("TRAIN_STEPS", "20"))
    hold_at = int(os.environ.get("TRAIN_HOLD_AT", "-1"))
    release = os.environ.get("TRAIN_RELEASE_FILE")
    ckdir = Path(os.environ["MUSTER_CHECKPOINT_DIR"])
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))

    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank = dist.get_rank()
    record(ckdir, {"event": "env", "rank": rank, **{k: os.environ.get(k) for k in ENV_KEYS}})
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    checkpoint = ckdir / "checkpoint.pt"
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        if rank == 0:
            record(ckdir, {"event": "resume", "step": step})

    while step < steps:
        holding = step == hold_at and release is not None and not Path(release).exists()
        # One collective per boundary decides for all ranks: stop, hold or train on.
        flags = torch.tensor([int(stopping["now"]), int(holding)])
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        if flags[0].item():
            if rank == 0:
                aside = checkpoint.with_suffix(".tmp")
                torch.save(
                    {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                    aside,
                )
                aside.replace(checkpoint)
                record(ckdir, {"event": "checkpoint", "step": step})
            return leave(143)  # 128 + SIGTERM: "stopped, resume me"
        if flags[1].item():
            time.sleep(0.05)
            continue
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if rank == 0:
            record(ckdir, {"event": "step", "step": step})
    if rank == 0:
        record(ckdir, {"event": "done", "step": step})
    return leave(0)


def leave(code: int) -> int:
    """Exit once every rank got here. ``os._exit`` skips the interpreter's teardown, where
    gloo's threads can still abort the process ("terminate called without an active
    exception") after a clean finish under load."""
    dist.barrier()
    sys.stdout.flush()
    os._exit(code)


def record(ckdir: Path, entry: dict) -> None:
    ckdir.mkdir(parents=True, exist_ok=True)
    with open(ckdir / "progress.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    sys.exit(main())
