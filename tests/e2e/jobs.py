"""Helpers for the end-to-end job tests: ``muster up`` with fake GPUs, job documents, waits."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from muster.sdk.client import Client
from muster.sdk.errors import ApiError
from muster.testing import skip_or_fail, wait_for
from muster.testing.up import MusterUp

Obj = dict[str, Any]
PYTHON = sys.executable
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DDP_SCRIPT = str(HERE / "ddp_train.py")


@contextmanager
def cluster(home: Path, gpus: int = 4, port: int | None = None) -> Iterator[tuple[MusterUp, Client]]:
    """``muster up --fake-gpus N`` in ``home``; on the way out every job is deleted and its
    pods are waited out, so no test leaves processes behind."""
    with serve(home, ["--fake-gpus", str(gpus)], port=port) as pair:
        yield pair


@contextmanager
def serve(
    home: Path, args: list[str], port: int | None = None, timeout: float = 60
) -> Iterator[tuple[MusterUp, Client]]:
    """``muster up ARGS`` in ``home``, cleaned up as :func:`cluster` is."""
    up = MusterUp(home, port=port, extra_args=args).start(timeout=timeout)
    client = Client(up.url, up.token)
    try:
        yield up, client
    finally:
        try:
            if up.proc is not None:
                clean_up(client)
        finally:
            client.close()
            up.stop()


def clean_up(client: Client) -> None:
    # Experiments first: they would make their trials' jobs again.
    for kind in ("Experiment", "TrainingJob"):
        for obj in client.list(kind)["items"]:
            try:
                client.delete(kind, obj["metadata"]["name"], obj["metadata"]["namespace"])
            except ApiError:
                pass
    wait_for(lambda: not live_pods(client), timeout=120, what="every pod to stop")


def live_pods(client: Client) -> list[Obj]:
    return [
        p
        for p in client.list("Pod")["items"]
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def held_job(name: str, release: Path, **kwargs: Any) -> Obj:
    """A TrainingJob whose replicas run until the file ``release`` exists."""
    script = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.05)\n"
    return python_job(name, script, **kwargs)


def python_job(name: str, script: str, **kwargs: Any) -> Obj:
    """A TrainingJob whose replicas run ``python -c script`` (this interpreter: torch and all)."""
    return job_doc(name, [PYTHON, "-c", script], **kwargs)


def job_doc(
    name: str,
    command: list[str],
    workers: int = 1,
    master: bool = False,
    gpus: int = 1,
    restart_policy: str = "OnFailure",
    run_policy: Obj | None = None,
    env: dict[str, str] | None = None,
    memory: str | None = None,
    namespace: str = "default",
    **spec: Any,
) -> Obj:
    limits: Obj = {}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if memory:
        limits["memory"] = memory
    container: Obj = {"name": "main", "command": command}
    if limits:
        container["resources"] = {"limits": limits, "requests": {"cpu": "100m", **limits}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    template = {"spec": {"containers": [container], "terminationGracePeriodSeconds": 10}}
    replicas: Obj = {}
    if master:
        replicas["Master"] = {"replicas": 1, "restartPolicy": restart_policy, "template": template}
    if workers:
        replicas["Worker"] = {"replicas": workers, "restartPolicy": restart_policy, "template": template}
    body: Obj = {"replicaSpecs": replicas, **spec}
    if run_policy:
        body["runPolicy"] = run_policy
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def condition(obj: Obj, type_: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return None


def wait_condition(
    client: Client,
    kind: str,
    name: str,
    type_: str,
    reason: str | None = None,
    timeout: float = 60,
    namespace: str = "default",
) -> Obj:
    """Wait until ``kind/name`` has condition ``type_`` True (with ``reason``); returns the object."""

    def check() -> Obj | None:
        obj = client.get(kind, name, namespace)
        c = condition(obj, type_)
        ok = c is not None and c["status"] == "True" and (reason is None or c["reason"] == reason)
        return obj if ok else None

    try:
        return wait_for(check, timeout=timeout, interval=0.1, what=f"{kind} {name} to be {type_}")
    except TimeoutError as exc:
        obj = client.get(kind, name, namespace)
        raise TimeoutError(
            f"{exc}; conditions: {json.dumps((obj.get('status') or {}).get('conditions'), indent=1)}"
        ) from None


def progress(home: Path, job: str, namespace: str = "default") -> list[Obj]:
    """What ddp_train.py recorded in the job's checkpoint directory."""
    path = home / "checkpoints" / namespace / job / "progress.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pod_log(home: Path, pod: str, container: str = "main", namespace: str = "default") -> str:
    path = home / "logs" / namespace / pod / f"{container}.log"
    return path.read_text() if path.exists() else ""


def run_examples_as_written(monkeypatch: Any) -> None:
    """Set up for the examples' YAML, which runs ``python3 $(PWD)/examples/...`` and torch: the
    server started here gets the repository as its directory (skips without torch). Nothing
    puts this interpreter on PATH: the pods' ``python3`` is the virtual environment of the
    server (``.venv/bin/muster up``, as the README starts it), which has torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        skip_or_fail("torch is not installed (pip install -e '.[torch]')")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PWD", str(REPO))
    venv_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
