"""CPU that Muster's processes cost: the per-container shims and the control plane per 1,000
jobs, and the start-up of `muster` CLI verbs.

* shims: a LocalRuntime (no server) starts N one-container pods running `true`, each shim
  forked by the zygote (the default) or started as its own interpreter (MUSTER_SHIM_ZYGOTE=0).
  Each mode runs in a child process; its own CPU is the runtime's loop, its children's CPU is
  the shims, the zygote and the `true` processes.
* e2e: `muster up --fake-gpus 8` as a process, N one-pod TrainingJobs (`true`) applied in
  batches and run to completion. The server's own CPU is the control plane (API, store,
  controllers, scheduler, executor); what its descendants used (read once it has exited) is
  the shims, the zygote and the containers.
* cli: each verb run --runs times against a live server (`--runtime none`); wall and CPU
  time per call, p50 and p90, and the load average before and after (other work on the machine
  inflates wall time, and CPU time less so). Run with a warm bytecode cache
  (PYTHONDONTWRITEBYTECODE unset), as a user's machine has. With valgrind installed, also the
  instructions one call executes (millions; what load does not change, so runs on a busy
  machine compare), as callgrind counts them.

    .venv/bin/python benchmarks/process_cpu.py [--part shims,e2e,cli] [--pods 300] [--jobs 1000] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from muster.sdk.client import Client
from muster.testing.up import MusterUp, cli_env, muster_command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="shims,e2e,cli")
    parser.add_argument("--pods", type=int, default=300, help="pods of the shims part")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the e2e part")
    parser.add_argument("--runs", type=int, default=20, help="calls per CLI verb")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PODS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _shims_child(args.child[0] == "zygote", int(args.child[1]))
        return
    parts = args.part.split(",")
    if "shims" in parts:
        _shims(args.pods)
    if "e2e" in parts:
        _e2e(args.jobs)
    if "cli" in parts:
        _cli(args.runs)


# -- shims -------------------------------------------------------------------------------------


def _shims(pods: int) -> None:
    print(f"== shims: {pods} pods running `true`, through a LocalRuntime (CPU ms per container)")
    for mode in ("exec", "zygote", "exec", "zygote"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", mode, str(pods)], capture_output=True, text=True, check=True
        )
        r = json.loads(out.stdout)
        print(
            f"  {mode:7s} runtime loop {r['own_ms']:6.1f}   shim+container {r['children_ms']:6.1f}   "
            f"wall {r['wall_ms']:6.1f} per container"
        )


def _shims_child(zygote: bool, pods: int) -> None:
    from muster.runtime.base import Container, DeviceBinding, PodLaunch, PodRef
    from muster.runtime.local.runtime import LocalRuntime

    with tempfile.TemporaryDirectory(prefix="muster-shims-") as tmp:
        runtime = LocalRuntime(Path(tmp), zygote=zygote)
        own0, t0 = time.process_time(), time.perf_counter()
        pending = set()
        for i in range(pods):
            ref = PodRef("default", f"p{i}", f"u{i}")
            runtime.start(PodLaunch(ref, (Container("main", ("true",)),)), DeviceBinding())
            pending.add(ref)
            while len(pending) >= 8:  # eight at a time, as eight GPUs would run them
                pending -= _finished(runtime)
        while pending:
            pending -= _finished(runtime)
        own, wall = time.process_time() - own0, time.perf_counter() - t0
        runtime.close()
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "own_ms": 1000 * own / pods,
                "children_ms": 1000 * (ch.ru_utime + ch.ru_stime) / pods,
                "wall_ms": 1000 * wall / pods,
            }
        )
    )


def _finished(runtime: object) -> set:
    done = set()
    for change in runtime.poll(0.05):  # type: ignore[attr-defined]
        if change.phase in ("Succeeded", "Failed"):
            runtime.release(change.ref)  # type: ignore[attr-defined]
            done.add(change.ref)
    return done


# -- e2e ----------------------------------------------------------------------------------------


def _e2e(jobs: int) -> None:
    print(f"== e2e: {jobs} one-pod jobs (`true`) through `muster up --fake-gpus 8` (CPU s per 1,000 jobs)")
    for mode in ("exec", "zygote"):
        os.environ["MUSTER_SHIM_ZYGOTE"] = "1" if mode == "zygote" else "0"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with tempfile.TemporaryDirectory(prefix="muster-bench-") as tmp:
            up = MusterUp(Path(tmp), extra_args=["--fake-gpus", "8", "--log-level", "warning"]).start()
            try:
                with Client(up.url, up.token, timeout=120) as client:
                    t0 = time.perf_counter()
                    for first in range(0, jobs, 100):
                        client.apply([_job(i) for i in range(first, min(jobs, first + 100))])
                    _wait_done(client, jobs)
                    wall = time.perf_counter() - t0
                assert up.proc is not None
                times = psutil.Process(up.proc.pid).cpu_times()
                server = times.user + times.system
            finally:
                up.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        scale = 1000 / jobs
        shims = (total - server) * scale
        print(
            f"  {mode:7s} control plane {server * scale:6.1f} s   shims+containers {shims:6.1f} s"
            f"   ({jobs / wall:.1f} jobs/s)"
        )
    os.environ.pop("MUSTER_SHIM_ZYGOTE", None)


def _job(i: int) -> dict:
    container = {"name": "main", "command": ["true"], "resources": {"limits": {"nvidia.com/gpu": 1}}}
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "metadata": {"name": f"job-{i:05d}"},
        "spec": {
            "replicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}
        },
    }


def _wait_done(client: Client, jobs: int) -> None:
    deadline = time.monotonic() + 3600
    while time.monotonic() < deadline:
        items = client.list("TrainingJob")["items"]
        done = sum(1 for j in items if (j.get("status") or {}).get("completionTime"))
        if done >= jobs:
            return
        time.sleep(1.0)
    raise TimeoutError("jobs did not finish")


# -- cli ----------------------------------------------------------------------------------------


def _cli(runs: int) -> None:
    print(f"== cli: each verb {runs} times against a live server (seconds per call)")
    with tempfile.TemporaryDirectory(prefix="muster-cli-") as tmp:
        home = Path(tmp)
        job = home / "job.yaml"
        job.write_text(
            "apiVersion: muster.dev/v1\nkind: TrainingJob\nmetadata: {name: one}\nspec:\n  replicaSpecs:\n"
            "    Master:\n      replicas: 1\n      template:\n        spec:\n          containers:\n"
            "          - {name: main, command: ['true']}\n"
        )
        env = {k: v for k, v in cli_env(home).items() if k != "PYTHONDONTWRITEBYTECODE"}
        with MusterUp(home, extra_args=["--runtime", "none", "--log-level", "warning"]):
            log = home / "logs" / "default" / "one-master-0"
            log.mkdir(parents=True, exist_ok=True)
            (log / "main.log").write_text("hello\n")
            verbs = {
                "version": ["version"],
                "get": ["get", "trainingjobs"],
                "apply -f one file": ["apply", "-f", str(job)],
                "logs": ["logs", "one-master-0"],
            }
            print(f"  load average before: {_loadavg()}")
            for name, argv in verbs.items():
                subprocess.run([*muster_command(), *argv], env=env, capture_output=True)  # warm the caches
                walls, cpus = [], []
                for _ in range(runs):
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.perf_counter()
                    subprocess.run([*muster_command(), *argv], env=env, capture_output=True)
                    walls.append(time.perf_counter() - t0)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
                print(
                    f"  {name:18s} wall p50 {_pct(walls, 50):.3f} p90 {_pct(walls, 90):.3f}   "
                    f"cpu p50 {_pct(cpus, 50):.3f} p90 {_pct(cpus, 90):.3f}{_instructions(argv, env)}"
                )
            print(f"  load average after: {_loadavg()}")


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _instructions(argv: list[str], env: dict[str, str]) -> str:
    """``   instructions N M`` of one call under callgrind; empty without valgrind."""
    if shutil.which("valgrind") is None:
        return ""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *muster_command(), *argv],
        env=env,
        capture_output=True,
        text=True,
    )
    counted = [line.split()[-1] for line in out.stderr.splitlines() if "Collected :" in line]
    return f"   instructions {int(counted[0]) / 1e6:.0f} M" if counted else ""


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


if __name__ == "__main__":
    main()
