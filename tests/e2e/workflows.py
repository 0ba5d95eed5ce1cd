"""Helpers for the end-to-end workflow tests: shell tasks, waiting for a workflow's phase,
and a cluster that deletes its workflows on the way out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from muster.sdk.client import Client
from muster.sdk.errors import ApiError
from muster.testing import wait_for
from muster.testing.up import MusterUp
from tests.e2e.jobs import cluster

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def workflow_cluster(home: Path, gpus: int = 2) -> Iterator[tuple[MusterUp, Client]]:
    """``muster up --fake-gpus N``; workflows are deleted first on the way out, so their pods
    stop before the cluster's own clean-up waits for every pod."""
    with cluster(home, gpus=gpus) as (up, client):
        try:
            yield up, client
        finally:
            if up.proc is not None:
                delete_workflows(client)


def delete_workflows(client: Client) -> None:
    for wf in client.list("Workflow")["items"]:
        try:
            client.delete("Workflow", wf["metadata"]["name"], wf["metadata"]["namespace"])
        except ApiError:
            pass


def sh(name: str, script: str, **fields: Any) -> Obj:
    """A task running ``sh -c script``."""
    container = {"name": "main", "command": ["sh", "-c", script]}
    return {"name": name, "template": {"spec": {"containers": [container]}}, **fields}


def workflow(name: str, *tasks: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"tasks": list(tasks), **spec},
    }


def wait_phase(
    client: Client, name: str, phases: tuple[str, ...] = ("Succeeded",), timeout: float = 120
) -> Obj:
    """Wait until workflow ``name`` is in one of ``phases``; an other end fails at once."""
    ends = {"Succeeded", "Failed", "Error", *phases}

    def check() -> Obj | None:
        wf = client.get("Workflow", name, "default")
        return wf if (wf.get("status") or {}).get("phase") in ends else None

    wf = wait_for(check, timeout=timeout, interval=0.1, what=f"workflow {name} to be {'/'.join(phases)}")
    assert wf["status"]["phase"] in phases, json.dumps(wf["status"], indent=1)
    return wf


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
