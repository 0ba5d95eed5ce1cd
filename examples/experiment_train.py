"""A small, real PyTorch training run for hyperparameter experiments (CPU, seconds per trial).

A two-layer MLP learns a fixed random "teacher" network's function of 8 inputs from 1,000
noisy samples and is scored on 250 held-out ones. Each epoch it

1. trains one pass of mini-batch SGD or Adam,
2. saves a checkpoint to ``$MUSTER_CHECKPOINT_DIR`` (written to a temporary file, then renamed),
3. prints ``epoch=N val_loss=X train_loss=Y``: Katib's ``name=value`` format, which Muster's
   StdOut collector reads (``epoch`` is not a metric of the experiment and is ignored).

Checkpointing *before* reporting is the protocol that makes early stopping safe: every value
an experiment saw is covered by a checkpoint, so a trial stopped (SIGTERM) and later promoted
resumes after its last report and never reports an epoch twice. On SIGTERM it exits at once
with 143; it starts again from the newest checkpoint, if there is one.

    python examples/experiment_train.py --lr 0.05 --hidden 32 --optimizer adam --epochs 9
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import torch
from torch import nn

INPUTS, TRAIN, VAL = 8, 1000, 250


def data(seed: int) -> tuple[torch.Tensor, ...]:
    """The same data for every trial: a fixed teacher network's outputs plus noise."""
    g = torch.Generator().manual_seed(seed)
    teacher = nn.Sequential(nn.Linear(INPUTS, 16), nn.Tanh(), nn.Linear(16, 1))
    with torch.no_grad():
        for p in teacher.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
        x = torch.randn(TRAIN + VAL, INPUTS, generator=g)
        y = teacher(x) + 0.1 * torch.randn(TRAIN + VAL, 1, generator=g)
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument(
        "--epoch-time", type=float, default=0.0, help="Sleep this long per epoch (a slower GPU)."
    )
    parser.add_argument("--seed", type=int, default=0, help="The data's seed (the same for every trial).")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    torch.set_num_threads(1)

    x, y, vx, vy = data(args.seed)
    torch.manual_seed(1)  # the same initial weights for the same width
    model = nn.Sequential(nn.Linear(INPUTS, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
    if args.optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.MSELoss()
    directory = Path(os.environ.get("MUSTER_CHECKPOINT_DIR") or ".")
    checkpoint = directory / "checkpoint.pt"
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start = state["epoch"]
        print(f"resumed from {checkpoint} after epoch {start}", flush=True)

    for epoch in range(start + 1, args.epochs + 1):
        model.train()
        order = torch.randperm(TRAIN)
        total = 0.0
        for i in range(0, TRAIN, args.batch_size):
            idx = order[i : i + args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            if not torch.isfinite(loss):
                print(f"epoch={epoch} diverged: loss is {loss.item()}", flush=True)
                return 1
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # large learning rates stay finite
            opt.step()
            total += loss.item() * len(idx)
        model.eval()
        with torch.no_grad():
            val = loss_fn(model(vx), vy).item()
        if args.epoch_time:
            time.sleep(args.epoch_time)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = checkpoint.with_suffix(".pt.tmp")
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "rng": torch.get_rng_state(),
                "epoch": epoch,
            },
            tmp,
        )
        os.replace(tmp, checkpoint)
        print(f"epoch={epoch} val_loss={val:.6f} train_loss={total / TRAIN:.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
