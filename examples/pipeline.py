"""The pipeline of examples/pipeline.yaml written with the Python SDK: prepare a dataset ->
train with PyTorch DDP on two replicas -> evaluate. It calls the same step functions
(examples/pipeline_steps.py), so it computes the same numbers.

    python examples/pipeline.py --fake-gpus 2     # no server? it starts an embedded one
    muster up --fake-gpus 2 & python examples/pipeline.py   # or uses the running one

Each @task runs in its own pod (``python -m muster.sdk.run``); the dataset and the model pass
between them as artifacts (``Path`` arguments and return values), the loss as JSON. Run it
twice: the second run is entirely cached. Edit a task's body and that task (and what depends
on it) runs again: the task's source is part of its cache key.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pipeline_steps as steps

from muster.sdk import outputs_dir, task, workflow


@task(cache=True, resources={"cpu": "500m", "memory": "1Gi"})
def prepare(rows: int) -> Path:
    return steps.prepare(rows, outputs_dir() / "dataset")


@task(cache=True, replicas=2, retries=1, backoff="5s", timeout="30m",
      resources={"nvidia.com/gpu": 1, "cpu": "500m", "memory": "2Gi"})  # fmt: skip
def train(data: Path, epochs: int, lr: float) -> Path:
    steps.train(data, outputs_dir(), epochs, lr)  # every rank trains; rank 0 saves the model
    return outputs_dir() / "model.pt"


@task(cache=True, resources={"cpu": "500m", "memory": "1Gi"})
def evaluate(data: Path, model: Path) -> float:
    return steps.evaluate(data, model)


@workflow
def pipeline(rows: int = 512, epochs: int = 40, lr: float = 0.05):
    data = prepare(rows)
    model = train(data, epochs, lr)
    return evaluate(data, model)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the example pipeline.")
    parser.add_argument("--fake-gpus", help="GPUs for an embedded control plane, e.g. 2")
    parser.add_argument("--name", help="Workflow name (default: pipeline-<random>)")
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    result = pipeline.run(
        name=args.name, fake_gpus=args.fake_gpus, rows=args.rows, epochs=args.epochs, lr=args.lr
    )
    print(f"test loss {result.value}")


if __name__ == "__main__":
    main()
