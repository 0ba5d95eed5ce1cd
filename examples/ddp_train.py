"""A small PyTorch DDP training job that survives preemption (docs/trainingjob.md).

Run it by Muster (examples/trainingjob.yaml), under torchrun, or as plain processes: it reads
the torchrun environment contract (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``) and uses NCCL when CUDA is available, gloo otherwise::

    torchrun --standalone --nproc-per-node 2 examples/ddp_train.py --steps 50

What it shows:

* **Checkpoints** every ``--checkpoint-every`` steps into ``MUSTER_CHECKPOINT_DIR`` (which
  Muster keeps stable across restarts and preemptions), written whole to a temporary file
  and renamed into place, so a reader never sees half of one.
* **Preemption**: SIGTERM only sets a flag. At the next step boundary the ranks all-reduce
  the flag, so they agree to stop at the same step, save one checkpoint together and exit
  143: a rank that left alone would deadlock the others in their next collective.
* **Resume** from the newest complete checkpoint (rank 0 picks it, every rank loads it), and
  the line ``resumed from step N`` says where. Data for each step is drawn from a seed of
  (step, rank), so a resumed run computes exactly what an uninterrupted one does.
* **In sync**: at the end every rank's parameter checksum is compared; a mismatch exits 1.

Lines meant for tools start with a tag: ``MUSTER_DDP_ENV {json}`` (the environment it was
given), ``MUSTER_DDP_DONE {json}`` (final step, loss and checksum).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import distributed_c10d
from torch.nn.parallel import DistributedDataParallel

PREEMPTED_EXIT = 143  # 128 + SIGTERM: retryable for the controller, like a SIGTERM death
_CKPT = re.compile(r"^ckpt-(\d{8})\.pt$")
_ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES")
_stop_requested = False


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    env = {k: os.environ.get(k, "") for k in _ENV_KEYS}
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    _say("MUSTER_DDP_ENV " + json.dumps({**env, "backend": backend}, sort_keys=True))
    signal.signal(signal.SIGTERM, _on_term)

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
    try:
        return _train(args, rank, world, device)
    finally:
        _leave(rank, world)


def _train(args: argparse.Namespace, rank: int, world: int, device: torch.device) -> int:
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(args.features, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    truth = torch.randn(args.features, 1, generator=torch.Generator().manual_seed(args.seed + 1))

    ckpt_dir = Path(args.checkpoint_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    start = _resume(ckpt_dir, model, optimizer, device)
    if rank == 0:
        _say(f"resumed from step {start}" if start else "no checkpoint: starting at step 0")

    loss = torch.tensor(float("nan"))
    for step in range(start, args.steps):
        if _all_agree_to_stop(device):
            _save(ckpt_dir, step, model, optimizer, rank, args.keep)
            if rank == 0:
                _say(f"SIGTERM: saved a checkpoint at step {step}; exiting {PREEMPTED_EXIT}")
            return PREEMPTED_EXIT
        x, y = _batch(step, rank, args, truth)
        loss = nn.functional.mse_loss(ddp(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        done = step + 1
        if rank == 0 and (done % args.log_every == 0 or done == args.steps):
            _say(f"step {done}/{args.steps} loss {loss.item():.6f}")
        if done % args.checkpoint_every == 0 or done == args.steps:
            _save(ckpt_dir, done, model, optimizer, rank, args.keep)
        if args.step_time:
            time.sleep(args.step_time)

    checksum = _checksum(model)
    sums = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(world)]
    dist.all_gather(sums, torch.tensor([checksum], dtype=torch.float64, device=device))
    in_sync = all(float(s.item()) == checksum for s in sums)
    _say(f"rank {rank}: replicas in sync: {in_sync} (checksum {checksum!r})")
    if rank == 0:
        final = {"step": args.steps, "loss": float(loss.item()), "checksum": checksum, "inSync": in_sync}
        _say("MUSTER_DDP_DONE " + json.dumps(final, sort_keys=True))
    return 0 if in_sync else 1


def _leave(rank: int, world: int) -> None:
    """Tear the process group down with rank 0 leaving last. Rank 0 hosts the store the
    others are connected to (outside torchrun); a rank whose store vanishes in the middle of
    its own teardown can abort ("terminate called without an active exception", exit -6)
    after it has finished its work, so the others say goodbye through the store first."""
    store = distributed_c10d._get_default_store()
    dist.destroy_process_group()
    prefix = f"muster-ddp-left/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    try:
        if rank != 0:
            store.set(f"{prefix}/{rank}", "1")
        elif world > 1:
            store.wait([f"{prefix}/{r}" for r in range(1, world)], datetime.timedelta(seconds=10))
    except RuntimeError:  # a rank that died cannot say goodbye (DistError is a RuntimeError)
        pass


def _parse(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--steps", type=int, default=int(env("TRAIN_STEPS", "200")), help="Steps in all.")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=int(env("CHECKPOINT_EVERY", "20")),
        help="Steps per checkpoint.",
    )
    p.add_argument(
        "--checkpoint-dir",
        default=env("MUSTER_CHECKPOINT_DIR") or "checkpoints",
        help="Where checkpoints go (default: $MUSTER_CHECKPOINT_DIR, else ./checkpoints).",
    )
    p.add_argument("--keep", type=int, default=3, help="Checkpoints kept (the newest).")
    p.add_argument(
        "--step-time", type=float, default=float(env("STEP_TIME", "0")), help="Seconds to sleep per step."
    )
    p.add_argument("--log-every", type=int, default=10, help="Steps between loss lines.")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=300.0, help="Seconds a collective may wait for a peer.")
    args = p.parse_args(argv)
    if args.steps < 1 or args.checkpoint_every < 1 or args.keep < 1 or args.log_every < 1:
        p.error("--steps, --checkpoint-every, --keep and --log-every must be >= 1")
    return args


def _say(line: str) -> None:
    # One write per line: the ranks share a stdout (torchrun's, or one log), and print() writes
    # the text and its newline separately when unbuffered, so two ranks' lines could interleave.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _on_term(_signum: int, _frame: object) -> None:
    # Only a flag: the training loop decides, with the other ranks, where to stop.
    global _stop_requested
    _stop_requested = True


def _all_agree_to_stop(device: torch.device) -> bool:
    """True on every rank as soon as any rank was asked to stop."""
    flag = torch.tensor([1 if _stop_requested else 0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _batch(
    step: int, rank: int, args: argparse.Namespace, truth: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's batch of step ``step``: the same numbers on every run."""
    gen = torch.Generator().manual_seed(args.seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(args.batch_size, args.features, generator=gen)
    y = torch.tanh(x @ truth) + 0.01 * torch.randn(args.batch_size, 1, generator=gen)
    return x, y


def _save(
    ckpt_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer, rank: int, keep: int
) -> None:
    """Rank 0 writes the checkpoint of ``step`` atomically; every rank waits until it is on disk."""
    if rank == 0:
        path = ckpt_dir / f"ckpt-{step:08d}.pt"
        tmp = ckpt_dir / f".{path.name}.{os.getpid()}.tmp"
        state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for old in _checkpoints(ckpt_dir)[keep:]:
            old[1].unlink(missing_ok=True)
    dist.barrier()


def _resume(ckpt_dir: Path, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device) -> int:
    """Load the newest complete checkpoint (rank 0 chooses, so every rank loads the same one)."""
    choice = torch.tensor([-1], device=device)
    if dist.get_rank() == 0:
        for step, path in _checkpoints(ckpt_dir):
            try:
                torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:  # unreadable (a disk error): take the one before
                print(f"skipping unreadable checkpoint {path}: {exc}", file=sys.stderr, flush=True)
                continue
            choice[0] = step
            break
    dist.broadcast(choice, src=0)
    step = int(choice.item())
    if step < 0:
        return 0
    state = torch.load(ckpt_dir / f"ckpt-{step:08d}.pt", map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])


def _checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints, newest first (temporary files never match the name)."""
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _CKPT.match(p.name))]
    return sorted(found, reverse=True)


def _checksum(model: nn.Module) -> float:
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


if __name__ == "__main__":
    code = main()
    # Everything is done and on disk (checkpoints fsynced, lines flushed): end here, without the
    # interpreter's teardown, where torch's C++ destructors (the store's and gloo's threads) can
    # still abort after a clean finish ("terminate called without an active exception", exit
    # 134) — which a controller rightly counts as a failed replica and restarts the gang for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
