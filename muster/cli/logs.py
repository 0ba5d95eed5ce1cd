"""``muster logs POD | job/NAME | workflow/NAME --task T | rayjob/NAME | raycluster/NAME
[--all-replicas] [-f] [--previous] [-c CONTAINER] [--tail N]``.

``rayjob/NAME`` is its submitter pod of the latest run (the entrypoint's output);
``raycluster/NAME`` its head pod.

A job's replicas are its pods ``<job>-<replica type>-<index>`` (docs/control-plane.md);
``job/NAME`` alone shows the master (or worker-0), ``--all-replicas`` every replica with
each line prefixed ``[master-0]``, ``[worker-1]``. Following every replica keeps going
across restarts and preemptions (a new incarnation of a pod is followed from its start)
until the job has finished and every stream has ended. ``workflow/NAME --task T`` is the
latest attempt of task ``T`` (``train``, or one run of a fan-out: ``train(1)``): its pod, or
for a TrainingJob task that job, as above.
"""

# No `from __future__ import annotations` here: Typer would evaluate the string annotations of
# the commands again on every call (docs/cli.md, "Start-up").

import queue
import sys
import threading
import time
from typing import Annotated, Any

import typer

from muster.api.conditions import latest_condition
from muster.api.labels import (
    JOB_NAME_LABEL,
    WORKFLOW_ATTEMPT_LABEL,
    WORKFLOW_LABEL,
    WORKFLOW_NODE_ANNOTATION,
    WORKFLOW_TASK_LABEL,
    pod_name,
    replica_name,
)
from muster.cli.app import app, err_console
from muster.cli.common import (
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    connect,
    fail,
    handle_errors,
    resolve_target,
)
from muster.sdk.client import Client, LogStream
from muster.sdk.errors import ApiError, ApiNotFound

__all__ = ["job_replicas", "logs", "ray_log_pod", "workflow_task_target"]

_FINISHED = ("Succeeded", "Failed")
_POLL_S = 0.5  # how often a follow of every replica looks for new pods


@app.command()
def logs(
    target: Annotated[
        str,
        typer.Argument(
            help="POD, pod/NAME, job/NAME (a TrainingJob), workflow/NAME with --task, rayjob/NAME "
            "(the entrypoint's output) or raycluster/NAME (its head)."
        ),
    ],
    task: Annotated[
        str | None, typer.Option("--task", help="The workflow task (e.g. train, or train(1) of a fan-out).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Stream new output as it is written.")
    ] = False,
    all_replicas: Annotated[
        bool, typer.Option("--all-replicas", help="Every replica of the job, lines prefixed \\[worker-1].")
    ] = False,
    previous: Annotated[
        bool, typer.Option("--previous", "-p", help="The previous incarnation's log (before a restart).")
    ] = False,
    container: Annotated[
        str | None, typer.Option("--container", "-c", help="Container, when a pod has several.")
    ] = None,
    tail: Annotated[
        int | None, typer.Option("--tail", min=0, help="Only the last N lines (of each).")
    ] = None,
    namespace: NamespaceOpt = "default",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Print a pod's or a job's output."""
    with handle_errors():
        kind, name = resolve_target(
            target, ("Pod", "TrainingJob", "Workflow", "RayJob", "RayCluster"), default_kind="Pod"
        )
        if (kind == "Workflow") != (task is not None):
            fail("--task goes with workflow/NAME, and workflow/NAME needs --task", 2)
        if follow and previous:
            fail("--follow and --previous cannot be combined: a previous log no longer grows", 2)
        with connect(server, token) as client:
            if kind == "Workflow":
                kind, name = workflow_task_target(client, name, str(task), namespace)
            elif kind in ("RayJob", "RayCluster"):
                kind, name = "Pod", ray_log_pod(client, kind, name, namespace)
            if all_replicas and kind != "TrainingJob":
                fail("--all-replicas needs job/NAME (or a workflow task that is a TrainingJob)", 2)
            if kind == "Pod":
                _one(client, name, namespace, container, follow, previous, tail)
                return
            job = client.get("TrainingJob", name, namespace)
            replicas = job_replicas(job)
            if not all_replicas:
                _one(client, replicas[0][1], namespace, container, follow, previous, tail)
            elif follow:
                _Follower(client, job, container, tail).run()
            else:
                _each(client, replicas, namespace, container, previous, tail)


def ray_log_pod(client: Client, kind: str, name: str, namespace: str) -> str:
    """The pod whose log a RayJob (its latest submitter) or a RayCluster (its head) shows."""
    obj = client.get(kind, name, namespace)
    status = obj.get("status") or {}
    pod = status.get("submitter") if kind == "RayJob" else (status.get("head") or {}).get("podName")
    if not pod:
        what = "its cluster is not ready yet" if kind == "RayJob" else "it has not been admitted yet"
        fail(f"{kind.lower()}/{name} has no log yet: {what} (see `muster describe {kind.lower()} {name}`)")
    return str(pod)


def workflow_task_target(client: Client, workflow: str, task: str, namespace: str) -> tuple[str, str]:
    """``("Pod", name)`` or ``("TrainingJob", name)`` of the latest attempt of a workflow task."""
    wf = client.get("Workflow", workflow, namespace)
    node = ((wf.get("status") or {}).get("nodes") or {}).get(task)
    if node is None:
        known = ", ".join(sorted((wf.get("status") or {}).get("nodes") or {})) or "none yet"
        fail(f"workflow/{workflow} has no task {task!r} (tasks: {known})")
    if node.get("children"):
        fail(f"task {task} fans out; name one run: {', '.join(node['children'])}")
    selector = f"{WORKFLOW_LABEL}={workflow},{WORKFLOW_TASK_LABEL}={task.split('(', 1)[0]}"
    pods = [
        p
        for p in client.list("Pod", namespace, selector)["items"]
        if (p["metadata"].get("annotations") or {}).get(WORKFLOW_NODE_ANNOTATION, task) == task
    ]
    if not pods:
        phase = node.get("phase", "Pending")
        why = (
            "its outputs came from the cache"
            if phase == "Cached"
            else f"it is {phase}: {node.get('message', '')}"
        )
        fail(f"task {task} of workflow/{workflow} has no pod: {why}")
    latest = max(int((p["metadata"].get("labels") or {}).get(WORKFLOW_ATTEMPT_LABEL) or 0) for p in pods)
    pods = [
        p for p in pods if int((p["metadata"].get("labels") or {}).get(WORKFLOW_ATTEMPT_LABEL) or 0) == latest
    ]
    job = (pods[0]["metadata"].get("labels") or {}).get(JOB_NAME_LABEL)
    return ("TrainingJob", job) if job else ("Pod", pods[0]["metadata"]["name"])


def job_replicas(job: dict[str, Any]) -> list[tuple[str, str]]:
    """``(replica, pod name)`` of every replica of a TrainingJob, master (chief, launcher) first."""
    from muster.api.trainingjob import REPLICA_TYPES

    name = job["metadata"]["name"]
    out = []
    for rtype in REPLICA_TYPES:
        spec = (job["spec"].get("replicaSpecs") or {}).get(rtype)
        for i in range(int((spec or {}).get("replicas") or 0) if spec else 0):
            out.append((f"{rtype.lower()}-{i}", pod_name(name, rtype, i)))
    return out


def _one(
    client: Client,
    pod: str,
    namespace: str,
    container: str | None,
    follow: bool,
    previous: bool,
    tail: int | None,
) -> None:
    stream = client.logs(pod, namespace, container, follow=follow, previous=previous, tail_lines=tail)
    try:
        stream.open()
    except ApiError as exc:
        if not (follow and exc.reason == "PodPending"):
            raise
        err_console.print(f"pod {pod} has not started yet; waiting for it", markup=False)
        stream = _when_started(client, pod, namespace, container, tail)
    try:
        for line in stream:
            _write(line)
    except KeyboardInterrupt:
        pass
    finally:
        stream.close()


def _when_started(
    client: Client, pod: str, namespace: str, container: str | None, tail: int | None
) -> LogStream:
    """Open a follow once the pod has started (Ctrl-C gives up)."""
    while True:
        stream = client.logs(pod, namespace, container, follow=True, tail_lines=tail)
        try:
            stream.open()
            return stream
        except ApiError as exc:
            if exc.reason != "PodPending":
                raise
        time.sleep(_POLL_S)


def _each(
    client: Client,
    replicas: list[tuple[str, str]],
    namespace: str,
    container: str | None,
    previous: bool,
    tail: int | None,
) -> None:
    """Every replica's log in turn (what is there now), each line prefixed."""
    shown = 0
    for replica, pod in replicas:
        try:
            lines = list(client.logs(pod, namespace, container, previous=previous, tail_lines=tail))
        except (ApiNotFound, ApiError) as exc:
            if isinstance(exc, ApiNotFound) or exc.reason == "PodPending":
                err_console.print(f"[{replica}] no log yet", markup=False)
                continue
            raise
        shown += 1
        for line in lines:
            _write(_prefixed(replica, line))
    if not shown:
        fail("no replica of the job has a log yet; see `muster why` for why it has not started")


class _Follower:
    """Follows every replica of a job: a reader thread per pod incarnation, one printer."""

    def __init__(self, client: Client, job: dict[str, Any], container: str | None, tail: int | None) -> None:
        self.client = client
        self.name = job["metadata"]["name"]
        self.namespace = job["metadata"].get("namespace") or "default"
        self.container = container
        self.tail = tail
        self.lines: queue.Queue[str] = queue.Queue()
        self.active: dict[str, LogStream] = {}  # by pod uid
        self.done: set[str] = set()  # pod uids whose stream ended
        self.seen: set[str] = set()  # pod names streamed at least once (--tail applies to the first)
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            while True:
                finished = self._discover()
                self._print_for(_POLL_S)
                with self.lock:
                    idle = not self.active
                if finished and idle:
                    self._print_for(0)
                    return
        except KeyboardInterrupt:
            pass
        finally:
            with self.lock:
                streams = list(self.active.values())
            for stream in streams:
                stream.close()

    def _discover(self) -> bool:
        """Start reading every started pod incarnation not read yet; whether the job is over."""
        selector = f"{JOB_NAME_LABEL}={self.name}"
        for pod in self.client.list("Pod", self.namespace, selector)["items"]:
            uid = pod["metadata"].get("uid") or pod["metadata"]["name"]
            phase = (pod.get("status") or {}).get("phase") or "Pending"
            with self.lock:
                known = uid in self.active or uid in self.done
            if phase != "Pending" and not known:
                self._start(pod, uid)
        try:
            job = self.client.get("TrainingJob", self.name, self.namespace)
        except ApiNotFound:
            return True  # deleted: nothing more will run
        state = latest_condition(job)
        return state is not None and state.get("type") in _FINISHED

    def _start(self, pod: dict[str, Any], uid: str) -> None:
        name = pod["metadata"]["name"]
        tail = self.tail if name not in self.seen else None
        stream = self.client.logs(name, self.namespace, self.container, follow=True, tail_lines=tail)
        try:
            stream.open()
        except ApiError as exc:
            if isinstance(exc, ApiNotFound) or exc.reason == "PodPending":
                return  # no output yet: the next look tries again
            raise
        self.seen.add(name)
        with self.lock:
            self.active[uid] = stream
        prefix = replica_name(pod)
        threading.Thread(target=self._read, args=(stream, uid, prefix), daemon=True).start()

    def _read(self, stream: LogStream, uid: str, prefix: str) -> None:
        try:
            for line in stream:
                self.lines.put(_prefixed(prefix, line))
        except ApiError as exc:
            self.lines.put(_prefixed(prefix, f"(log stream ended: {exc.message})\n"))
        finally:
            with self.lock:
                self.active.pop(uid, None)
                self.done.add(uid)

    def _print_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            _write(line)


def _prefixed(replica: str, line: str) -> str:
    return f"[{replica}] {line}" if line.endswith("\n") else f"[{replica}] {line}\n"


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
