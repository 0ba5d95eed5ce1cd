"""A KubeRay RayJob from ``muster apply`` to its entrypoint running, on the local runtime, against
the same Ray cluster started by hand.

Interleaved trials (the machine is shared, so each pair runs under the same load):

* **by hand** (Ray alone, no Muster): ``ray start --head`` and one ``ray start --address``
  worker are launched, the driver waits for both nodes (as the submitter does) and runs the
  entrypoint; measured from the first ``ray start`` to the entrypoint's first line and to its
  ``ray.init()`` returning;
* **RayJob** (``muster up --fake-gpus 1``): a RayJob with a head and one worker is applied
  (the RayCluster, its Workload, admission, the pods, the ``ray start`` processes, the
  submitter waiting for both nodes, the entrypoint); measured from the apply to the same two
  points, read from the entrypoint's own output (it prints ``time.time()``).

Also printed per RayJob: when the cluster became ``ready`` (its pods running) after the apply.

    .venv/bin/python benchmarks/rayjob_start.py [--trials 3]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from muster.api.conditions import epoch
from muster.controllers.ray.pods import submitter_command
from muster.sdk.client import Client
from muster.testing import free_port, wait_for
from muster.testing.up import MusterUp

RAY = str(Path(sys.executable).parent / "ray")
ENTRYPOINT = (
    "python -c \"import time; print('ENTRY', time.time(), flush=True); import ray; ray.init(); "
    "print('CONNECTED', time.time(), flush=True)\""
)


def rayjob(name: str) -> dict:
    def group(container: str) -> dict:
        return {
            "rayStartParams": {"num-cpus": "1"},
            "template": {"spec": {"containers": [{"name": container, "image": "rayproject/ray:2.9.0"}]}},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": ENTRYPOINT,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": group("ray-head"),
                "workerGroupSpecs": [{"groupName": "small", "replicas": 1, **group("ray-worker")}],
            },
        },
    }


def marks(text: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(ENTRY|CONNECTED) ([0-9.]+)$", text, re.M)}


def by_hand() -> tuple[float, float]:
    """Seconds from the first ``ray start`` to the entrypoint's start and its ray.init."""
    gcs, dash = free_port(), free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(16),
        "RAY_ADDRESS": f"127.0.0.1:{gcs}",
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "MUSTER_RAY_NODES": "2",
        "PATH": f"{Path(RAY).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    common = ["--num-cpus=1", "--disable-usage-stats", "--block"]
    head = [RAY, "start", "--head", f"--port={gcs}", f"--dashboard-port={dash}", "--dashboard-host=127.0.0.1"]
    temp = f"--temp-dir=/tmp/muster-bench-ray-{secrets.token_hex(4)}"
    start = time.time()
    procs = [
        subprocess.Popen(
            [*head, temp, *common],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ),
        subprocess.Popen(
            [RAY, "start", f"--address=127.0.0.1:{gcs}", *common],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ),
    ]
    try:
        driver = subprocess.run(
            submitter_command(str(Path(RAY).parent / "python"), ENTRYPOINT),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        got = marks(driver.stdout)
        if set(got) != {"ENTRY", "CONNECTED"}:
            raise RuntimeError(f"the driver did not run:\n{driver.stdout}\n{driver.stderr}")
        return got["ENTRY"] - start, got["CONNECTED"] - start
    finally:
        for p in procs:
            os.killpg(p.pid, 15)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


def with_muster(client: Client, trial: int) -> tuple[float, float, float]:
    """Seconds from the apply to the entrypoint's start, its ray.init, and the cluster ready."""
    name = f"bench-{trial}"
    start = time.time()
    client.apply([rayjob(name)])

    def finished() -> dict | None:
        status = client.get("RayJob", name, "default").get("status") or {}
        return status if status.get("jobDeploymentStatus") in ("Complete", "Failed") else None

    status = wait_for(finished, timeout=300, what=f"RayJob {name}")
    with client.logs(status["submitter"], "default") as stream:
        log = "".join(stream)
    got = marks(log)
    if status["jobStatus"] != "SUCCEEDED" or set(got) != {"ENTRY", "CONNECTED"}:
        raise RuntimeError(f"RayJob {name} did not succeed: {status}\n{log}")
    cluster_ready = epoch(_cluster_ready_time(client, name)) or start
    client.delete("RayJob", name, "default")
    return got["ENTRY"] - start, got["CONNECTED"] - start, cluster_ready - start


def _cluster_ready_time(client: Client, job: str) -> str | None:
    """When the job's cluster first became ready (its Ready event, the cluster being gone)."""
    for event in client.list("Event", "default")["items"]:
        obj = event.get("involvedObject") or {}
        if obj.get("name") == f"{job}-raycluster" and event.get("reason") == "Ready":
            return event.get("firstTimestamp")
    return None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    if not Path(RAY).exists():
        print("the ray extra is not installed (pip install -e '.[ray]')")
        return 1
    hand: list[tuple[float, float]] = []
    ours: list[tuple[float, float, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp,
        MusterUp(Path(tmp) / "home", extra_args=["--fake-gpus", "1"]) as up,
        Client(up.url, up.token) as client,
    ):
        for trial in range(args.trials):
            hand.append(by_hand())
            ours.append(with_muster(client, trial))
            (h_entry, h_init), (m_entry, m_init, m_ready) = hand[-1], ours[-1]
            print(
                f"trial {trial}: by hand entry {h_entry:.2f}s init {h_init:.2f}s | "
                f"RayJob entry {m_entry:.2f}s init {m_init:.2f}s (cluster ready {m_ready:.2f}s)",
                flush=True,
            )
    med = [statistics.median(col) for col in zip(*hand, strict=True)]
    mine = [statistics.median(col) for col in zip(*ours, strict=True)]
    print(f"cores: {os.cpu_count()}; trials: {args.trials} (medians)")
    print(
        f"by hand (ray start x2 + driver): entrypoint running after {med[0]:.2f}s, "
        f"ray.init done {med[1]:.2f}s"
    )
    print(
        f"RayJob (muster apply):           entrypoint running after {mine[0]:.2f}s, ray.init done "
        f"{mine[1]:.2f}s; cluster ready after {mine[2]:.2f}s"
    )
    print(f"ratio RayJob / by hand (entrypoint running): {mine[0] / med[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
