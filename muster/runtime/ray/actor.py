"""The pod actor: one Ray actor per pod, on the node the scheduler chose, running its containers.

The actor is a thin host for the local runtime's shim (``muster.runtime.local.shim``): for each
container it writes the shim's spec into a node-local pod directory and starts the shim with
``--owner`` naming the actor's process, so the container ends with the actor (a dead node, a
removed placement group, a stopped ``muster up``) instead of running on unwatched. The shim
detaches: Ray SIGKILLs a dying worker's children, which would orphan the container instead.
The shim does the rest exactly as on the local runtime: process group, signal relay, grace
then SIGKILL, memory limit (OOMKilled), exit status written atomically.

The driver (:class:`muster.runtime.ray.runtime.RayRuntime`) calls, without ever blocking its
loop (every call is an ObjectRef it waits on with the others):

* :meth:`PodActor.start`: create the volumes and working directories, start the shims; the
  node's identity comes back, so the driver checks the pod runs where Muster placed it;
* :meth:`PodActor.wait`: a long poll returning new log bytes and the shims' state and status
  records as soon as any changed (or after ``timeout``);
* :meth:`PodActor.stop`: ``stop.json`` then SIGTERM to every shim (the grace is the shim's);
* :meth:`PodActor.shutdown`: remove the pod's node-local files and scratch volumes, then exit.

A container's environment is the local runtime's contract plus ``MUSTER_RAY_NODE_ID`` (the
Ray node it runs on). The actor's environment is a Ray worker's; a container starts from the
raylet's (the node's) environment instead, read from ``/proc/<raylet pid>/environ``, so Ray's worker settings
(``OMP_NUM_THREADS=1`` for a zero-CPU actor, its debugger hook, its job id) do not leak in.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import ray

from muster.runtime.local.files import ContainerFiles, read_json, write_json
from muster.runtime.local.launch import LaunchPlan, base_environment, spec_document
from muster.runtime.local.shim import command as shim_command
from muster.runtime.local.tracking import LAUNCH_TIMEOUT, process_alive
from muster.runtime.local.volumes import make_links, remove_pod_volumes

__all__ = ["LOG_CHUNK", "NODE_ID_ENV", "PodActor", "node_environment"]

# Every container learns the Ray node it runs on (the node table's id), besides DESIGN §7's.
NODE_ID_ENV = "MUSTER_RAY_NODE_ID"
LOG_CHUNK = 1 << 20  # at most this many log bytes per container per wait() answer
_WAIT_STEP = 0.05  # how often a waiting call looks at the files
# Set by Ray in every worker; a container is no Ray worker.
_RAY_WORKER_VARS = ("OMP_NUM_THREADS", "PYTHONBREAKPOINT", "RAY_JOB_ID", "RAY_RAYLET_PID", "RAY_CLIENT_MODE")


def node_environment() -> dict[str, str]:
    """The node's environment (the raylet's), minus Muster's settings and the GPU selection."""
    raylet = os.environ.get("RAY_RAYLET_PID")
    if raylet:
        try:
            raw = Path(f"/proc/{raylet}/environ").read_bytes()
            pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
            return base_environment(
                {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
            )
        except OSError:
            pass
    return base_environment({k: v for k, v in os.environ.items() if k not in _RAY_WORKER_VARS})


class _Pod:
    """What the actor hosts: the pod's node-local directory and its containers' shims."""

    def __init__(self, pod_dir: Path, home: Path, uid: str, containers: list[str]) -> None:
        self.dir = pod_dir
        self.home = home
        self.uid = uid
        self.files = {name: ContainerFiles(pod_dir, name) for name in containers}
        self.launched: dict[str, float] = {}  # container -> when its shim was started (monotonic)
        self.lost: dict[str, str] = {}  # container -> why its shim ended without a status
        self.lock = threading.Lock()

    def shim(self, name: str) -> tuple[int, float] | None:
        """The detached shim's pid and start time, once it recorded them."""
        launch = read_json(self.files[name].launch)
        return None if launch is None else (launch["shim_pid"], launch["shim_create_time"])

    def shim_alive(self, name: str) -> bool:
        """Its shim runs, or was started moments ago and has not recorded itself yet."""
        shim = self.shim(name)
        if shim is None:
            started = self.launched.get(name)
            return started is not None and time.monotonic() - started < LAUNCH_TIMEOUT
        return process_alive(*shim)

    def signal_shims(self, sig: int) -> None:
        for name in self.files:
            shim = self.shim(name)
            if shim is not None and process_alive(*shim):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(shim[0], sig)


class PodActor:
    """Runs one pod's containers on this node (a Ray actor; see the module docstring)."""

    def __init__(self, pod_dir: str, home: str, uid: str, containers: list[str]) -> None:
        # The pod's records are the node's own (its temporary directory), never shared.
        self.pod = _Pod(Path(tempfile.gettempdir()) / "muster-ray" / pod_dir, Path(home), uid, containers)

    def start(self, plan: LaunchPlan, grace: float, memory: dict[str, Any] | None) -> dict[str, Any]:
        """Create the pod's directories and start one shim per container; where it runs."""
        pod = self.pod
        warnings: list[str] = []
        plan.volumes.create()
        for c in plan.containers:
            c.cwd.mkdir(parents=True, exist_ok=True)
            warnings.extend(make_links(c.mounts))
        pod.dir.mkdir(parents=True, exist_ok=True)
        base = node_environment()
        node_id = ray.get_runtime_context().get_node_id()
        for c in plan.containers:
            files = pod.files[c.name]
            log = pod.dir / f"{c.name}.log"
            log.touch()
            doc = spec_document(
                c,
                log=log,
                grace=grace,
                memory={**memory, "limit": c.memory_limit} if memory and c.memory_limit else None,
                cgroup_name=f"{pod.uid}.{c.name}",
            )
            doc["env"] = {**base, **c.env, NODE_ID_ENV: node_id}
            write_json(files.spec, doc)
        with pod.lock:
            for c in plan.containers:
                self._launch(c.name)
        return {
            "node_id": node_id,
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "warnings": warnings,
        }

    def wait(self, offsets: dict[str, int], known: dict[str, str], timeout: float) -> dict[str, Any]:
        """New output past ``offsets`` and every state or status record not in ``known``
        (container -> "waiting" | "running" | "terminated"), as soon as there is any."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self._look(offsets, known)
            if answer["changed"] or time.monotonic() >= deadline:
                return answer
            time.sleep(min(_WAIT_STEP, max(0.0, deadline - time.monotonic())))

    def stop(self, stop: dict[str, Any]) -> None:
        """Record the stop (reason, grace), then SIGTERM every shim still running."""
        pod = self.pod
        with pod.lock:
            pod.dir.mkdir(parents=True, exist_ok=True)
            write_json(pod.dir / "stop.json", stop)
            pod.signal_shims(signal.SIGTERM)

    def shutdown(self) -> None:
        """Forget the pod: kill what may be left, remove its node-local files, exit."""
        pod = self.pod
        with pod.lock:
            pod.signal_shims(signal.SIGKILL)  # its owner watch would end the container anyway
        shutil.rmtree(pod.dir, ignore_errors=True)
        remove_pod_volumes(pod.home, pod.uid)
        ray.actor.exit_actor()

    # -- internals -----------------------------------------------------------------------------

    def _launch(self, name: str) -> None:
        files = self.pod.files[name]
        owner = f"{os.getpid()}:{psutil.Process().create_time()!r}"
        argv = shim_command(files.pod_dir, name, "--owner", owner)
        try:
            with open(files.shim_log, "ab") as shim_log:
                # The shim forks and this first process exits at once (the shim detaches).
                subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=shim_log,
                    stderr=subprocess.STDOUT,
                    cwd=files.pod_dir,
                    start_new_session=True,
                    check=True,
                    timeout=30,
                )
        except (OSError, subprocess.SubprocessError) as exc:
            self.pod.lost[name] = f"cannot start its shim: {exc}"
            return
        self.pod.launched[name] = time.monotonic()

    def _look(self, offsets: dict[str, int], known: dict[str, str]) -> dict[str, Any]:
        pod = self.pod
        logs: dict[str, bytes] = {}
        states: dict[str, dict[str, Any]] = {}
        statuses: dict[str, dict[str, Any]] = {}
        lost: dict[str, str] = {}
        for name, files in pod.files.items():
            seen = known.get(name, "waiting")
            # The end is read before the output: an end seen here comes with all of its output.
            status = read_json(files.status) if seen != "terminated" else None
            with pod.lock:
                ended = name in pod.lost or not pod.shim_alive(name)
            chunk = _read_from(pod.dir / f"{name}.log", offsets.get(name, 0))
            if chunk:
                logs[name] = chunk
            if seen == "terminated":
                continue
            if seen == "waiting":
                state = read_json(files.state)
                if state is not None:
                    states[name] = state
            drained = len(chunk) < LOG_CHUNK  # else the end waits for the next answer
            if status is not None and drained:
                statuses[name] = status
            elif status is None and ended and drained and read_json(files.status) is None:
                lost[name] = pod.lost.get(name) or _shim_said(files.shim_log)
        changed = bool(logs or states or statuses or lost)
        return {"changed": changed, "logs": logs, "states": states, "statuses": statuses, "lost": lost}


def _read_from(path: Path, offset: int) -> bytes:
    with contextlib.suppress(OSError), open(path, "rb") as f:
        f.seek(offset)
        return f.read(LOG_CHUNK)
    return b""


def _shim_said(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    said = f": {lines[-1][:300]}" if lines else ""
    return f"its shim ended without recording the container's exit{said}"
