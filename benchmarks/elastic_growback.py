"""Elastic grow-back: from capacity returning to an elastic TrainingJob running at the larger size.

``muster up --fake-gpus 4``; per trial a blocker job holds 2 GPUs, and an elastic job
(``minReplicas 1, maxReplicas 4``, ``growCooldownSeconds 0``, the plain-Python checkpointing
trainer :mod:`muster.testing.checkpoint_trainer`) is admitted with the 2 GPUs left and runs.
Then the blocker is told to end (its release file) and the clock starts; it stops when the job
is ``Running`` again with 4 workers (all pods running at the new world size). Measured:

* **grow-back**: the blocker's pod finished (the capacity returned, the server's time) to the
  job Running at 4 workers (its Running condition);
* its parts from the objects' timestamps: to the resize (the Workload's ``lastResizeTime``),
  to the new gang's pods created (the job's ``resizes[].started``: the old gang had stopped
  with the checkpoint handshake), to all of them running.

Prints the median and each trial. The old gang's SIGTERM-to-exit time is the trainer's (it
checkpoints at the next step boundary, milliseconds here); a real trainer adds its own.

    .venv/bin/python benchmarks/elastic_growback.py [--trials 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from muster.api.lifecycle import JobPhase, job_phase
from muster.sdk.client import Client
from muster.testing import wait_for
from muster.testing.up import MusterUp

Obj = dict[str, Any]
TRAINER = [sys.executable, "-m", "muster.testing.checkpoint_trainer"]


def job(name: str, command: list[str], workers: int, gpus: int, env: dict[str, str], **spec: Any) -> Obj:
    container = {
        "name": "main",
        "command": command,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
    }
    template = {"spec": {"containers": [container], "terminationGracePeriodSeconds": 10}}
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": {"Worker": {"replicas": workers, "template": template}}, **spec},
    }


def condition_time(obj: Obj, type_: str) -> float | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_ and c["status"] == "True":
            return _ts(c["lastTransitionTime"])
    return None


def trial(client: Client, work: Path, k: int) -> dict[str, float]:
    release = work / f"blocker-{k}"
    blocker = job(
        f"blocker-{k}",
        [
            sys.executable,
            "-c",
            f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.02)",
        ],
        workers=1,
        gpus=2,
        env={},
    )
    name = f"train-{k}"
    elastic = job(
        name,
        TRAINER,
        workers=4,
        gpus=1,
        env={"TRAIN_STEPS": "1000000", "TRAIN_HOLD_AT": "1", "TRAIN_RELEASE_FILE": str(work / "never")},
        elasticPolicy={"minReplicas": 1, "maxReplicas": 4, "growCooldownSeconds": 0},
    )
    client.apply([blocker])
    wait_for(lambda: _running(client, f"blocker-{k}"), timeout=60, what="the blocker to run")
    client.apply([elastic])
    wait_for(lambda: _running(client, name), timeout=60, what="the elastic job to run small")
    assert _workers(client, name) == 2
    release.touch()
    wait_for(
        lambda: _workers(client, name) == 4 and _running(client, name) and _resized_run(client, name),
        timeout=120,
        interval=0.02,
        what="the job to run at 4 workers",
    )
    tj = client.get("TrainingJob", name, "default")
    wl = client.get("Workload", name, "default")
    pod = client.get("Pod", f"blocker-{k}-worker-0", "default")
    freed = _ts(pod["status"]["finishTime"])
    resized = _ts(wl["status"]["elastic"]["lastResizeTime"])
    started = _ts(tj["status"]["resizes"][-1]["started"])
    running = condition_time(tj, "Running") or 0.0
    for kind in ("TrainingJob",):
        for n in (name, f"blocker-{k}"):
            client.delete(kind, n, "default")
    wait_for(lambda: not _live_pods(client), timeout=120, what="the trial's pods to stop")
    return {
        "grow-back": running - freed,
        "capacity returned to resized": resized - freed,
        "resized to new gang created": started - resized,
        "new gang created to running": running - started,
    }


def _running(client: Client, name: str) -> bool:
    return job_phase(client.get("TrainingJob", name, "default")) is JobPhase.RUNNING


def _resized_run(client: Client, name: str) -> bool:
    resizes = client.get("TrainingJob", name, "default")["status"].get("resizes") or []
    return bool(resizes and resizes[-1].get("started"))


def _workers(client: Client, name: str) -> int:
    wl = client.get("Workload", name, "default")
    admission = (wl.get("status") or {}).get("admission") or {}
    return sum(a["count"] for a in admission.get("podSetAssignments") or [])


def _live_pods(client: Client) -> list[Obj]:
    return [
        p
        for p in client.list("Pod")["items"]
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="muster-elastic-") as tmp:
        work = Path(tmp)
        with MusterUp(work / "home", extra_args=["--fake-gpus", "4"]) as up:
            client = Client(up.url, up.token)
            results = []
            for k in range(args.trials):
                started = time.perf_counter()
                results.append(trial(client, work, k))
                print(
                    f"trial {k + 1}: grow-back {results[-1]['grow-back']:.3f} s "
                    f"(trial took {time.perf_counter() - started:.1f} s)",
                    flush=True,
                )
            client.close()
    print("\nelastic grow-back, muster up --fake-gpus 4, 2 -> 4 workers (median of trials):")
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"  {key:32s} {statistics.median(values):7.3f} s   ({', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
