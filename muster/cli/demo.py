"""``muster demo``: a guided run of the whole control plane on a throwaway server.

It starts the API server with the manager (controllers, scheduler loop, local runtime with
four fake GPUs) in a temporary MUSTER_HOME, then runs real ``muster`` commands on the
manifests in ``examples/quickstart/`` and prints each command with its output: the node and
its GPUs, the queues, a two-worker TrainingJob admitted, running and succeeded, the
environment each replica saw, a rejected manifest, a delete. Then a preemption, followed
live (:mod:`muster.cli.demo_preempt`): a low-priority two-replica job borrowing another
team's GPU checkpoints on SIGTERM, waits for the urgent job, resumes and finishes. It needs
no GPU and no torch, and nothing outside the temporary directory is touched; its processes
end with it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import typer

from muster.cli.app import app, console
from muster.cli.demo_preempt import preemption_act

__all__ = ["demo"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "quickstart"
_GPUS = "4"


@app.command()
def demo() -> None:
    """Tour the control plane on a throwaway server with fake GPUs (about a minute)."""
    from muster.controllers.manager import ManagerConfig
    from muster.sdk.client import Client
    from muster.server.embedded import serve_in_thread
    from muster.server.hooks import server_hooks
    from muster.store import open_store

    if not (EXAMPLES / "train.yaml").exists():
        raise typer.BadParameter(
            f"the demo's manifests are missing: {EXAMPLES} (run it from a Muster checkout)"
        )
    token = "demo-token"
    with tempfile.TemporaryDirectory(prefix="muster-demo-") as home:
        store = open_store(f"sqlite:///{home}/muster.db")
        manager = ManagerConfig(fake_gpus=_GPUS, home=Path(home))
        saved = {k: os.environ.get(k) for k in ("MUSTER_HOME", "MUSTER_SERVER", "MUSTER_TOKEN")}
        try:
            with serve_in_thread(store, [token], server_hooks(manager)) as url:
                os.environ.update(MUSTER_HOME=home, MUSTER_SERVER=url, MUSTER_TOKEN=token)
                with Client(url, token) as client:
                    _tour(url, client, Path(home))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            store.close()
    _say("The server stopped; the demo's MUSTER_HOME is gone.")


def _tour(url: str, client: object, home: Path) -> None:
    from muster.sdk.client import Client
    from muster.util import wait_for

    assert isinstance(client, Client)
    rel = os.path.relpath(EXAMPLES, Path.cwd()) if Path.cwd() in EXAMPLES.parents else str(EXAMPLES)
    _say(
        f"A Muster control plane is up at {url}: the API server, the scheduler loop and the "
        f"controllers, running pods as local processes, with SQLite in a temporary MUSTER_HOME."
    )
    _say(
        f"This machine registered itself as a Node, with {_GPUS} fake GPUs (`muster up --fake-gpus {_GPUS}`):"
    )
    wait_for(lambda: client.list("Node")["items"], timeout=30, what="the node to register")
    _run("get", "nodes")
    _say("A first start creates a default flavor and queues; the ClusterQueue's quota follows the nodes:")
    wait_for(lambda: _gpu_quota(client) == _GPUS, timeout=30, what="the default queue's quota")
    _run("get", "clusterqueues", "-o", "wide")
    _say("Add a team queue and a priority, then a two-worker job (one GPU each), and follow it:")
    states: list[str] = []
    start = client.list("TrainingJob")["metadata"]["resourceVersion"]
    stream = client.watch("TrainingJob", resource_version=start)
    reader = threading.Thread(target=lambda: _follow(stream, states), daemon=True)
    reader.start()
    _run("apply", "-f", f"{rel}/queues.yaml")
    _run("apply", "-f", f"{rel}/train.yaml")
    wait_for(lambda: "Succeeded" in states, timeout=120, what="the job to succeed")
    stream.close()
    _say("Its states, as `muster get trainingjobs -w` shows them:")
    for line in _dedup(states):
        console.print(f"  trainingjob/mnist  {line}", markup=False)
    _run("get", "workloads", "-o", "wide")
    _run("get", "pods")
    _say("The environment each replica saw (docs/trainingjob.md; CUDA_VISIBLE_DEVICES is its bound GPU):")
    for log in sorted((home / "logs" / "default").glob("mnist-worker-*/trainer.log")):
        console.print(f"  {log.parent.name}: {log.read_text().strip()}", markup=False)
    _run("describe", "trainingjob", "mnist")
    _say("A manifest with mistakes is rejected whole, naming file, document, field and rule:")
    _run("apply", "-f", f"{rel}/broken/job.yaml")
    _say("Deleting the job removes its Workload and pods too:")
    _run("delete", "-f", f"{rel}/train.yaml")
    wait_for(lambda: not client.list("Pod")["items"], timeout=30, what="the pods to go")
    _run("get", "pods")
    preemption_act(client, home)


def _follow(stream: object, states: list[str]) -> None:
    from muster.cli.columns import COLUMNS, row

    state = next(c for c in COLUMNS["TrainingJob"] if c.header == "STATE")
    for event in stream:  # type: ignore[attr-defined]
        states.append(row(event["object"], [state])[0])


def _dedup(states: list[str]) -> list[str]:
    out: list[str] = []
    for s in states:
        if s != "<none>" and (not out or out[-1] != s):
            out.append(s)
    return out


def _gpu_quota(client: object) -> str | None:
    cq = client.get("ClusterQueue", "default")  # type: ignore[attr-defined]
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == "nvidia.com/gpu":
                    return str(r["nominalQuota"])
    return None


def _run(*args: str) -> None:
    console.print(f"\n$ muster {' '.join(args)}", style="bold cyan", markup=False)
    try:
        code = app(list(args), prog_name="muster", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    if code:  # a command's own exit status (2 for the broken manifest)
        console.print(f"(exit status {code})", style="dim", markup=False)


def _say(text: str) -> None:
    console.print(f"\n# {text}", style="green", markup=False)
