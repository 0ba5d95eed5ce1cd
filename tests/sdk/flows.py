"""SDK tasks and workflows the SDK tests compile and run (tasks must live in a file)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from muster.sdk import outputs_dir, task, workflow


@task(cache=True)
def make_rows(n: int, tag: str = "x") -> Path:
    out = outputs_dir() / "rows"
    out.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (out / f"{i}.json").write_text(json.dumps({"i": i, "tag": tag}))
    return out


@task(cache=True, retries=2, backoff={"duration": "1s", "factor": 2}, timeout="5m", resources={"cpu": "100m"})
def count(rows: Path, scale: float) -> dict:
    items = [json.loads(p.read_text()) for p in sorted(rows.iterdir())]
    return {"count": len(items) * scale, "pid": os.getpid() > 0}


@task
def total(a: dict, b: dict) -> float:
    return a["count"] + b["count"]


@workflow(parallelism=2)
def small(n: int = 3, scale: float = 2.0):
    rows = make_rows(n)
    first = count(rows, scale)
    second = count(rows, 1.0)
    return total(first, second)


@task(replicas=3)
def distributed(rows: Path) -> None:
    assert rows.is_dir()
