"""The three steps of the example pipeline: prepare a dataset, train a model with PyTorch DDP
(gloo on CPU, NCCL on GPUs), evaluate it.

examples/pipeline.yaml runs this file as a script (one subcommand per task); examples/pipeline.py
calls the same functions from SDK tasks, so both pipelines compute the same numbers::

    python examples/pipeline_steps.py prepare --rows 512 --out /tmp/data
    torchrun --standalone --nproc-per-node 2 examples/pipeline_steps.py train \\
        --data /tmp/data --out /tmp/model --epochs 40 --lr 0.05
    python examples/pipeline_steps.py evaluate --data /tmp/data --model /tmp/model/model.pt --out /tmp/eval

Everything is seeded: data from a NumPy generator, weights from ``torch.manual_seed``, and a
rank's shard is fixed, so every run of the same inputs gives the same loss.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

FEATURES = 8
TEST_SHARE = 0.2


def prepare(rows: int, out: Path, seed: int = 0) -> Path:
    """A noisy linear regression problem, split into train and test, as .npy files in ``out``."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=FEATURES)
    x = rng.normal(size=(rows, FEATURES)).astype(np.float32)
    y = (x @ weights + 0.1 * rng.normal(size=rows)).astype(np.float32)
    split = int(rows * (1 - TEST_SHARE))
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "train_x.npy", x[:split])
    np.save(out / "train_y.npy", y[:split])
    np.save(out / "test_x.npy", x[split:])
    np.save(out / "test_y.npy", y[split:])
    (out / "meta.json").write_text(json.dumps({"rows": rows, "features": FEATURES, "seed": seed}) + "\n")
    return out


def train(data: Path, out: Path, epochs: int, lr: float) -> float:
    """Train a linear model with DDP over the ranks of the torchrun environment (one process
    when there is none); rank 0 saves ``model.pt`` in ``out``. Returns the final training loss,
    averaged over the ranks."""
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    try:
        x = torch.from_numpy(np.load(data / "train_x.npy"))[rank::world]
        y = torch.from_numpy(np.load(data / "train_y.npy"))[rank::world].unsqueeze(1)
        torch.manual_seed(0)
        model = nn.Linear(FEATURES, 1)
        ddp = nn.parallel.DistributedDataParallel(model) if world > 1 else model
        optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
        loss = torch.tensor(0.0)
        for _ in range(epochs):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(ddp(x), y)
            loss.backward()  # DDP averages the gradients of the ranks
            optimizer.step()
        final = loss.detach().clone()
        if world > 1:
            dist.all_reduce(final)
            final /= world
        if rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            torch.save(model.state_dict(), out / "model.pt")
        return round(float(final), 6)
    finally:
        if world > 1:
            dist.destroy_process_group()


def evaluate(data: Path, model: Path) -> float:
    """Mean squared error of the model on the test split, rounded to 6 decimals."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    net = nn.Linear(FEATURES, 1)
    net.load_state_dict(torch.load(model, weights_only=True))
    x = torch.from_numpy(np.load(data / "test_x.npy"))
    y = torch.from_numpy(np.load(data / "test_y.npy")).unsqueeze(1)
    with torch.no_grad():
        return round(float(nn.functional.mse_loss(net(x), y)), 6)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The steps of the example pipeline.")
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prepare", help="write the dataset")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    t = steps.add_parser("train", help="train with DDP; rank 0 writes model.pt and loss.txt")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--epochs", type=int, required=True)
    t.add_argument("--lr", type=float, required=True)
    e = steps.add_parser("evaluate", help="write the test loss to loss.txt")
    e.add_argument("--data", type=Path, required=True)
    e.add_argument("--model", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(args.rows, args.out)
    elif args.step == "train":
        loss = train(args.data, args.out, args.epochs, args.lr)
        if int(os.environ.get("RANK", "0")) == 0:
            (args.out / "loss.txt").write_text(f"{loss}\n")
        print(f"training loss {loss}", flush=True)
    else:
        loss = evaluate(args.data, args.model)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "loss.txt").write_text(f"{loss}\n")
        print(f"test loss {loss}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
