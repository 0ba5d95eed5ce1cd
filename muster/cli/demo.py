"""``muster demo``: a guided run of the CLI against a throwaway server.

It starts the API server (with the defaults of a first start) in a temporary MUSTER_HOME,
then runs real ``muster`` commands on the manifests in ``examples/quickstart/`` and prints
each command with its output: queues, a TrainingJob, a rejected manifest, a watch, a delete.
Nothing outside the temporary directory is touched.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import typer

from muster.cli.app import app, console

__all__ = ["demo"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@app.command()
def demo() -> None:
    """Tour the API server, store and CLI on a throwaway server (about a minute)."""
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
        try:
            with serve_in_thread(store, [token], server_hooks()) as url:
                saved = {k: os.environ.get(k) for k in ("MUSTER_HOME", "MUSTER_SERVER", "MUSTER_TOKEN")}
                os.environ.update(MUSTER_HOME=home, MUSTER_SERVER=url, MUSTER_TOKEN=token)
                try:
                    _tour(url, Client(url, token))
                finally:
                    for key, value in saved.items():
                        if value is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = value
        finally:
            store.close()


def _tour(url: str, client: object) -> None:
    from muster.sdk.client import Client

    assert isinstance(client, Client)
    rel = os.path.relpath(EXAMPLES, Path.cwd()) if Path.cwd() in EXAMPLES.parents else str(EXAMPLES)
    _say(f"A Muster API server is up at {url} (SQLite in a temporary MUSTER_HOME).")
    _say(
        "A first start creates a default flavor and queues; the ClusterQueue's quota is the sum of "
        "the registered nodes (none yet here, so 0 until a runtime registers this machine):"
    )
    _run("get", "clusterqueues", "-o", "wide")
    _run("get", "localqueues", "-A")
    _say("Add a team queue and a priority, then a two-worker training job:")
    _run("apply", "-f", f"{rel}/queues.yaml")
    _run("apply", "-f", f"{rel}/train.yaml")
    _run("get", "trainingjobs")
    _run("describe", "trainingjob", "mnist")
    _say("A manifest with mistakes is rejected whole, naming file, document, field and rule:")
    _run("apply", "-f", f"{rel}/broken/job.yaml")
    _run("get", "trainingjobs", "-o", "name")
    _say("Watch streams every change in order; here a re-apply with a new label, then a delete:")
    events: list[str] = []
    start = client.list("TrainingJob")["metadata"]["resourceVersion"]
    stream = client.watch("TrainingJob", resource_version=start)
    reader = threading.Thread(
        target=lambda: events.extend(
            f"{e['type']:<9} trainingjob/{e['object']['metadata']['name']}" for e in stream
        ),
        daemon=True,
    )
    reader.start()
    job = client.get("TrainingJob", "mnist")
    job["metadata"]["labels"]["stage"] = "tuning"
    client.apply([job])
    _run("delete", "-f", f"{rel}/train.yaml")
    _wait_for_events(events, 2)
    stream.close()
    for line in events:
        console.print(f"  {line}", markup=False)
    _say("Next: `muster up` runs this server for real; see README.md for the five-minute tour.")


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


def _wait_for_events(events: list[str], count: int) -> None:
    from muster.testing import wait_for

    wait_for(lambda: len(events) >= count, timeout=10, what=f"{count} watch events")
